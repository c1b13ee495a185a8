"""Batched scoring of eval examples with SavedModels inside Beam.

Two paths, chosen per model by its signatures (`embeds`):
- per pair (`ScoreExamples`): tfx-bsl RunInference runs the `score_examples` signature over
  every (query, document) example. Cross-encoders (KNRM, Conv-KNRM, Transformer, BERT) read
  query and document together, so this is inherent to them.
- encode once (`EmbedAndScore`): a dual encoder's score is the dot product of two L2-normalised
  vectors, so every distinct query and document of the split is embedded once (the
  `embed_query_ids` / `embed_doc_ids` signatures of trainer_module/export.py, batched by
  length) and each pair is scored by a dot product, instead of encoding a document once per
  query that retrieved it (up to candidates_depth times). This is how sentence-transformers
  scores a corpus (util.semantic_search over encode()d embeddings,
  https://www.sbert.net/examples/applications/semantic-search/). Pairs meet their document's
  vectors through a CoGroupByKey by document, and their query's vectors through a side input
  (queries are few next to pairs: every worker holds the split's query vectors, Q x dim floats
  per model), so what travels per pair is two ids, not a 384-float vector, and memory grows
  with the texts, not with the candidates (docs/speed.md "Scale of the scoring").
  A dual encoder with pseudo-relevance feedback scores a query's whole list
  (rankcore/feedback.py): its pairs are grouped by query and each list is ranked there, one
  list in memory at a time (docs/evaluator.md "Feedback").

Where a pass's time goes (docs/speed.md, "The pipeline's own cost"): `score_split` can fill a
`phases` dict from the pass's Beam metrics: how many SavedModels were loaded and for how long
(each worker process loads each model once: shared.Shared here, the same in tfx-bsl's
RunInference, whose `load_model_latency_milli_secs` counts its loads), and the seconds spent
inside the models, summed over workers; the rest of the pass is Beam (start-up, workers,
reading, joins, writing).
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import NamedTuple

import apache_beam as beam
import numpy as np
import tensorflow as tf
from apache_beam.metrics.metric import MetricsFilter
from apache_beam.runners.runner import PipelineResult
from apache_beam.utils import shared
from tensorflow.python.saved_model import loader_impl
from tensorflow_serving.apis import prediction_log_pb2
from tfx.utils import io_utils
from tfx_bsl.public.beam import run_inference
from tfx_bsl.public.proto import model_spec_pb2

from rankcore import embeddings, feedback
from rankcore.constants import (
    EMBED_DOC_SIGNATURE,
    EMBED_QUERY_SIGNATURE,
    EMBEDDING_OUTPUT,
    SCORE_OUTPUT,
    SCORE_SIGNATURE,
)

# Texts are grouped by (kind, length // LENGTH_BUCKET) before batching, then sorted by length
# within a group, so a batch pads little and groups can go to different workers.
LENGTH_BUCKET = 32

# Reusing the Trainer's vectors (EmbedAndScore `reuse`): every CHECK_EVERY-th reused text is
# embedded again and must agree with the stored vector to REUSE_TOLERANCE in every component
# (the same model on other batches: float32 rounding is about 1e-7 here); the counters below
# say how many were checked and how many differed. One in 256: a wrong file or tower makes
# every vector wrong, so a few per split find it; at one in 64, Cranfield's cross-validated
# evaluator (6,155 texts reused, most of them documents lent by other folds) re-embedded 107
# texts, 100 of them abstracts through MPNet, about a third of its model time.
CHECK_EVERY = 256
REUSE_TOLERANCE = 1e-5
REUSE_CHECKED, REUSE_MISMATCHED = "reuse_checked", "reuse_mismatched"
# Reused documents taken from another model's file (a shared frozen document tower).
REUSED_FROM_OTHERS = "documents_of_other_models"

# Beam metrics of where a scoring pass's time goes (score_split `phases`), apart from the
# "rankpipe" counters of what was scored.
PHASES_NAMESPACE = "rankpipe.phases"

Key = tuple[str, str]  # (qid, docid)
Scored = tuple[str, str, tuple[float, ...]]  # (qid, docid, one score per model)


def example_key(serialized: bytes) -> Key:
    """(qid, docid) of a dev/test example (one candidate each, see ranking_datagen)."""
    feature = tf.train.Example.FromString(serialized).features.feature
    return (
        feature["qid"].bytes_list.value[0].decode(),
        feature["docids"].bytes_list.value[0].decode(),
    )


def _key_batch(batch: list[bytes]) -> tuple[list[Key], list[bytes]]:
    # The serialized bytes go to RunInference as they are: no re-serialization.
    return [example_key(s) for s in batch], batch


def _score(log: prediction_log_pb2.PredictionLog) -> float:
    # score_examples returns float32 [batch]: one float_val per example (make_ndarray is ~8x
    # slower per element and this runs once per candidate).
    return float(log.predict_log.response.outputs[SCORE_OUTPUT].float_val[0])


def _unbatch(
    keyed: tuple[list[Key], tuple[list[prediction_log_pb2.PredictionLog], ...]],
) -> Iterator[Scored]:
    keys, per_model = keyed
    for i, (qid, docid) in enumerate(keys):
        yield qid, docid, tuple(_score(logs[i]) for logs in per_model)


def inference_spec(model_dir: str) -> model_spec_pb2.InferenceSpecType:
    return model_spec_pb2.InferenceSpecType(
        saved_model_spec=model_spec_pb2.SavedModelSpec(
            model_path=model_dir, signature_name=[SCORE_SIGNATURE]
        )
    )


class ScoreExamples(beam.PTransform):
    """Serialized eval examples -> (qid, docid, (score of model 1, score of model 2, ...)).

    Examples are grouped into lists of `batch_size` (keys ride along) and every model scores
    each list in one fused RunInferencePerModel pass, so the examples are read and parsed
    once however many models there are. RunInference may join several lists into one call;
    `batch_size` is the smallest batch a model sees, except for the last of a bundle.
    """

    def __init__(self, model_dirs: Sequence[str], batch_size: int = 256):
        super().__init__()
        if not model_dirs:
            raise ValueError("ScoreExamples needs at least one model")
        self._specs = [inference_spec(d) for d in model_dirs]
        self._batch_size = batch_size

    def expand(self, serialized_examples: beam.PCollection) -> beam.PCollection:
        return (
            serialized_examples
            | "Batch"
            >> beam.BatchElements(min_batch_size=self._batch_size, max_batch_size=self._batch_size)
            # The type hint is how RunInference tells keyed (pre-batched) input from examples.
            | "Key" >> beam.Map(_key_batch).with_output_types(tuple[list[Key], list[bytes]])
            | "RunInference" >> run_inference.RunInferencePerModel(self._specs)
            | "Unbatch" >> beam.FlatMap(_unbatch)
        )


def to_runs(scored: list[Scored], names: Sequence[str]) -> dict[str, dict[str, dict[str, float]]]:
    """(qid, docid, scores) rows -> one TREC-style run {qid: {docid: score}} per model name."""
    runs: dict[str, dict[str, dict[str, float]]] = {name: {} for name in names}
    for qid, docid, scores in scored:
        for name, score in zip(names, scores, strict=True):
            docs = runs[name].setdefault(qid, {})
            if docid in docs:
                raise ValueError(f"candidate {docid!r} of query {qid!r} appears twice")
            docs[docid] = score
    return runs


def signature_names(model_dir: str) -> set[str]:
    """The SavedModel's signature names, read from saved_model.pb without loading the model."""
    return set(loader_impl.parse_saved_model(model_dir).meta_graphs[0].signature_def)


