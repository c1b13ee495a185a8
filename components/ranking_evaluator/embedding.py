"""Embedding texts with one SavedModel inside Beam: a dual encoder's `embed_query_ids` /
`embed_doc_ids` signatures (trainer_module/export.py) over length-sorted batches, the model
loaded once per worker process. Used by EmbedAndScore (embed_once.py)."""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Iterable, Iterator
from typing import Any

import apache_beam as beam
import numpy as np
import tensorflow as tf
from apache_beam.utils import shared
from tensorflow.python.saved_model import loader_impl

from components.ranking_evaluator.eval_examples import Text
from rankcore.constants import EMBED_DOC_SIGNATURE, EMBED_QUERY_SIGNATURE, EMBEDDING_OUTPUT
from rankcore.corpus_vectors import QueryTower

# Texts are grouped by (kind, length // LENGTH_BUCKET) before batching, then sorted by length
# within a group, so a batch pads little and groups can go to different workers.
LENGTH_BUCKET = 32

# Beam metrics of where a scoring pass's time goes (score_split `phases`), apart from the
# "rankpipe" counters of what was scored.
PHASES_NAMESPACE = "rankpipe.phases"
# "rankpipe" counter of the documents embedded (those not taken from the corpus vectors:
# corpus_documents.FROM_CORPUS_VECTORS); `texts_embedded` counts queries and documents.
DOCUMENTS_EMBEDDED = "documents_embedded"


def signature_names(model_dir: str) -> set[str]:
    """The SavedModel's signature names, read from saved_model.pb without loading the model."""
    return set(loader_impl.parse_saved_model(model_dir).meta_graphs[0].signature_def)


def embeds(model_dir: str) -> bool:
    """Whether the model can be scored by embedding each text once (a dual encoder exported
    with the embedding signatures, or a fold model exported as its query tower: partial;
    older exports and cross-encoders are scored per pair)."""
    names = signature_names(model_dir)
    if EMBED_QUERY_SIGNATURE not in names:
        return False
    return EMBED_DOC_SIGNATURE in names or partial(model_dir)


def partial(model_dir: str) -> bool:
    """Whether the model was exported as its trained query tower only (QueryTower complete
    false: trainer_module/export.py export_query_tower): the frozen parts of its vectors are
    another model's (frozen_parts.py)."""
    tower = QueryTower.read(model_dir)
    return tower is not None and not tower["complete"]


