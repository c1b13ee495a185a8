"""SavedModel export: raw-text and tf.Example scoring signatures around the trained model.

Signatures:
- serving_default(query: string [None], document: string [None]) -> {"score": float32 [None]}
  tokenizes in-graph with the TransformGraph (the same graph that produced the training ids),
  truncates to the training max lengths and scores.
- score_examples(examples: string [None]) -> {"score": float32 [None]} over serialized
  dev/test-format tf.Examples (one candidate each: query_ids, doc_ids, doc_lengths).
- rank_candidates(query: string [], documents: string [None], first_stage_scores: float32 [None])
  -> {"fused_score": float32 [None], "reranker_score": float32 [None]}: one query's candidate
  list, fused with the first stage as the Trainer chose (rankcore/fusion.py; min-max per
  list, alpha * reranker + (1 - alpha) * first stage). Without fusion alpha is 1 (the fused score
  is the reranker's, min-max normalised: the same order). A dual encoder with feedback
  (rankcore/feedback.py) scores the list with each candidate's vector moved towards its nearest
  candidates and the query's towards the top candidates (the first stage's, or those of a first
  pass fused at the model's alpha): this signature ranks as the RankingEvaluator ranks, the pair
  signatures score without feedback. Fusion and feedback are rankcore/ranking.py's functions on
  its TensorFlow backend: the code the Trainer and the evaluator run on numpy.
Dual encoders (a model with `embed_query` / `embed_doc`, trainer_module/models/dual_encoder.py)
also get:
- embed_texts(text: string [None]) -> {"embedding": float32 [None, H]}: raw text -> the model's
  L2-normalised document vector (the document tower's, which with frozen_documents is the
  checkpoint's), truncated to the document length (what indexing a corpus needs; the
  cosine of two vectors is the model's score). Queries longer than max_query_length tokens are
  cut shorter by the pair signatures than by this one.
- embed_query_ids / embed_doc_ids(ids: int64 [None, None]) -> {"embedding": float32 [None, H]}:
  the same over right-padded token ids (the examples' query_ids / doc_ids), truncated to the
  query / document length exactly as the pair signatures truncate. The RankingEvaluator embeds
  each distinct text of a split once through these and scores a pair by the dot product
  (components/ranking_evaluator/scoring.py), as sentence-transformers' util.semantic_search
  does with encode()d corpora (https://www.sbert.net/examples/applications/semantic-search/).
The fusion settings are also written to assets.extra/fusion.json for the evaluator and the card.

A cross-validation fold model, which is evaluated and never served, of a recipe with frozen
documents is exported by export_query_tower instead: its trained query tower alone
(QueryTowerModule: embed_query_ids giving the first hidden_size values of the whole model's
query vector), with query_tower.json (rankcore QueryTower, complete false) beside it. Its
frozen parts, a companion's part of each query vector and every document vector, are the same
checkpoints as the run's served model's, from which the RankingEvaluator takes them
(components/ranking_evaluator/frozen_parts.py). A whole export of such a model writes
query_tower.json too (complete), naming the frozen parts the evaluator checks.
"""

from __future__ import annotations

import json
import logging
import os
import types
import uuid
from typing import NamedTuple

import tensorflow as tf
import tensorflow_transform as tft
import tf_keras as keras
from tf_keras.src.saving.legacy.saved_model import utils as keras_saved_model_utils

from rankcore import example_format as fmt
from rankcore import feedback as feedback_lib
from rankcore import fusion as fusion_lib
from rankcore import ranking
from rankcore.constants import (
    EMBED_DOC_SIGNATURE,
    EMBED_QUERY_SIGNATURE,
    EMBED_TEXTS_SIGNATURE,
    EMBEDDING_OUTPUT,
    MODEL_DESCRIPTION_FILE,
    RANK_SIGNATURE,
    SCORE_OUTPUT,
    SCORE_SIGNATURE,
    SERVING_SIGNATURE,
)
from rankcore.corpus_vectors import DocumentTower, QueryTower

TOKEN_IDS_KEY = "token_ids"
RAW_TEXT_KEY = "text"

_EXAMPLE_SPEC = fmt.spec(fmt.QUERY_IDS, fmt.DOC_IDS, fmt.DOC_LENGTHS)


_IDS = tf.TensorSpec([None, None], tf.int64)