def embeds(model_dir: str) -> bool:
    """Whether the model can be scored by embedding each text once (a dual encoder exported
    with the embedding signatures; older exports and cross-encoders are scored per pair)."""
    return {EMBED_QUERY_SIGNATURE, EMBED_DOC_SIGNATURE} <= signature_names(model_dir)


Text = tuple[str, str]  # ("q", qid) or ("d", docid)
Pair = tuple[str, str, tuple[int, ...], tuple[int, ...]]  # qid, docid, query ids, doc ids


def example_pair(serialized: bytes) -> Pair:
    """(qid, docid, query ids, document ids) of a dev/test example: the ids score_examples
    reads (the document cut at its first length, as score_examples cuts it)."""
    feature = tf.train.Example.FromString(serialized).features.feature
    doc = feature["doc_ids"].int64_list.value
    lengths = feature["doc_lengths"].int64_list.value
    return (
        feature["qid"].bytes_list.value[0].decode(),
        feature["docids"].bytes_list.value[0].decode(),
        tuple(feature["query_ids"].int64_list.value),
        tuple(doc[: lengths[0]] if lengths else doc),
    )


def _texts(pair: Pair) -> Iterator[tuple[Text, tuple[int, ...]]]:
    qid, docid, query, doc = pair
    yield ("q", qid), query
    yield ("d", docid), doc