def _bucket(item: tuple[Text, tuple[int, ...]]) -> tuple[tuple[str, int], tuple]:
    (kind, _), ids = item
    return (kind, len(ids) // LENGTH_BUCKET), item


class _Batches(beam.DoFn):
    def __init__(self, batch_size: int):
        self._batch_size = batch_size

    def process(self, group: tuple[tuple[str, int], Iterable]) -> Iterator[list]:
        items = sorted(group[1], key=lambda item: (len(item[1]), item[0]))
        for start in range(0, len(items), self._batch_size):
            yield items[start : start + self._batch_size]


# The run's served model, loaded once per process for every fold model it completes
# (frozen_parts.py): the evaluator scores the folds in passes one after another, each a Beam
# pipeline of its own, which would otherwise load it once per fold (a 600 MB SavedModel on
# Cranfield). passes.score_parts drops it when the passes are done (release_frozen_models).
_FROZEN_MODELS: dict[str, Any] = {}
_FROZEN_LOCK = threading.Lock()


def _frozen_model(model_dir: str) -> Any:
    with _FROZEN_LOCK:
        if model_dir not in _FROZEN_MODELS:
            _FROZEN_MODELS[model_dir] = tf.saved_model.load(model_dir)
        return _FROZEN_MODELS[model_dir]


def release_frozen_models() -> None:
    """Drops the served models kept for the fold models' passes in this process."""
    with _FROZEN_LOCK:
        _FROZEN_MODELS.clear()


class _LoadedModel:
    """The SavedModel of one worker process (weak-referenceable, for beam's shared.Shared), and
    for a partial model the model it takes its frozen parts from (`frozen_from`)."""

    def __init__(self, model_dir: str, frozen_from: str | None = None):
        import tensorflow_text  # noqa: F401  (registers the tokenizer ops the graph holds)

        t0 = time.perf_counter()
        self.model = tf.saved_model.load(model_dir)
        self.frozen = _frozen_model(frozen_from) if frozen_from else None
        self.own_dims = QueryTower.read(model_dir)["own_dims"] if frozen_from else 0
        self.load_seconds = time.perf_counter() - t0

    def embed(self, kind: str, ids: np.ndarray) -> np.ndarray:
        """Vectors of a batch of one kind ("q", "d") of right-padded ids. A partial model's
        query vector is its own part then the rest of the frozen model's (the frozen parts),
        its document vectors the frozen model's (its document tower is frozen: the same)."""
        ids = tf.constant(ids)
        if kind == "d":
            source = self.model if self.frozen is None else self.frozen
            return source.signatures[EMBED_DOC_SIGNATURE](ids=ids)[EMBEDDING_OUTPUT].numpy()
        own = self.model.signatures[EMBED_QUERY_SIGNATURE](ids=ids)[EMBEDDING_OUTPUT].numpy()
        if self.frozen is None:
            return own
        whole = self.frozen.signatures[EMBED_QUERY_SIGNATURE](ids=ids)[EMBEDDING_OUTPUT].numpy()
        return np.concatenate([own, whole[:, self.own_dims :]], axis=1)


class _Embed(beam.DoFn):
    """A batch of one kind of text -> (text key, vector) with one model. The model is loaded
    once per worker process (shared.Shared: every _Embed of the model shares the handle), not
    per DoFn instance or bundle: the `saved_model_loads` counter (PHASES_NAMESPACE) counts the
    loads that really happened."""

    def __init__(self, model_dir: str, handle: shared.Shared, frozen_from: str | None = None):
        self._model_dir = model_dir
        self._frozen_from = frozen_from
        self._handle = handle
        self._loaded: _LoadedModel | None = None
        self._unreported_load: _LoadedModel | None = None
        self._texts = beam.metrics.Metrics.counter("rankpipe", "texts_embedded")
        self._documents = beam.metrics.Metrics.counter("rankpipe", DOCUMENTS_EMBEDDED)
        self._loads = beam.metrics.Metrics.counter(PHASES_NAMESPACE, "saved_model_loads")
        self._load_ms = beam.metrics.Metrics.counter(PHASES_NAMESPACE, "model_load_ms")
        self._model_ms = beam.metrics.Metrics.counter(PHASES_NAMESPACE, "model_ms")

    def setup(self) -> None:
        def load() -> _LoadedModel:
            # Only when this process has no live copy; reported in the first bundle (setup may
            # run outside any bundle, where Beam metrics are not collected).
            self._unreported_load = _LoadedModel(self._model_dir, self._frozen_from)
            return self._unreported_load

        tag = hashlib.sha256(f"{self._model_dir}\0{self._frozen_from}".encode()).hexdigest()
        self._loaded = self._handle.acquire(load, tag=tag)

    def process(self, batch: list) -> Iterator[tuple[Text, np.ndarray]]:
        if self._unreported_load is not None:
            self._loads.inc()
            self._load_ms.inc(round(self._unreported_load.load_seconds * 1000))
            self._unreported_load = None
        kind = batch[0][0][0]
        ids = np.zeros([len(batch), max(1, max(len(t) for _, t in batch))], np.int64)
        for row, (_, tokens) in enumerate(batch):
            ids[row, : len(tokens)] = tokens
        t0 = time.perf_counter()
        vectors = self._loaded.embed(kind, ids)
        self._model_ms.inc(round((time.perf_counter() - t0) * 1000))
        self._texts.inc(len(batch))
        if kind == "d":
            self._documents.inc(len(batch))
        for row, (key, _) in enumerate(batch):
            yield key, vectors[row]


def embed_texts(
    texts: beam.PCollection,
    model_dir: str,
    handle: shared.Shared,
    batch_size: int,
    label: str,
    frozen_from: str | None = None,
) -> beam.PCollection:
    """(text key, ids) -> (text key, vector) with one model, in length-sorted batches; a
    partial model with the frozen parts of `frozen_from` (_LoadedModel.embed)."""
    return (
        texts
        | f"Bucket{label}" >> beam.Map(_bucket)
        | f"GroupByLength{label}" >> beam.GroupByKey()
        | f"Batch{label}" >> beam.ParDo(_Batches(batch_size))
        | f"Embed{label}" >> beam.ParDo(_Embed(model_dir, handle, frozen_from))
    )