def _traced_once(fn, *input_signature: tf.TensorSpec):
    """A plain function calling `fn`'s one concrete function (traced now, no autograph), for
    the signatures to call. Not a tf.function attribute: tf.saved_model.save lists those
    inside its save context, which TensorFlow's function cache keys apart from the signatures'
    calls (function_context.py: the variable policy), so the model was traced and stored
    twice (with a companion, 10 s of a fold Trainer's 33 s export, and twice the graph for the
    evaluator to load). A plain function is not tracked: the concrete function is saved as
    the signatures' callee, its variables through the tracked model."""
    concrete = tf.function(fn, input_signature=input_signature, autograph=False)
    concrete = concrete.get_concrete_function()
    return lambda *args: concrete(*args)


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
        feedback: dict | None = None,
    ):
        super().__init__()
        self.fusion_alpha = 1.0 if fusion_alpha is None else float(fusion_alpha)
        # rankcore/feedback.py's setting (dual encoders; rank_candidates only), read when the
        # graph is traced. A read-only view, not a dict: tf.Module would track a dict as a
        # SavedModel object (plain numbers and this view are not saved).
        fb = feedback if feedback_lib.is_on(feedback) else feedback_lib.OFF
        self.feedback = types.MappingProxyType(dict(fb))
        self.model = model
        self.tft_layer = tft_layer  # tracked: its vocab asset and tables are saved with us
        self.max_query_length = max_query_length
        self.max_doc_length = max_doc_length
        # The tokenizer too is traced once for every signature that reads raw text.
        self._tokenize = tf.function(
            self._tokenize_graph,
            input_signature=[tf.TensorSpec([None], tf.string)],
            autograph=False,
        )
        self._trace_model()

    def _trace_model(self) -> None:
        # The model traced once, called by every signature: tracing a BERT-size model is what
        # export time goes to, and each signature tracing it again also stored another copy.
        # No autograph: the models need none, and converting their source is most of a trace
        # (trainer_module/training.py). A subclass that scores otherwise overrides this
        # method, so that the pair function is not traced too.
        self._score_call = _traced_once(
            lambda q, d: tf.cast(self.model((q, d), training=False), tf.float32), _IDS, _IDS
        )

    def _score(self, query_ids: tf.Tensor, doc_ids: tf.Tensor) -> dict[str, tf.Tensor]:
        query_ids = _at_least_one_column(query_ids[:, : self.max_query_length])
        doc_ids = _at_least_one_column(doc_ids[:, : self.max_doc_length])
        return {SCORE_OUTPUT: self._score_call(query_ids, doc_ids)}

    def _tokenize_graph(self, texts: tf.Tensor) -> tf.Tensor:
        sparse = self.tft_layer({RAW_TEXT_KEY: texts})[TOKEN_IDS_KEY]
        return tf.sparse.to_dense(tf.cast(sparse, tf.int64))

    @tf.function(
        autograph=False,
        input_signature=[
            tf.TensorSpec([None], tf.string, name="query"),
            tf.TensorSpec([None], tf.string, name="document"),
        ],
    )
    def serving_default(self, query: tf.Tensor, document: tf.Tensor) -> dict[str, tf.Tensor]:
        return self._score(self._tokenize(query), self._tokenize(document))

    @tf.function(
        autograph=False,
        input_signature=[
            tf.TensorSpec([], tf.string, name="query"),
            tf.TensorSpec([None], tf.string, name="documents"),
            tf.TensorSpec([None], tf.float32, name="first_stage_scores"),
        ],
    )
    def rank_candidates(
        self, query: tf.Tensor, documents: tf.Tensor, first_stage_scores: tf.Tensor
    ) -> dict[str, tf.Tensor]:
        reranker = self._rank_scores(
            self._tokenize(query[None]), self._tokenize(documents), first_stage_scores
        )
        fused = ranking.fuse(reranker, first_stage_scores, self.fusion_alpha, ranking.tensorflow())
        return {"fused_score": tf.cast(fused, tf.float32), "reranker_score": reranker}

    def _rank_scores(
        self, query_ids: tf.Tensor, doc_ids: tf.Tensor, first_stage_scores: tf.Tensor
    ) -> tf.Tensor:
        """One query's ids [1, Lq] and its candidates' [N, Ld] -> reranker scores [N]."""
        del first_stage_scores  # a pair model scores each candidate alone
        return self._score(tf.tile(query_ids, [tf.shape(doc_ids)[0], 1]), doc_ids)[SCORE_OUTPUT]

    @tf.function(
        input_signature=[tf.TensorSpec([None], tf.string, name="examples")], autograph=False
    )
    def score_examples(self, examples: tf.Tensor) -> dict[str, tf.Tensor]:
        ex = tf.io.parse_example(examples, _EXAMPLE_SPEC)
        query = tf.sparse.to_dense(ex[fmt.QUERY_IDS])
        docs = tf.sparse.to_dense(ex[fmt.DOC_IDS])
        # n = 1 by contract; still cut at the first document's length so extra candidates
        # of a malformed example cannot leak into the scored text.
        first_len = tf.sparse.to_dense(ex[fmt.DOC_LENGTHS])[:, :1]
        in_first = tf.range(tf.shape(docs)[1], dtype=tf.int64)[None, :] < first_len
        return self._score(query, tf.where(in_first, docs, tf.zeros_like(docs)))