def _one_text(ids: Iterable[tuple[int, ...]]) -> tuple[int, ...]:
    # CombinePerKey: every example of a query (document) holds the same ids.
    ids = iter(ids)
    first = next(ids)
    for other in ids:
        if other != first:
            raise ValueError(f"one text id with two different token sequences: {first} / {other}")
    return first


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


class _LoadedModel:
    """The SavedModel of one worker process (weak-referenceable, for beam's shared.Shared)."""

    def __init__(self, model_dir: str):
        import tensorflow_text  # noqa: F401  (registers the tokenizer ops the graph holds)

        t0 = time.perf_counter()
        self.model = tf.saved_model.load(model_dir)
        self.load_seconds = time.perf_counter() - t0


class _Embed(beam.DoFn):
    """A batch of one kind of text -> (text key, vector) with one model. The model is loaded
    once per worker process (shared.Shared: every _Embed of the model shares the handle), not
    per DoFn instance or bundle: the `saved_model_loads` counter (PHASES_NAMESPACE) counts the
    loads that really happened."""

    def __init__(self, model_dir: str, handle: shared.Shared):
        self._model_dir = model_dir
        self._handle = handle
        self._loaded: _LoadedModel | None = None
        self._unreported_load: _LoadedModel | None = None
        self._texts = beam.metrics.Metrics.counter("rankpipe", "texts_embedded")
        self._loads = beam.metrics.Metrics.counter(PHASES_NAMESPACE, "saved_model_loads")
        self._load_ms = beam.metrics.Metrics.counter(PHASES_NAMESPACE, "model_load_ms")
        self._model_ms = beam.metrics.Metrics.counter(PHASES_NAMESPACE, "model_ms")

    def setup(self) -> None:
        def load() -> _LoadedModel:
            # Only when this process has no live copy; reported in the first bundle (setup may
            # run outside any bundle, where Beam metrics are not collected).
            self._unreported_load = _LoadedModel(self._model_dir)
            return self._unreported_load

        tag = hashlib.sha256(self._model_dir.encode()).hexdigest()
        self._loaded = self._handle.acquire(load, tag=tag)

    def process(self, batch: list) -> Iterator[tuple[Text, np.ndarray]]:
        if self._unreported_load is not None:
            self._loads.inc()
            self._load_ms.inc(round(self._unreported_load.load_seconds * 1000))
            self._unreported_load = None
        kind = batch[0][0][0]
        signature = EMBED_QUERY_SIGNATURE if kind == "q" else EMBED_DOC_SIGNATURE
        ids = np.zeros([len(batch), max(1, max(len(t) for _, t in batch))], np.int64)
        for row, (_, tokens) in enumerate(batch):
            ids[row, : len(tokens)] = tokens
        t0 = time.perf_counter()
        signature_fn = self._loaded.model.signatures[signature]
        vectors = signature_fn(ids=tf.constant(ids))[EMBEDDING_OUTPUT].numpy()
        self._model_ms.inc(round((time.perf_counter() - t0) * 1000))
        self._texts.inc(len(batch))
        for row, (key, _) in enumerate(batch):
            yield key, vectors[row]


