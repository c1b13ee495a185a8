"""SavedModel export: raw-text and tf.Example scoring signatures around the trained model.

Signatures:
- serving_default(query: string [None], document: string [None]) -> {"score": float32 [None]}
  tokenizes in-graph with the TransformGraph (the same graph that produced the training ids),
  truncates to the training max lengths and scores.
- score_examples(examples: string [None]) -> {"score": float32 [None]} over serialized
  dev/test-format tf.Examples (one candidate each: query_ids, doc_ids, doc_lengths).
- rank_candidates(query: string [], documents: string [None], first_stage_scores: float32 [None])
  -> {"fused_score": float32 [None], "reranker_score": float32 [None]}: one query's candidate
  list, fused with the first stage as the Trainer chose (trainer_module/fusion.py; min-max per
  list, alpha * reranker + (1 - alpha) * first stage). Without fusion alpha is 1 (the fused score
  is the reranker's, min-max normalised: the same order).
The fusion settings are also written to assets.extra/fusion.json for the evaluator and the card.
"""

from __future__ import annotations

import json
import logging
import os
import uuid

import tensorflow as tf
import tensorflow_transform as tft
import tf_keras as keras

from trainer_module import fusion as fusion_lib

TOKEN_IDS_KEY = "token_ids"
RAW_TEXT_KEY = "text"

_EXAMPLE_SPEC = {
    "query_ids": tf.io.VarLenFeature(tf.int64),
    "doc_ids": tf.io.VarLenFeature(tf.int64),
    "doc_lengths": tf.io.VarLenFeature(tf.int64),
}


def _at_least_one_column(ids: tf.Tensor) -> tf.Tensor:
    # Models need a non-empty length axis; an all-[PAD] column changes no score.
    return tf.pad(ids, [[0, 0], [0, tf.maximum(0, 1 - tf.shape(ids)[1])]])


class RerankerModule(tf.Module):
    def __init__(
        self,
        model: keras.Model,
        tft_layer: keras.Model,
        max_query_length: int,
        max_doc_length: int,
        fusion_alpha: float | None = None,
    ):
        super().__init__()
        self.fusion_alpha = 1.0 if fusion_alpha is None else float(fusion_alpha)
        self.model = model
        self.tft_layer = tft_layer  # tracked: its vocab asset and tables are saved with us
        self.max_query_length = max_query_length
        self.max_doc_length = max_doc_length

    def _score(self, query_ids: tf.Tensor, doc_ids: tf.Tensor) -> dict[str, tf.Tensor]:
        query_ids = _at_least_one_column(query_ids[:, : self.max_query_length])
        doc_ids = _at_least_one_column(doc_ids[:, : self.max_doc_length])
        scores = self.model((query_ids, doc_ids), training=False)
        return {"score": tf.cast(scores, tf.float32)}

    def _tokenize(self, texts: tf.Tensor) -> tf.Tensor:
        sparse = self.tft_layer({RAW_TEXT_KEY: texts})[TOKEN_IDS_KEY]
        return tf.sparse.to_dense(tf.cast(sparse, tf.int64))

    @tf.function(
        input_signature=[
            tf.TensorSpec([None], tf.string, name="query"),
            tf.TensorSpec([None], tf.string, name="document"),
        ]
    )
    def serving_default(self, query: tf.Tensor, document: tf.Tensor) -> dict[str, tf.Tensor]:
        return self._score(self._tokenize(query), self._tokenize(document))

    @tf.function(
        input_signature=[
            tf.TensorSpec([], tf.string, name="query"),
            tf.TensorSpec([None], tf.string, name="documents"),
            tf.TensorSpec([None], tf.float32, name="first_stage_scores"),
        ]
    )
    def rank_candidates(
        self, query: tf.Tensor, documents: tf.Tensor, first_stage_scores: tf.Tensor
    ) -> dict[str, tf.Tensor]:
        docs = self._tokenize(documents)
        query_ids = tf.tile(self._tokenize(query[None]), [tf.shape(docs)[0], 1])
        reranker = self._score(query_ids, docs)["score"]
        alpha = tf.constant(self.fusion_alpha, tf.float64)
        fused = alpha * fusion_lib.minmax_tf(reranker) + (1.0 - alpha) * fusion_lib.minmax_tf(
            first_stage_scores
        )
        return {"fused_score": tf.cast(fused, tf.float32), "reranker_score": reranker}

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="examples")])
    def score_examples(self, examples: tf.Tensor) -> dict[str, tf.Tensor]:
        ex = tf.io.parse_example(examples, _EXAMPLE_SPEC)
        query = tf.sparse.to_dense(ex["query_ids"])
        docs = tf.sparse.to_dense(ex["doc_ids"])
        # n = 1 by contract; still cut at the first document's length so extra candidates
        # of a malformed example cannot leak into the scored text.
        first_len = tf.sparse.to_dense(ex["doc_lengths"])[:, :1]
        in_first = tf.range(tf.shape(docs)[1], dtype=tf.int64)[None, :] < first_len
        return self._score(query, tf.where(in_first, docs, tf.zeros_like(docs)))


def _replace_dir(src: str, dst: str) -> None:
    if tf.io.gfile.exists(dst):
        tf.io.gfile.rmtree(dst)
    tf.io.gfile.makedirs(os.path.dirname(dst.rstrip("/")))
    try:
        tf.io.gfile.rename(src, dst)
    except (tf.errors.UnimplementedError, tf.errors.FailedPreconditionError):
        # Object stores cannot rename directories: copy, then drop the temp dir.
        for root, _, files in tf.io.gfile.walk(src):
            rel = os.path.relpath(root, src)
            out = os.path.normpath(os.path.join(dst, rel))
            tf.io.gfile.makedirs(out)
            for name in files:
                tf.io.gfile.copy(os.path.join(root, name), os.path.join(out, name), overwrite=True)
        tf.io.gfile.rmtree(src)


def export_serving_model(
    model: keras.Model,
    transform_graph_path: str,
    max_query_length: int,
    max_doc_length: int,
    serving_model_dir: str,
    fusion: dict | None = None,
) -> str:
    """Writes the SavedModel to a temp dir next to serving_model_dir, then moves it in place,
    so a crash never leaves a half-written model where the Pusher looks. `fusion` is
    run_fn.choose_fusion's dict (None: no fusion)."""
    tft_layer = tft.TFTransformOutput(transform_graph_path).transform_features_layer()
    alpha = fusion.get("alpha") if fusion else None
    module = RerankerModule(model, tft_layer, max_query_length, max_doc_length, alpha)
    tmp = f"{serving_model_dir.rstrip('/')}.tmp-{uuid.uuid4().hex[:8]}"
    tf.saved_model.save(
        module,
        tmp,
        signatures={
            "serving_default": module.serving_default.get_concrete_function(),
            "score_examples": module.score_examples.get_concrete_function(),
            "rank_candidates": module.rank_candidates.get_concrete_function(),
        },
    )
    fusion_file = os.path.join(tmp, fusion_lib.FUSION_FILE)
    tf.io.gfile.makedirs(os.path.dirname(fusion_file))
    with tf.io.gfile.GFile(fusion_file, "w") as f:  # inside the temp dir: renamed with it
        json.dump(fusion or {"mode": "none", "alpha": None}, f, indent=2, sort_keys=True)
    _replace_dir(tmp, serving_model_dir)
    logging.info("exported serving model to %s", serving_model_dir)
    return serving_model_dir