class DualEncoderModule(RerankerModule):
    """RerankerModule plus the embedding signatures of a dual encoder (a model with
    `embed_query` / `embed_doc`). Every signature goes through the two traced towers
    (`_embed_calls`; one encoder unless documents are frozen); a pair's score is the dot product
    of the two L2-normalised embeddings, DualEncoder.call's arithmetic."""

    def _trace_model(self) -> None:
        self._embed_calls = {
            kind: _traced_once(
                lambda ids, f=embed: tf.cast(f(ids, training=False), tf.float32), _IDS
            )
            for kind, embed in (("q", self.model.embed_query), ("d", self.model.embed_doc))
        }

    def _embed(self, ids: tf.Tensor, kind: str) -> dict[str, tf.Tensor]:
        """ids of `kind` "q" (cut at max_query_length) or "d" (max_doc_length) -> vectors."""
        max_length = self.max_query_length if kind == "q" else self.max_doc_length
        return {
            EMBEDDING_OUTPUT: self._embed_calls[kind](_at_least_one_column(ids[:, :max_length]))
        }

    def _score(self, query_ids: tf.Tensor, doc_ids: tf.Tensor) -> dict[str, tf.Tensor]:
        query = self._embed(query_ids, "q")[EMBEDDING_OUTPUT]
        doc = self._embed(doc_ids, "d")[EMBEDDING_OUTPUT]
        return {SCORE_OUTPUT: tf.reduce_sum(query * doc, axis=-1)}

    def _rank_scores(
        self, query_ids: tf.Tensor, doc_ids: tf.Tensor, first_stage_scores: tf.Tensor
    ) -> tf.Tensor:
        """With feedback, rankcore/ranking.py's rank_list in float64 (the evaluator's and the
        Trainer's code, on TensorFlow): candidates in first-stage order (ties: the earlier in
        the list first), each moved towards its nearest other candidates, the query towards
        the top ones (the first stage's, or those of a first pass fused at the model's alpha);
        scores back in the given order."""
        query = self._embed(query_ids, "q")[EMBEDDING_OUTPUT][0]
        docs = self._embed(doc_ids, "d")[EMBEDDING_OUTPUT]
        if not feedback_lib.is_on(self.feedback):
            return tf.reduce_sum(query[None, :] * docs, axis=-1)
        order = tf.argsort(first_stage_scores, direction="DESCENDING", stable=True)
        scores = ranking.rank_list(
            query,
            tf.gather(docs, order),
            tf.gather(first_stage_scores, order),
            self.feedback,
            self.fusion_alpha,
            ranking.tensorflow(),
        )
        return tf.cast(tf.gather(scores, tf.argsort(order)), tf.float32)

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="text")], autograph=False)
    def embed_texts(self, text: tf.Tensor) -> dict[str, tf.Tensor]:
        return self._embed(self._tokenize(text), "d")

    @tf.function(
        input_signature=[tf.TensorSpec([None, None], tf.int64, name="ids")], autograph=False
    )
    def embed_query_ids(self, ids: tf.Tensor) -> dict[str, tf.Tensor]:
        return self._embed(ids, "q")

    @tf.function(
        input_signature=[tf.TensorSpec([None, None], tf.int64, name="ids")], autograph=False
    )
    def embed_doc_ids(self, ids: tf.Tensor) -> dict[str, tf.Tensor]:
        return self._embed(ids, "d")


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
    towers: bool = False,
    document_tower: DocumentTower | None = None,
    description: list[str] | None = None,
    query_tower: QueryTower | None = None,
) -> str:
    """Writes the SavedModel to a temp dir next to serving_model_dir, then moves it in place,
    so a crash never leaves a half-written model where the Pusher looks. `fusion` is
    run_fn.choose_fusion's dict (None: no fusion). `towers`: the model has query and document
    towers (the model registry's `offers_towers`): the embed signatures are exported too.
    `document_tower`: the frozen tower the model serves its documents with (the recipe's),
    written beside the SavedModel so the evaluator takes them from the corpus vectors;
    `query_tower`: what it serves for a query then (the recipe's, complete), written beside it
    so the evaluator can take a fold model's frozen parts from this one (export_query_tower).
    `description`: the recipe's Markdown lines about the model (Recipe.describe), written as
    MODEL_DESCRIPTION_FILE for the Pusher's model card."""
    tft_layer = tft.TFTransformOutput(transform_graph_path).transform_features_layer()
    alpha = fusion.get("alpha") if fusion else None
    dual = towers
    module_cls = DualEncoderModule if dual else RerankerModule
    module = module_cls(
        model, tft_layer, max_query_length, max_doc_length, alpha, (fusion or {}).get("feedback")
    )
    signatures = {
        SERVING_SIGNATURE: module.serving_default.get_concrete_function(),
        SCORE_SIGNATURE: module.score_examples.get_concrete_function(),
        RANK_SIGNATURE: module.rank_candidates.get_concrete_function(),
    }
    if dual:
        for name in (EMBED_TEXTS_SIGNATURE, EMBED_QUERY_SIGNATURE, EMBED_DOC_SIGNATURE):
            signatures[name] = getattr(module, name).get_concrete_function()
    beside = _Beside(fusion, document_tower, query_tower, description)
    return _save(module, signatures, serving_model_dir, beside)