class _Reuse(beam.DoFn):
    """A distinct text joined with the Trainer's vector of it (rankcore/embeddings.py) -> the
    vector (main output) when the text's cut token ids have the stored digest, else the text
    to embed ("embed"). Stored vectors come as (rank, digest, vector): the model's own file is
    rank 0, other models' documents (StoredVectors.document_paths) rank 1, 2, ...; the lowest
    rank with the digest wins, so every runner picks the same one. Every CHECK_EVERY-th reused
    text (by a hash of its key, so the same ones on every runner) is also sent to be embedded
    again ("check") with the stored vector, so that a vector the SavedModel would not give is
    caught (_Check)."""

    def __init__(self, meta: embeddings.EmbeddingsMeta):
        self._meta = meta
        self._reused = beam.metrics.Metrics.counter("rankpipe", "texts_reused")
        self._shared = beam.metrics.Metrics.counter("rankpipe", REUSED_FROM_OTHERS)

    def process(self, joined: tuple[Text, dict]) -> Iterator:
        key, parts = joined
        if not parts["ids"]:
            return  # a text of the Trainer's split that this split does not have
        (ids,) = parts["ids"]
        digest = embeddings.text_digest(ids, self._meta.max_length(key[0]))
        stored = min(
            ((rank, vector) for rank, d, vector in parts["stored"] if d == digest),
            key=lambda rv: rv[0],
            default=None,
        )
        if stored is None:
            yield beam.pvalue.TaggedOutput("embed", (key, ids))
            return
        self._reused.inc()
        if stored[0]:
            self._shared.inc()
        yield key, stored[1]
        if int(hashlib.sha1(repr(key).encode()).hexdigest(), 16) % CHECK_EVERY == 0:
            yield beam.pvalue.TaggedOutput("check", (key, ids))
            yield beam.pvalue.TaggedOutput("check_stored", (key, stored[1]))


class _Check(beam.DoFn):
    """A re-embedded text against its stored vector: counts the texts checked and those whose
    vector differs by more than REUSE_TOLERANCE in any component (score_split then scores the
    split again without reuse)."""

    def __init__(self):
        self._checked = beam.metrics.Metrics.counter("rankpipe", REUSE_CHECKED)
        self._mismatched = beam.metrics.Metrics.counter("rankpipe", REUSE_MISMATCHED)

    def process(self, joined: tuple[Text, dict]) -> Iterator:
        _, parts = joined
        (vector,), (stored,) = parts["embedded"], parts["stored"]
        self._checked.inc()
        if float(np.max(np.abs(vector - stored))) > REUSE_TOLERANCE:
            self._mismatched.inc()
        return iter(())


def _embed_texts(
    texts: beam.PCollection, model_dir: str, handle: shared.Shared, batch_size: int, label: str
) -> beam.PCollection:
    """(text key, ids) -> (text key, vector) with one model, in length-sorted batches."""
    return (
        texts
        | f"Bucket{label}" >> beam.Map(_bucket)
        | f"GroupByLength{label}" >> beam.GroupByKey()
        | f"Batch{label}" >> beam.ParDo(_Batches(batch_size))
        | f"Embed{label}" >> beam.ParDo(_Embed(model_dir, handle))
    )


def _one_vector_per_model(joined: tuple[Text, dict]) -> tuple[Text, tuple[np.ndarray, ...]]:
    key, per_model = joined  # {model index: [vector]}
    return key, tuple(per_model[i][0] for i in range(len(per_model)))


class _DotProducts(beam.DoFn):
    def __init__(self):
        self._pairs = beam.metrics.Metrics.counter("rankpipe", "pairs_scored")

    def process(self, joined: tuple[str, dict], queries: dict) -> Iterator[Scored]:
        docid, parts = joined
        (doc_vectors,) = parts["vectors"]  # every document of a pair was embedded
        for qid in parts["qids"]:
            self._pairs.inc()
            yield (
                qid,
                docid,
                tuple(
                    float(np.dot(q.astype(np.float64), d.astype(np.float64)))
                    for q, d in zip(queries[qid], doc_vectors, strict=True)
                ),
            )


Feedback = tuple[dict, float | None]  # (feedback setting, the model's fusion alpha)


