"""SavedModel export: raw-text and tf.Example scoring signatures around the trained model.

Signatures:
- serving_default(query: string [None], document: string [None]) -> {"score": float32 [None]}
  tokenizes in-graph with the TransformGraph (the same graph that produced the training ids),
  truncates to the training max lengths and scores.
- score_examples(examples: string [None]) -> {"score": float32 [None]} over serialized
  dev/test-format tf.Examples (one candidate each: query_ids, doc_ids, doc_lengths).
"""

from __future__ import annotations

import logging
import os
import uuid

import tensorflow as tf
import tensorflow_transform as tft
import tf_keras as keras

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
    ):
        super().__init__()
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
) -> str:
    """Writes the SavedModel to a temp dir next to serving_model_dir, then moves it in place,
    so a crash never leaves a half-written model where the Pusher looks."""
    tft_layer = tft.TFTransformOutput(transform_graph_path).transform_features_layer()
    module = RerankerModule(model, tft_layer, max_query_length, max_doc_length)
    tmp = f"{serving_model_dir.rstrip('/')}.tmp-{uuid.uuid4().hex[:8]}"
    tf.saved_model.save(
        module,
        tmp,
        signatures={
            "serving_default": module.serving_default.get_concrete_function(),
            "score_examples": module.score_examples.get_concrete_function(),
        },
    )
    _replace_dir(tmp, serving_model_dir)
    logging.info("exported serving model to %s", serving_model_dir)
    return serving_model_dir