class QueryTowerModule(tf.Module):
    """A fold model's SavedModel: the trained query tower alone (rankcore QueryTower with
    complete false). Its one signature, embed_query_ids, gives the first hidden_size values of
    what the whole model's gives (DualEncoder.own_query_part, cut at max_query_length the same
    way); the frozen parts of its vectors are the run's served model's, the same checkpoints,
    which the RankingEvaluator takes them from (components/ranking_evaluator/embedding.py).
    Only the query encoder is tracked, so only its weights are saved."""

    def __init__(self, model: keras.Model, max_query_length: int):
        super().__init__()
        self.encoder = model.encoder
        self.max_query_length = max_query_length
        self._own = _traced_once(model.own_query_part, _IDS)

    @tf.function(
        input_signature=[tf.TensorSpec([None, None], tf.int64, name="ids")], autograph=False
    )
    def embed_query_ids(self, ids: tf.Tensor) -> dict[str, tf.Tensor]:
        cut = _at_least_one_column(ids[:, : self.max_query_length])
        return {EMBEDDING_OUTPUT: self._own(cut)}


def export_query_tower(
    model: keras.Model,
    max_query_length: int,
    serving_model_dir: str,
    query_tower: QueryTower,
    document_tower: DocumentTower,
    fusion: dict | None = None,
    description: list[str] | None = None,
) -> str:
    """A fold model, which is evaluated and never served, exported as its trained query tower
    (QueryTowerModule) with the files the evaluator reads beside it: the fusion, the document
    tower, `query_tower` (complete false) and the description; atomically, as
    export_serving_model. With frozen documents and a companion that is the query encoder's
    weights (90 MB for MiniLM) instead of three encoders' (594 MB with MPNet)."""
    if query_tower.complete:
        raise ValueError("export_query_tower writes a partial query tower (complete=False)")
    module = QueryTowerModule(model, max_query_length)
    signatures = {EMBED_QUERY_SIGNATURE: module.embed_query_ids.get_concrete_function()}
    beside = _Beside(fusion, document_tower, query_tower, description)
    return _save(module, signatures, serving_model_dir, beside)


class _Beside(NamedTuple):
    """What an export writes beside its SavedModel, inside the temp dir (renamed with it)."""

    fusion: dict | None
    document_tower: DocumentTower | None
    query_tower: QueryTower | None
    description: list[str] | None


def _save(module: tf.Module, signatures: dict, serving_model_dir: str, beside: _Beside) -> str:
    tmp = f"{serving_model_dir.rstrip('/')}.tmp-{uuid.uuid4().hex[:8]}"
    # save_traces=False: Keras would otherwise trace every layer's call function again, for
    # reviving the layers with keras.models.load_model, which nothing does with this model
    # (it is served and evaluated through its signatures only). That tracing was most of the
    # export time of a MiniLM dual encoder (98 s of the Trainer's 132 s on Cranfield). It is
    # what `model.save(..., save_traces=False)` sets (tf_keras/src/saving/legacy/save.py).
    with keras_saved_model_utils.keras_option_scope(save_traces=False):
        tf.saved_model.save(module, tmp, signatures=signatures)
    fusion_file = os.path.join(tmp, fusion_lib.FUSION_FILE)
    tf.io.gfile.makedirs(os.path.dirname(fusion_file))
    with tf.io.gfile.GFile(fusion_file, "w") as f:
        json.dump(beside.fusion or {"mode": "none", "alpha": None}, f, indent=2, sort_keys=True)
    if beside.document_tower is not None:
        beside.document_tower.write(tmp)
        if beside.query_tower is not None:
            beside.query_tower.write(tmp, beside.document_tower)
    with tf.io.gfile.GFile(os.path.join(tmp, MODEL_DESCRIPTION_FILE), "w") as f:
        json.dump(list(beside.description or []), f, indent=2)
    _replace_dir(tmp, serving_model_dir)
    logging.info("exported serving model to %s", serving_model_dir)
    return serving_model_dir