def _by_query(joined: tuple[str, dict]) -> Iterator[tuple[str, tuple[str, tuple]]]:
    docid, parts = joined
    (doc_vectors,) = parts["vectors"]  # every document of a pair was embedded
    for qid in parts["qids"]:
        yield qid, (docid, doc_vectors)


class _RankLists(beam.DoFn):
    """A query's whole candidate list -> (qid, docid, (score of model 1, ...)): a model with
    feedback scores the list with rankcore/feedback.py's `rescore` (candidates in first-stage
    order, moved towards each other, the query towards the top ones), the others by the dot
    product, as _DotProducts. One list is in memory at a time, never the split's vectors."""

    def __init__(self, feedbacks: Sequence[Feedback | None]):
        self._feedbacks = list(feedbacks)
        self._pairs = beam.metrics.Metrics.counter("rankpipe", "pairs_scored")

    def process(self, joined: tuple[str, dict], queries: dict) -> Iterator[Scored]:
        qid, parts = joined
        docs = dict(parts["docs"])
        if not docs:
            return  # a first-stage query of another split
        if len(docs) < len(parts["docs"]):  # as to_runs reports it for pair scores
            seen: set[str] = set()
            twice = next(d for d, _ in parts["docs"] if d in seen or seen.add(d))
            raise ValueError(f"candidate {twice!r} of query {qid!r} appears twice")
        first_stage = {qid: next(iter(parts["first_stage"]), {})}
        per_model = []
        for i, query in enumerate(queries[qid]):
            setting, alpha = self._feedbacks[i] or (None, None)
            if feedback.is_on(setting):
                vectors = {("q", qid): query, **{("d", d): v[i] for d, v in docs.items()}}
                run = {qid: dict.fromkeys(docs, 0.0)}  # rescore reads only its candidates
                per_model.append(feedback.rescore(run, first_stage, vectors, setting, alpha)[qid])
            else:
                q = query.astype(np.float64)
                per_model.append(
                    {d: float(np.dot(q, v[i].astype(np.float64))) for d, v in docs.items()}
                )
        for docid in docs:
            self._pairs.inc()
            yield qid, docid, tuple(scores[docid] for scores in per_model)


