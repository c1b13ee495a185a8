"""Encode-once scoring (scoring.py's second path): a dual encoder's score is the dot product of
two L2-normalised vectors, so every distinct query and document of the split is embedded once
(the `embed_query_ids` / `embed_doc_ids` signatures of trainer_module/export.py, batched by
length: embedding.py) and each pair is scored by a dot product, instead of encoding a document
once per query that retrieved it (up to candidates_depth times). This is how
sentence-transformers scores a corpus (util.semantic_search over encode()d embeddings,
https://www.sbert.net/examples/applications/semantic-search/). Pairs meet their document's
vectors through a CoGroupByKey by document, and their query's vectors through a side input
(queries are few next to pairs: every worker holds the split's query vectors, Q x dim floats
per model), so what travels per pair is two ids, not a 384-float vector, and memory grows with
the texts, not with the candidates (docs/speed.md "Scale of the scoring"). A model whose
documents come from frozen sentence encoders takes its document vectors from the corpus-vectors
artifact instead of embedding them (corpus_documents.py).

A dual encoder with pseudo-relevance feedback scores a query's whole list
(rankcore/feedback.py): its pairs are grouped by query and each list is ranked there, one list
in memory at a time (docs/evaluator.md "Feedback").
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence

import apache_beam as beam
import numpy as np
from apache_beam.utils import shared

from components.ranking_evaluator.corpus_documents import (
    CorpusDocuments,
    documents_from_corpus,
    is_document,
)
from components.ranking_evaluator.embedding import embed_texts
from components.ranking_evaluator.eval_examples import Pair, Scored, Text, example_pair
from rankcore import feedback

Feedback = tuple[dict, float | None]  # (feedback setting, the model's fusion alpha)


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

    `corpus` gives, per model (None: none), where its document vectors are in the
    corpus-vectors artifact (corpus_documents.corpus_documents): the split's documents found
    there by their cut ids are not embedded (corpus_documents.py), the others and the queries
    are.

    `feedbacks` gives, per model (None: none), its feedback setting and fusion alpha: a model
    with feedback (rankcore/feedback.py) ranks each query's whole list, so pairs are grouped by
    query and joined with `first_stage` ({qid: {docid: score}}, the run the feedback
    documents come from) before scoring (_RankLists); the split's vectors never leave Beam."""

    def __init__(
        self,
        model_dirs: Sequence[str],
        batch_size: int = 256,
        corpus: Sequence[CorpusDocuments | None] | None = None,
        feedbacks: Sequence[Feedback | None] | None = None,
        first_stage: dict[str, dict[str, float]] | None = None,
        frozen_from: Sequence[str | None] | None = None,
    ):
        super().__init__()
        if not model_dirs:
            raise ValueError("EmbedAndScore needs at least one model")
        self._model_dirs = list(model_dirs)
        self._batch_size = batch_size
        self._corpus = list(corpus or [None] * len(self._model_dirs))
        self._feedbacks = list(feedbacks or [None] * len(self._model_dirs))
        self._first_stage = first_stage or {}
        self._frozen_from = list(frozen_from or [None] * len(self._model_dirs))

    def expand(self, serialized_examples: beam.PCollection) -> beam.PCollection:
        pairs = serialized_examples | "Parse" >> beam.Map(example_pair)
        distinct = (
            pairs | "Texts" >> beam.FlatMap(_texts) | "Distinct" >> beam.CombinePerKey(_one_text)
        )
        per_model = {}
        for i, (model_dir, documents) in enumerate(zip(self._model_dirs, self._corpus)):
            handle = shared.Shared()  # one load per worker process
            frozen = self._frozen_from[i]
            if documents is None:
                per_model[i] = embed_texts(
                    distinct, model_dir, handle, self._batch_size, f"{i}", frozen
                )
                continue
            split = distinct | f"QueriesAndDocuments{i}" >> beam.Partition(
                lambda item, _: int(is_document(item)), 2
            )
            taken, to_embed = documents_from_corpus(split[1], documents, f"{i}")
            embedded = embed_texts(
                (split[0], to_embed) | f"ToEmbed{i}" >> beam.Flatten(),
                model_dir,
                handle,
                self._batch_size,
                f"{i}",
                frozen,
            )
            per_model[i] = (embedded, taken) | f"Vectors{i}" >> beam.Flatten()
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
