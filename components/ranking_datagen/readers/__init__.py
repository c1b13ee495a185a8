"""Pluggable readers for ranking collections in the field's standard file formats.

Each reader turns one file (local, gs://, ... through ``tf.io.gfile``; ``.gz`` is gunzipped)
into plain records, so that a Beam pipeline can call it per file path::

    docs = paths | beam.FlatMap(get_reader("documents", "trec_sgml").read)

or, to keep the bad records as data instead of only counting them::

    out = paths | beam.ParDo(ReadCollectionFile(reader, "skip")).with_outputs(
        BAD_RECORDS_TAG, main="records")
    out.records, out[BAD_RECORDS_TAG]

Layout (one way down: this registry -> format families -> ``base``):

* ``base``: records, ``BadRecord`` and the ``on_bad_record`` policy, line I/O, the ``Reader``
  base classes and the one parsing loop (``parse_items``, ``Columns``) every reader uses;
* ``trec`` (qrels, runs, SGML documents, topics), ``beir``, ``msmarco``, ``cranfield``: one
  module per format family, each citing its upstream spec;
* ``sniff``: which format a file looks like from its first lines (``guess_format``), for the
  error of a file read in the wrong format and for ``rankpipe init``;
* here: ``READERS``, the registry, the one place a format name is bound to its reader (the
  configuration's lists of format names are to be derived from it, issue 19).

A new format is one ``Reader`` subclass in its family module plus one entry in ``READERS``.
"""

from __future__ import annotations

from typing import Any

from components.ranking_datagen.readers.base import (
    BAD_RECORDS_TAG,
    DOCUMENTS,
    KINDS,
    METRICS_NAMESPACE,
    POLICIES,
    QRELS,
    QUERIES,
    RUN,
    BadRecord,
    BadRecordError,
    Document,
    EmptyInputError,
    Judgment,
    PairReader,
    Policy,
    Query,
    Reader,
    Record,
    RunEntry,
    TextRecordReader,
    bad_records_counter,
    iter_lines,
    open_binary,
)
from components.ranking_datagen.readers.beir import BeirCorpus, BeirQrels, BeirQueries
from components.ranking_datagen.readers.cranfield import (
    CranfieldDocuments,
    CranfieldQrels,
    CranfieldQueries,
)
from components.ranking_datagen.readers.msmarco import MsMarcoTsvDocuments, MsMarcoTsvQueries
from components.ranking_datagen.readers.sniff import guess_format
from components.ranking_datagen.readers.trec import (
    TOPIC_FIELDS,
    TrecQrels,
    TrecRun,
    TrecSgmlDocuments,
    TrecTopics,
)

READERS: dict[str, dict[str, type[Reader]]] = {
    DOCUMENTS: {
        "trec_sgml": TrecSgmlDocuments,
        "beir_corpus": BeirCorpus,
        "msmarco_tsv": MsMarcoTsvDocuments,
        "cranfield": CranfieldDocuments,
    },
    QUERIES: {
        "trec_topics": TrecTopics,
        "beir_queries": BeirQueries,
        "msmarco_tsv": MsMarcoTsvQueries,
        "cranfield": CranfieldQueries,
    },
    QRELS: {
        "trec_qrels": TrecQrels,
        "beir_qrels": BeirQrels,
        "cranfield": CranfieldQrels,
    },
    RUN: {
        "trec_run": TrecRun,
    },
}


def __getattr__(name: str) -> Any:
    """``ReadCollectionFile`` on first use (PEP 562): it is a Beam DoFn (beam_io.py), and
    importing Beam costs seconds that users of the registry alone (the pipeline config, hence
    `rankpipe config show`) need not pay."""
    if name == "ReadCollectionFile":
        from components.ranking_datagen.readers.beam_io import ReadCollectionFile

        return ReadCollectionFile
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def get_reader(kind: str, format_name: str, **options: Any) -> Reader:
    """Instantiate the reader registered for ``kind`` ("documents", "queries", "qrels", "run")
    and ``format_name``; ``options`` go to its constructor (on_bad_record, fields, ...)."""
    if kind not in READERS:
        raise ValueError(f"unknown reader kind {kind!r}; known: {sorted(READERS)}")
    formats = READERS[kind]
    if format_name not in formats:
        raise ValueError(f"unknown {kind} format {format_name!r}; known: {sorted(formats)}")
    return formats[format_name](**options)


__all__ = [
    "BAD_RECORDS_TAG",
    "DOCUMENTS",
    "KINDS",
    "METRICS_NAMESPACE",
    "POLICIES",
    "QRELS",
    "QUERIES",
    "READERS",
    "RUN",
    "TOPIC_FIELDS",
    "BadRecord",
    "BadRecordError",
    "BeirCorpus",
    "BeirQrels",
    "BeirQueries",
    "CranfieldDocuments",
    "CranfieldQrels",
    "CranfieldQueries",
    "Document",
    "EmptyInputError",
    "Judgment",
    "MsMarcoTsvDocuments",
    "MsMarcoTsvQueries",
    "PairReader",
    "Policy",
    "Query",
    "ReadCollectionFile",
    "Reader",
    "Record",
    "RunEntry",
    "TextRecordReader",
    "TrecQrels",
    "TrecRun",
    "TrecSgmlDocuments",
    "TrecTopics",
    "bad_records_counter",
    "get_reader",
    "guess_format",
    "iter_lines",
    "open_binary",
]