class EmbedAndScore(beam.PTransform):
    """Serialized eval examples -> (qid, docid, (score of model 1, ...)) for dual encoders:
    each distinct query and document embedded once per model, pairs scored by dot product
    (the models' embeddings are L2-normalised, so this is their cosine, their pair score).

    `reuse` gives, per model (None: none), the vectors the Trainer already computed for that
    very SavedModel (reusable_embeddings): a text whose cut token ids match is not embedded
    again (_Reuse, with a sample re-embedded and compared, _Check).

    `feedbacks` gives, per model (None: none), its feedback setting and fusion alpha: a model
    with feedback (rankcore/feedback.py) ranks each query's whole list, so pairs are grouped by
    query and joined with `first_stage` ({qid: {docid: score}}, the run the feedback
    documents come from) before scoring (_RankLists); the split's vectors never leave Beam."""

    def __init__(
        self,
        model_dirs: Sequence[str],
        batch_size: int = 256,
        reuse: Sequence[StoredVectors | None] | None = None,
        feedbacks: Sequence[Feedback | None] | None = None,
        first_stage: dict[str, dict[str, float]] | None = None,
    ):
        super().__init__()
        if not model_dirs:
            raise ValueError("EmbedAndScore needs at least one model")
        self._model_dirs = list(model_dirs)
        self._batch_size = batch_size
        self._reuse = list(reuse or [None] * len(self._model_dirs))
        self._feedbacks = list(feedbacks or [None] * len(self._model_dirs))
        self._first_stage = first_stage or {}

    def expand(self, serialized_examples: beam.PCollection) -> beam.PCollection:
        pairs = serialized_examples | "Parse" >> beam.Map(example_pair)
        distinct = (
            pairs | "Texts" >> beam.FlatMap(_texts) | "Distinct" >> beam.CombinePerKey(_one_text)
        )
        per_model = {}
        for i, (model_dir, stored_vectors) in enumerate(zip(self._model_dirs, self._reuse)):
            handle = shared.Shared()  # one load per worker process for both uses below
            if stored_vectors is None:
                per_model[i] = _embed_texts(distinct, model_dir, handle, self._batch_size, f"{i}")
                continue
            stored = [
                serialized_examples.pipeline
                | f"ReadStored{i}-{rank}"
                >> beam.io.ReadFromTFRecord(
                    path, compression_type=beam.io.filesystem.CompressionTypes.GZIP
                )
                | f"ParseStored{i}-{rank}" >> beam.Map(embeddings.from_example)
                # Other models' files lend their documents only (their queries' towers differ).
                | f"KeyStored{i}-{rank}"
                >> beam.FlatMap(
                    lambda r, rank=rank: (
                        [(r[0], (rank, r[1], r[2]))]
                        if rank == 0 or r[0][0] == embeddings.DOCUMENT
                        else []
                    )
                )
                for rank, path in enumerate([stored_vectors.path, *stored_vectors.document_paths])
            ]
            if len(stored) > 1:
                stored = stored | f"StoredFiles{i}" >> beam.Flatten()
            else:
                (stored,) = stored
            joined = (
                {"ids": distinct, "stored": stored}
                | f"JoinStored{i}" >> beam.CoGroupByKey()
                | f"Reuse{i}"
                >> beam.ParDo(_Reuse(stored_vectors.meta)).with_outputs(
                    "embed", "check", "check_stored", main="reused"
                )
            )
            embedded = _embed_texts(joined.embed, model_dir, handle, self._batch_size, f"{i}")
            checked = _embed_texts(joined.check, model_dir, handle, self._batch_size, f"Check{i}")
            _ = (
                {"embedded": checked, "stored": joined.check_stored}
                | f"JoinChecks{i}" >> beam.CoGroupByKey()
                | f"Compare{i}" >> beam.ParDo(_Check())
            )
            per_model[i] = (embedded, joined.reused) | f"Vectors{i}" >> beam.Flatten()
        vectors = (  # (text key, (vector of model 1, ...))
            per_model
            | "JoinModels" >> beam.CoGroupByKey()
            | "OneVectorPerModel" >> beam.Map(_one_vector_per_model)
        )
        query_vectors = (
            vectors
            | "Queries" >> beam.Filter(lambda kv: kv[0][0] == "q")
            | "ByQid" >> beam.Map(lambda kv: (kv[0][1], kv[1]))
        )
        doc_vectors = (
            vectors
            | "Documents" >> beam.Filter(lambda kv: kv[0][0] == "d")
            | "ByDocid" >> beam.Map(lambda kv: (kv[0][1], kv[1]))
        )
        qids = pairs | "QidsByDocid" >> beam.Map(lambda p: (p[1], p[0]))
        by_document = {
            "vectors": doc_vectors,
            "qids": qids,
        } | "JoinDocuments" >> beam.CoGroupByKey()
        queries = beam.pvalue.AsDict(query_vectors)
        if not any(f and feedback.is_on(f[0]) for f in self._feedbacks):
            return by_document | "DotProducts" >> beam.ParDo(_DotProducts(), queries=queries)
        first_stage = serialized_examples.pipeline | "FirstStage" >> beam.Create(
            sorted(self._first_stage.items())
        )
        return (
            {"docs": by_document | "ByQuery" >> beam.FlatMap(_by_query), "first_stage": first_stage}
            | "JoinLists" >> beam.CoGroupByKey()
            | "RankLists" >> beam.ParDo(_RankLists(self._feedbacks), queries=queries)
        )


def read_scores(pattern: str) -> list[Scored]:
    """The (qid, docid, scores) JSON lines a scoring pass wrote."""
    rows = []
    for path in sorted(tf.io.gfile.glob(pattern)):
        with tf.io.gfile.GFile(path) as f:
            rows.extend((qid, docid, tuple(s)) for qid, docid, s in map(json.loads, f))
    return rows


# How a model was scored (metrics.json "scoring").
EMBED_ONCE, PER_PAIR = "embed_once", "per_pair"


