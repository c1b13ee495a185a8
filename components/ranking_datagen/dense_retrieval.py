"""The dense retrieval of hybrid candidates as a Beam transform (dense.py scores a shard; this
runs it over the corpus and merges the shards' rows as BM25's are merged).

Without corpus vectors, each batch of documents out of the reader is a shard, embedded and
scored where it is. With the corpus-vectors artifact (the CorpusEncoder's, rankcore/
corpus_vectors.py), the documents are first joined by docid with the artifact's records of the
hybrid encoder (its TFRecord shards read in Beam, a CoGroupByKey) and rebatched into shards;
each shard then takes its documents' stored vectors and embeds only the misses
(dense.DenseScorer.document_vectors). A join rather than the whole table loaded once per worker
(apache_beam.utils.shared): no step holds more than one docid's group or one shard, so a
worker's memory does not grow with the corpus (MS MARCO's 8.8M passages are 13.5 GB of MiniLM
vectors); the cost is a shuffle of the texts and vectors, small next to embedding them.

Counters (namespace `rankpipe`): `dense_documents` always; with the artifact also
`dense_from_corpus_vectors` and `dense_embedded` (the misses), which the summary's `hybrid`
entry reports.
"""

from __future__ import annotations

import pickle
from collections.abc import Iterator
from typing import Any

import apache_beam as beam
import tensorflow as tf

from components.ranking_datagen import candidates, dense
from components.ranking_datagen.beam_transforms import TopCandidatesCombine
from components.ranking_datagen.collection import DOCUMENT_BATCH
from components.ranking_datagen.config import DatagenConfig
from components.ranking_datagen.readers import METRICS_NAMESPACE
from rankcore import corpus_vectors

DOCUMENTS_COUNTER = "dense_documents"
FROM_CORPUS_VECTORS_COUNTER = "dense_from_corpus_vectors"
EMBEDDED_COUNTER = "dense_embedded"


class _DenseShard(beam.DoFn):
    """A batch of documents -> its dense top candidates of every query (dense.DenseScorer: the
    encoder is loaded and the queries embedded once per worker, in setup). With `stored`, each
    document is (docid, text, dense.Stored or None) and its vector comes from there when it
    may; otherwise (docid, text, ...) and every document is embedded."""

    def __init__(self, scorer_kwargs: dict, queries_path: str, depth: int, stored: bool):
        self._scorer_kwargs, self._queries_path = scorer_kwargs, queries_path
        self._depth, self._stored = depth, stored

    def setup(self) -> None:
        with tf.io.gfile.GFile(self._queries_path, "rb") as f:
            queries = pickle.load(f)
        self._scorer = dense.DenseScorer(queries=queries, **self._scorer_kwargs)
        counter = beam.metrics.Metrics.counter
        self._docs = counter(METRICS_NAMESPACE, DOCUMENTS_COUNTER)
        self._from_stored = counter(METRICS_NAMESPACE, FROM_CORPUS_VECTORS_COUNTER)
        self._embedded = counter(METRICS_NAMESPACE, EMBEDDED_COUNTER)

    def process(self, batch: list[tuple]) -> Iterator[candidates.ShardTop]:
        self._docs.inc(len(batch))
        docids, texts = [d[0] for d in batch], [d[1] for d in batch]
        if not self._stored:
            yield self._scorer.score(docids, texts, self._depth)
            return
        got = self._scorer.document_vectors(texts, [d[2] for d in batch])
        self._from_stored.inc(got.stored)
        self._embedded.inc(len(batch) - got.stored)
        yield self._scorer.top(docids, got.vectors, self._depth)


def _stored_entry(record: bytes) -> tuple[str, dense.Stored]:
    docid, ids, vector = corpus_vectors.from_example(record)
    return docid, dense.Stored(ids, vector)


def _with_stored(element: tuple[str, dict[str, Any]]) -> Iterator[tuple]:
    """(docid, {"texts": its texts, "stored": its entries}) -> (docid, text, entry or None) per
    text: every copy of a docid read from several files is scored, as without the artifact,
    and the ids check lets the stored vector serve only the text it was encoded from."""
    docid, joined = element
    stored = next(iter(joined["stored"]), None)
    for text in joined["texts"]:
        yield docid, text, stored


class JoinStoredVectors(beam.PTransform):
    """Batches of (docid, text, ...) -> batches of (docid, text, dense.Stored or None): each
    document with its entry in the corpus-vectors shards matching `pattern`
    (dense.stored_vectors_pattern), joined by docid."""

    def __init__(self, pattern: str):
        super().__init__()
        self._pattern = pattern

    def expand(self, batches: beam.PCollection) -> beam.PCollection:
        texts = batches | "Texts" >> beam.FlatMap(lambda batch: [(d[0], d[1]) for d in batch])
        stored = (
            batches.pipeline
            | "ReadCorpusVectors"
            >> beam.io.ReadFromTFRecord(
                self._pattern, compression_type=beam.io.filesystem.CompressionTypes.GZIP
            )
            | "ParseVectors" >> beam.Map(_stored_entry)
        )
        return (
            {"texts": texts, "stored": stored}
            | "ByDocid" >> beam.CoGroupByKey()
            | "WithStored" >> beam.FlatMap(_with_stored)
            | "Shards"
            >> beam.BatchElements(min_batch_size=DOCUMENT_BATCH, max_batch_size=DOCUMENT_BATCH)
        )


class DenseRetrieval(beam.PTransform):
    """Batches of (docid, text, ...) -> one element: qid -> its top `depth` [(score, docid)] by
    the checkpoint's sentence embeddings (dense.py), for every query of the pickled qid -> text
    file `queries_path` (`qids`: their sorted ids). Each batch is a shard scored where it is;
    the shards' rows merge as BM25's do. With `stored_pattern` (dense.stored_vectors_pattern),
    the documents' vectors come from the corpus vectors (module docstring)."""

    def __init__(
        self,
        cfg: DatagenConfig,
        queries_path: str,
        qids: list[str],
        stored_pattern: str | None = None,
    ):
        super().__init__()
        self._scorer_kwargs = {
            "checkpoint_dir": cfg.hybrid.checkpoint_dir,
            "lowercase": cfg.hybrid.lowercase,
            "max_query_length": cfg.max_query_length,
            "max_doc_length": cfg.max_doc_length,
            "batch_size": cfg.hybrid.batch_size,
        }
        self._queries_path, self._qids, self._depth = queries_path, qids, cfg.hybrid.depth
        self._stored_pattern = stored_pattern

    def expand(self, batches: beam.PCollection) -> beam.PCollection:
        stored = self._stored_pattern is not None
        if stored:
            batches = batches | "JoinCorpusVectors" >> JoinStoredVectors(self._stored_pattern)
        shard = _DenseShard(self._scorer_kwargs, self._queries_path, self._depth, stored)
        return (
            batches
            | "EmbedAndScore" >> beam.ParDo(shard)
            | "TopPerQuery" >> beam.CombineGlobally(TopCandidatesCombine(self._depth))
            | "Lists" >> beam.Map(candidates.candidate_lists, self._qids)
        )


def stored_counts(counters: dict[str, int]) -> dict[str, int]:
    """The summary's `hybrid` counts of where the documents' vectors came from (with corpus
    vectors), from the collection pass's counters."""
    return {
        "documents_from_corpus_vectors": counters.get(FROM_CORPUS_VECTORS_COUNTER, 0),
        "documents_embedded": counters.get(EMBEDDED_COUNTER, 0),
    }
