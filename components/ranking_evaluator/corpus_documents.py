"""A model's document vectors from the corpus-vectors artifact (rankcore/corpus_vectors.py) in
EmbedAndScore (embed_once.py), instead of embedding the documents with the model.

A dual encoder whose documents come from frozen sentence encoders (its Trainer wrote
document_tower.json beside the SavedModel: DocumentTower.write) serves, for a document, the
vectors the CorpusEncoder already computed with the same checkpoints, cuts and precision: the
artifact's vectors of those encoders, each times its scale, concatenated
(corpus_vectors.compose). So the evaluator reads them from the artifact in Beam and joins
them with the split's documents by their cut token ids; a document the artifact lacks, or whose
ids differ from the encoded ones (another tokenization), is embedded by the model as any text
of a model without a tower. Queries are always embedded (each model's query tower is its own).

In Beam, not in the driver: the artifact is the whole corpus, read shard by shard on the
workers (as the CorpusEncoder wrote it), so the driver's memory does not grow with it.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator
from typing import NamedTuple

import apache_beam as beam
import numpy as np

from components.ranking_evaluator.eval_examples import Text
from rankcore import corpus_vectors

# Beam counters (namespace "rankpipe") of the documents a scoring pass took from the artifact;
# embedding.py counts those it embedded (DOCUMENTS_EMBEDDED).
FROM_CORPUS_VECTORS = "documents_from_corpus_vectors"


class CorpusDocuments(NamedTuple):
    """Where a model's document vectors are: the artifact's URI, the tower's parts ((encoder
    key, scale), ...: DocumentTower.read) and the cut of the ids the artifact holds (the
    encoders' max_length, the model's max_doc_length: the Trainer builds the tower from it)."""

    uri: str
    parts: tuple[tuple[str, float], ...]
    max_length: int


def corpus_documents(corpus_vectors_uri: str | None, model_dir: str) -> CorpusDocuments | None:
    """The model's document vectors in the artifact at `corpus_vectors_uri`, or None (its
    documents are embedded): when no artifact is wired, the model has no frozen document tower
    (no document_tower.json beside its SavedModel), or the artifact lacks one of its encoders
    (a log line names them)."""
    if not corpus_vectors_uri:
        return None
    parts = corpus_vectors.DocumentTower.read(model_dir)
    if not parts:
        return None
    known = corpus_vectors.read_meta(corpus_vectors_uri).by_key()
    missing = [key for key, _ in parts if key not in known]
    if missing:
        logging.warning(
            "%s serves documents from encoders %s that the corpus vectors at %s do not hold "
            "(it has %s): its documents are embedded by the model",
            model_dir,
            missing,
            corpus_vectors_uri,
            sorted(known),
        )
        return None
    cut = min(known[key].max_length for key, _ in parts)
    return CorpusDocuments(corpus_vectors_uri, tuple(parts), cut)


def _compose(
    docid_rows: tuple[str, Iterable[tuple[int, tuple[int, ...], np.ndarray]]],
    scales: tuple[float, ...],
) -> Iterator[tuple[tuple[int, ...], tuple[str, np.ndarray]]]:
    """(docid, [(part index, ids, vector), ...]) -> (cut ids, (docid, tower vector)) when every
    part encoded the document with the same ids: corpus_vectors.compose over one-row tables,
    so the vector is the one vectors_by_ids gives."""
    docid, rows = docid_rows
    by_part = {}
    for part, ids, vector in rows:
        by_part.setdefault(part, (ids, vector))
    if len(by_part) < len(scales):
        return
    tables = [
        corpus_vectors.EncoderTable((docid,), (by_part[i][0],), by_part[i][1][None, :])
        for i in range(len(scales))
    ]
    for ids, vector in corpus_vectors.compose(tables, scales).items():
        yield ids, (docid, vector)


def tower_vectors(
    pipeline: beam.Pipeline, documents: CorpusDocuments, label: str
) -> beam.PCollection:
    """(cut ids, (docid, vector)) of every document of the artifact, as the model's tower
    serves it: each part's shards read and parsed, joined by docid, composed (_compose)."""
    parts = [
        pipeline
        | f"ReadCorpus{label}-{i}"
        >> beam.io.ReadFromTFRecord(
            corpus_vectors.shard_pattern(documents.uri, key),
            compression_type=beam.io.filesystem.CompressionTypes.GZIP,
        )
        | f"ParseCorpus{label}-{i}" >> beam.Map(corpus_vectors.from_example)
        | f"KeyCorpus{label}-{i}" >> beam.Map(lambda r, i=i: (r[0], (i, r[1], r[2])))
        for i, (key, _) in enumerate(documents.parts)
    ]
    rows = parts[0] if len(parts) == 1 else parts | f"CorpusParts{label}" >> beam.Flatten()
    scales = tuple(scale for _, scale in documents.parts)
    return (
        rows
        | f"CorpusByDocid{label}" >> beam.GroupByKey()
        | f"ComposeCorpus{label}" >> beam.FlatMap(_compose, scales=scales)
    )


class _TakeOrEmbed(beam.DoFn):
    """(cut ids, {"texts": [(text key, ids)], "vectors": [(docid, vector)]}) -> (text key,
    vector) of each document with those ids when the artifact has them (of several docids
    with the same ids, the smallest docid's, so every runner takes the same), else the
    document to embed ("embed")."""

    def __init__(self):
        self._taken = beam.metrics.Metrics.counter("rankpipe", FROM_CORPUS_VECTORS)

    def process(self, joined: tuple[tuple[int, ...], dict]) -> Iterator:
        _, parts = joined
        # A document of the corpus that this split does not rank has no texts: nothing.
        stored = min(parts["vectors"], key=lambda dv: dv[0], default=None)
        for key, ids in parts["texts"]:
            if stored is None:
                yield beam.pvalue.TaggedOutput("embed", (key, ids))
            else:
                self._taken.inc()
                yield key, stored[1]


def documents_from_corpus(
    distinct_documents: beam.PCollection, documents: CorpusDocuments, label: str
) -> tuple[beam.PCollection, beam.PCollection]:
    """(text key, ids) of the split's distinct documents -> ((text key, vector) of those the
    artifact has, (text key, ids) of the others, to embed). A document is looked up by its
    ids cut at `documents.max_length`, as the model's embed_doc_ids cuts them."""
    texts = distinct_documents | f"ByCutIds{label}" >> beam.Map(
        lambda kv, cut=documents.max_length: (tuple(kv[1][:cut]), kv)
    )
    vectors = tower_vectors(distinct_documents.pipeline, documents, label)
    joined = (
        {"texts": texts, "vectors": vectors}
        | f"JoinCorpus{label}" >> beam.CoGroupByKey()
        | f"TakeOrEmbed{label}" >> beam.ParDo(_TakeOrEmbed()).with_outputs("embed", main="taken")
    )
    return joined.taken, joined.embed


def is_document(item: tuple[Text, object]) -> bool:
    return item[0][0] == "d"