def _metric_sum(results: dict, name: str) -> float:
    """Committed (else attempted) value of every counter or distribution sum called `name`."""
    total = 0.0
    for result in results["counters"] + results["distributions"]:
        if result.key.metric.name == name:
            value = result.committed if result.committed is not None else result.attempted
            total += getattr(value, "sum", value) or 0
    return total


def _metric_count(results: dict, name: str) -> int:
    """How many values every distribution called `name` received."""
    total = 0
    for result in results["distributions"]:
        if result.key.metric.name == name:
            value = result.committed if result.committed is not None else result.attempted
            total += value.count if value is not None else 0
    return total


def pass_phases(result: PipelineResult, seconds: float) -> dict[str, float]:
    """Where a scoring pass's `seconds` went, from its Beam metrics: SavedModel loads (count
    and seconds, summed over workers: EmbedAndScore's counters and RunInference's
    `load_model_latency_milli_secs`), seconds inside the models (summed over workers), and the
    rest of the pass (Beam start-up, workers, I/O, joins; the model seconds are taken off as if
    the workers had run in turn, so with N parallel workers it is an upper bound)."""
    results = result.metrics().query(MetricsFilter())
    loads = _metric_sum(results, "saved_model_loads") + _metric_count(
        results, "load_model_latency_milli_secs"
    )
    load_ms = _metric_sum(results, "model_load_ms")
    load_s = (load_ms + _metric_sum(results, "load_model_latency_milli_secs")) / 1e3
    model_s = (
        _metric_sum(results, "model_ms") / 1e3
        + _metric_sum(results, "inference_batch_latency_micro_secs") / 1e6
    )
    reuse = {
        name: int(_metric_sum(results, name))
        for name in (
            "texts_embedded",
            "texts_reused",
            REUSED_FROM_OTHERS,
            REUSE_CHECKED,
            REUSE_MISMATCHED,
        )
    }
    return {
        "pass_seconds": round(seconds, 2),
        **reuse,
        "saved_model_loads": int(loads),
        "model_load_seconds": round(load_s, 2),
        "model_seconds": round(model_s, 2),
        "beam_seconds": round(max(0.0, seconds - load_s - model_s), 2),
    }


class StoredVectors(NamedTuple):
    """The Trainer's vectors file (rankcore/embeddings.py) and its meta.json, and the files of
    other models whose documents are this model's too (embeddings.shares_documents)."""

    path: str
    meta: embeddings.EmbeddingsMeta
    document_paths: tuple[str, ...] = ()


def reusable_embeddings(
    model_run_dir: str | None,
    model_dir: str,
    other_runs: Sequence[str | None] = (),
    split: str | None = None,
) -> StoredVectors | None:
    """The Trainer's embeddings under `model_run_dir` when they are of this very SavedModel
    (the fingerprints agree), else None (then everything is embedded); with them, the vectors
    files of those `other_runs` (other models' ModelRun directories) that share its frozen
    document tower, for their documents: only the one that embedded `split` (the split to
    score; it holds every document of it) when there is one, else all of them (each file read
    is a pass over its records in Beam: on Cranfield 5 files per fold cost 20 s more than 1)."""
    if not model_run_dir:
        return None
    meta = embeddings.read_meta(model_run_dir)
    if meta is None or not meta.model:
        return None
    if meta.model != embeddings.model_fingerprint(model_dir):
        logging.info("the embeddings in %s are of another model: not reused", model_run_dir)
        return None
    lenders = []
    for other in dict.fromkeys(other_runs):  # in order, once each
        if not other or other == model_run_dir:
            continue
        other_meta = embeddings.read_meta(other)
        if other_meta is not None and embeddings.shares_documents(meta, other_meta):
            lenders.append((other, other_meta))
    of_split = [(o, m) for o, m in lenders if split and m.split == split]
    paths = tuple(embeddings.vectors_path(o) for o, _ in (of_split[:1] or lenders))
    return StoredVectors(embeddings.vectors_path(model_run_dir), meta, paths)


def score_split(
    make_pipeline: Callable[[], beam.Pipeline],
    split_uris: Sequence[str],
    models: dict[str, str],
    batch_size: int,
    scores_prefix: str,
    embed: bool = True,
    phases: dict[str, float] | None = None,
    reuse: dict[str, StoredVectors | None] | None = None,
    feedbacks: dict[str, Feedback] | None = None,
    first_stage: dict[str, dict[str, float]] | None = None,
) -> tuple[dict[str, dict[str, dict[str, float]]], dict[str, str]]:
    """Every candidate of the splits (their URIs) scored by every model in one Beam pipeline
    that reads the examples once: the models that `embeds` by EmbedAndScore (unless
    embed=False), the others by ScoreExamples. `reuse` ({model name: reusable_embeddings(...)}) lets
    EmbedAndScore take the Trainer's vectors of that model; should a re-embedded sample of
    them disagree, the split is scored again without them (and a warning says so).
    Returns ({name: run}, {name: EMBED_ONCE or PER_PAIR}); `phases`, when given, gets
    `pass_phases` (where the pass's time went). `feedbacks` ({model name: (setting, alpha)})
    names the models that rank with feedback, from the lists of `first_stage` (EmbedAndScore);
    only models scored by embedding can."""
    how = {n: EMBED_ONCE if embed and embeds(d) else PER_PAIR for n, d in models.items()}
    feedbacks = {n: f for n, f in (feedbacks or {}).items() if n in models}
    for name, (setting, _) in feedbacks.items():
        if how[name] != EMBED_ONCE:
            raise ValueError(
                f"{models[name]} carries feedback ({setting}) but has no embedding "
                "signatures: only dual encoders can rank with feedback"
            )
    reuse = {n: r for n, r in (reuse or {}).items() if r and how.get(n) == EMBED_ONCE}
    groups = {
        label: [n for n in models if how[n] == label]
        for label in (EMBED_ONCE, PER_PAIR)
        if label in how.values()
    }
    transforms = {EMBED_ONCE: EmbedAndScore, PER_PAIR: ScoreExamples}
    t0 = time.perf_counter()
    p = make_pipeline()
    examples = [
        p
        | f"ReadExamples{i or ''}"
        >> beam.io.ReadFromTFRecord(
            io_utils.all_files_pattern(uri),
            compression_type=beam.io.filesystem.CompressionTypes.GZIP,
        )
        for i, uri in enumerate(split_uris)
    ]
    examples = examples[0] if len(examples) == 1 else examples | "Splits" >> beam.Flatten()
    for label, names in groups.items():
        kwargs = {}
        if label == EMBED_ONCE:
            kwargs["reuse"] = [reuse.get(n) for n in names]
            if feedbacks:
                kwargs["feedbacks"] = [feedbacks.get(n) for n in names]
                kwargs["first_stage"] = first_stage
        _ = (
            examples
            | f"Score-{label}"
            >> transforms[label]([models[n] for n in names], batch_size, **kwargs)
            | f"ToJson-{label}" >> beam.Map(json.dumps)
            | f"WriteScores-{label}"
            >> beam.io.WriteToText(f"{scores_prefix}-{label}", file_name_suffix=".jsonl")
        )
    result = p.run()
    result.wait_until_finish()
    if reuse:
        counters = result.metrics().query(MetricsFilter())
        mismatched = _metric_sum(counters, REUSE_MISMATCHED)
        if mismatched:
            logging.warning(
                "%d of %d re-embedded texts differ from the Trainer's vectors by more than %g: "
                "scoring the split again, embedding every text",
                mismatched,
                _metric_sum(counters, REUSE_CHECKED),
                REUSE_TOLERANCE,
            )
            return score_split(
                make_pipeline,
                split_uris,
                models,
                batch_size,
                scores_prefix + "-again",
                embed,
                phases,
                feedbacks=feedbacks,
                first_stage=first_stage,
            )
    if phases is not None:
        phases.update(pass_phases(result, time.perf_counter() - t0))
    runs: dict[str, dict[str, dict[str, float]]] = {}
    for label, names in groups.items():
        runs.update(to_runs(read_scores(f"{scores_prefix}-{label}*.jsonl"), names))
    return {n: runs[n] for n in models}, how
