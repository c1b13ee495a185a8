"""The two Beam pipelines of RankingDataGen (generate.py runs them and planner.py decides in
between).

Data the driver hands to a pipeline (queries, the docids to look for, the groups) goes through
pickle files in the work directory, read by the workers, rather than into closures or
`beam.Create`: Beam pickles those into the pipeline graph with bz2 at level 9, which costs
seconds per megabyte at construction and again in every worker.
"""

from __future__ import annotations

import json
import os
import pickle
from collections.abc import Callable
from typing import Any, NamedTuple

import apache_beam as beam
import tensorflow as tf

from components.ranking_datagen import (
    beam_transforms,
    candidates,
    dense_retrieval,
    readers,
    sampling,
    tokenization,
)
from components.ranking_datagen import collection as collection_io
from components.ranking_datagen.config import CollectionConfig, DatagenConfig
from components.ranking_datagen.readers import BadRecord
from rankcore.file_io import write_text_atomic

# Groups per pickle file: enough files for every worker to read some in parallel.
_GROUPS_PER_FILE = 20_000


def write_pickle(path: str, value: Any) -> str:
    tf.io.gfile.makedirs(os.path.dirname(path))
    with tf.io.gfile.GFile(path, "wb") as f:
        pickle.dump(value, f, protocol=pickle.HIGHEST_PROTOCOL)
    return path


def read_pickle(path: str) -> Any:
    with tf.io.gfile.GFile(path, "rb") as f:
        return pickle.load(f)


def _batched(items: list, size: int = collection_io.DOCUMENT_BATCH) -> list[list]:
    return [items[i : i + size] for i in range(0, len(items), size)]


def _write_json(value: Any, path: str) -> None:
    write_text_atomic(path, json.dumps(value))


def _read_json(path: str) -> Any:
    with tf.io.gfile.GFile(path) as f:
        return json.load(f)


def _pipeline_counters(result: beam.runners.runner.PipelineResult) -> dict[str, int]:
    counters: dict[str, int] = {}
    for counter in result.metrics().query()["counters"]:
        if counter.key.metric.namespace == readers.METRICS_NAMESPACE:
            name = counter.key.metric.name
            # Portable runners report attempted values only (committed is None there).
            value = counter.committed if counter.committed is not None else counter.attempted
            counters[name] = counters.get(name, 0) + int(value or 0)
    return counters


def run_pipeline(
    make_pipeline: Callable[[], beam.Pipeline], build: Callable[[beam.Pipeline], None]
) -> dict[str, int]:
    """Builds and runs one pipeline; returns its `rankpipe` counters. A bad record raised in a
    worker surfaces as a plain BadRecordError naming file, line and problem."""
    p = make_pipeline()
    build(p)
    try:
        result = p.run()
        result.wait_until_finish()
    except Exception as e:
        bad = collection_io.unwrap_bad_record_error(e)
        if bad is not None:
            raise bad from e
        raise
    return _pipeline_counters(result)


class _KeepIn(beam.DoFn):
    """Keeps the documents whose key is in a set read once per worker from a pickle file."""

    def __init__(self, path: str, key: Callable[[tuple], Any]):
        self._path = path
        self._key = key

    def setup(self) -> None:
        self._keep = read_pickle(self._path)

    def process(self, doc: tuple):
        if self._key(doc) in self._keep:
            yield doc


class _KeepWanted(beam.DoFn):
    """Batches of documents -> the documents pass 2 may encode: the judged and run docids
    (pickle file) and the BM25 candidates (side input, once BM25 is done)."""

    def __init__(self, needed_path: str):
        self._needed_path = needed_path

    def setup(self) -> None:
        self._needed = read_pickle(self._needed_path)
        self._wanted: set[str] | None = None

    def process(self, batch: list[tuple], candidate_sets: list[set[str]]):
        if self._wanted is None:
            self._wanted = self._needed.union(*candidate_sets)
        for doc in batch:
            if doc[0] in self._wanted:
                yield doc


def _learn_vocabulary(counts, vocab_size: int, path: str) -> None:
    """Word counts of all texts -> vocab.txt (the learner needs them all in one process; they
    are one element, a Counter of words, not the documents)."""
    vocab = beam_transforms.learn_vocabulary(counts, vocab_size)
    write_text_atomic(path, "".join(t + "\n" for t in vocab))


def _write_bm25(
    merged: dict[str, list[tuple[float, str]]],
    query_tokens: dict[str, list[str]],
    path: str,
) -> set[str]:
    """The merged per-query candidates -> the BM25 run (every qid) as JSON; returns its
    docids."""
    run = candidates.run_from_candidates(merged, query_tokens)
    _write_json(run, path)
    return {docid for docs in run.values() for docid in docs}


def _write_dense(lists: dict[str, list[tuple[float, str]]], path: str) -> set[str]:
    """The dense candidates -> JSON; returns their docids (pass 2 needs their texts)."""
    _write_json(lists, path)
    return {docid for docs in lists.values() for _, docid in docs}


class CollectionPass(NamedTuple):
    num_documents: int
    found_docids: set[str]  # the asked-for docids (and BM25 candidates) found in the corpus
    bad_documents: int
    bad_document_examples: list[BadRecord]
    # docid -> [file index, start line] of each copy, in file order (only across 2+ files)
    duplicates: dict[str, list[list[int]]]
    bm25: dict[str, dict[str, float]] | None
    # datagen.hybrid on: qid -> its dense top [[score, docid]] (dense.py), else None
    dense: dict[str, list[list]] | None
    # With corpus vectors: how many documents took their stored vector, how many were embedded
    # (dense_retrieval.stored_counts), else None
    dense_sources: dict[str, int] | None
    # JSON-lines files of [docid, text, file index]: the documents pass 2 may need.
    text_files: list[str]
    counters: dict[str, int]


_PASS1_FILES = ("documents", "found", "bad_count", "bad_examples", "duplicates", "bm25", "dense")


def collection_pass(
    make_pipeline: Callable[[], beam.Pipeline],
    coll: CollectionConfig,
    cfg: DatagenConfig,
    queries: dict[str, str],
    needed: set[str],
    learn_vocab_to: str | None,
    need_bm25: bool,
    work_dir: str,
    stored_vectors: str | None = None,
) -> CollectionPass:
    """Pass 1: reads and counts the documents, finds which `needed` docids exist, learns the
    vocabulary into `learn_vocab_to` (if given), runs BM25 (if `need_bm25`) and the dense
    retrieval of hybrid candidates (if `cfg.hybrid.checkpoint_dir`; the documents' vectors from
    the corpus-vectors shards `stored_vectors` when given, dense_retrieval.py), and keeps the
    texts of the needed and retrieved documents for pass 2, which so does not read the corpus
    again."""
    pass_dir = os.path.join(work_dir, "pass1")
    files = {name: os.path.join(pass_dir, f"{name}.json") for name in _PASS1_FILES}
    queries_path = write_pickle(os.path.join(pass_dir, "queries.pkl"), queries)
    query_tokens_path = (
        write_pickle(
            os.path.join(pass_dir, "query_tokens.pkl"),
            candidates.query_tokens(queries, cfg.bm25.stemmer),
        )
        if need_bm25
        else None
    )
    needed_path = write_pickle(os.path.join(pass_dir, "needed.pkl"), needed)
    texts_prefix = os.path.join(pass_dir, "texts", "part")
    read = collection_io.ReadDocuments(
        coll.documents, coll.documents_format, cfg.on_bad_record,
        coll.allow_empty_documents,
    )  # fmt: skip

    def build(p: beam.Pipeline) -> None:
        batches_and_bad = p | "ReadDocuments" >> read
        batches, bad = batches_and_bad["batches"], batches_and_bad["bad"]
        _count_documents(batches, bad, files, len(read.paths) > 1)
        if learn_vocab_to:
            _learn_vocabulary_from(p, batches, queries_path, cfg, learn_vocab_to)
        if need_bm25:
            candidate_sets = _bm25_candidates(p, batches, query_tokens_path, cfg, files["bm25"])
        else:
            candidate_sets = p | "NoCandidates" >> beam.Create([])
        if cfg.hybrid.checkpoint_dir:
            dense_sets = (
                batches
                | "Dense"
                >> dense_retrieval.DenseRetrieval(
                    cfg, queries_path, sorted(queries), stored_vectors
                )
                | "WriteDense" >> beam.Map(_write_dense, files["dense"])
            )
            candidate_sets = (candidate_sets, dense_sets) | "AllCandidates" >> beam.Flatten()
        _keep_wanted(batches, needed_path, candidate_sets, files["found"], texts_prefix)

    counters = run_pipeline(make_pipeline, build)
    return CollectionPass(
        num_documents=_read_json(files["documents"]),
        found_docids=set(_read_json(files["found"])),
        bad_documents=_read_json(files["bad_count"]),
        bad_document_examples=[BadRecord(*r) for r in _read_json(files["bad_examples"])],
        duplicates=_read_json(files["duplicates"]) if len(read.paths) > 1 else {},
        bm25=_read_json(files["bm25"]) if need_bm25 else None,
        dense=_read_json(files["dense"]) if cfg.hybrid.checkpoint_dir else None,
        dense_sources=(
            dense_retrieval.stored_counts(counters)
            if cfg.hybrid.checkpoint_dir and stored_vectors
            else None
        ),
        text_files=sorted(tf.io.gfile.glob(texts_prefix + "*")),
        counters=counters,
    )


def _count_documents(
    batches: beam.PCollection, bad: beam.PCollection, files: dict[str, str], several_files: bool
) -> None:
    """Pass 1's counts into `files`: documents, bad records and the first of them, and (with
    `several_files`) the docids found in more than one file."""
    _ = (
        batches
        | "BatchSizes" >> beam.Map(len)
        | "CountDocuments" >> beam.CombineGlobally(sum)
        | "WriteCount" >> beam.Map(_write_json, files["documents"])
    )
    _ = (
        bad
        | "CountBad" >> beam.combiners.Count.Globally()
        | "WriteBadCount" >> beam.Map(_write_json, files["bad_count"])
    )
    _ = (
        bad
        | "FirstBad" >> beam.combiners.Top.Smallest(collection_io.MAX_EXAMPLES)
        | "WriteBad" >> beam.Map(lambda b: _write_json([list(r) for r in b], files["bad_examples"]))
    )
    if several_files:
        # The readers check duplicates within a file; across files it takes a shuffle.
        _ = (
            batches
            | "IdFile" >> beam.FlatMap(lambda batch: [(d[0], (d[2], d[3])) for d in batch])
            | "GroupIds" >> beam.GroupByKey()
            | "Repeated" >> beam.Filter(lambda kv: len(kv[1]) > 1)
            | "SortFiles" >> beam.Map(lambda kv: (kv[0], sorted(kv[1])))
            | "Duplicates" >> beam.combiners.ToDict()
            | "WriteDuplicates" >> beam.Map(_write_json, files["duplicates"])
        )


def _learn_vocabulary_from(
    p: beam.Pipeline,
    batches: beam.PCollection,
    queries_path: str,
    cfg: DatagenConfig,
    path: str,
) -> None:
    """The WordPiece vocabulary learned from the word counts of documents and queries."""
    query_batches = (
        p
        | "QueriesFile" >> beam.Create([queries_path])
        | "Queries" >> beam.FlatMap(lambda path: _batched(sorted(read_pickle(path).items())))
    )
    _ = (
        (batches, query_batches)
        | "AllTexts" >> beam.Flatten()
        | "WordCounts" >> beam_transforms.CountAllWords(cfg.vocab.lowercase)
        | "LearnVocabulary" >> beam.Map(_learn_vocabulary, cfg.vocab.size, path)
    )


def _bm25_candidates(
    p: beam.Pipeline,
    batches: beam.PCollection,
    query_tokens_path: str | None,
    cfg: DatagenConfig,
    path: str,
) -> beam.PCollection:
    """The BM25 run written to `path`; returns its docids (one set).

    Sharded: each batch of documents is a shard, scored with global statistics
    (beam_transforms.ShardedBm25); no step holds more than one batch of documents."""
    query_tokens = (
        p
        | "QueryTokensFile" >> beam.Create([query_tokens_path])
        | "QueryTokens" >> beam.Map(read_pickle)
    )
    bm25 = cfg.bm25
    return (
        (batches, query_tokens)
        | "BM25" >> beam_transforms.ShardedBm25(cfg.candidates_depth, bm25.k1, bm25.b, bm25.stemmer)
        | "WriteBM25" >> beam.Map(_write_bm25, beam.pvalue.AsSingleton(query_tokens), path)
    )


def _keep_wanted(
    batches: beam.PCollection,
    needed_path: str,
    candidate_sets: beam.PCollection,
    found_path: str,
    texts_prefix: str,
) -> None:
    """The needed and candidate documents: their docids (sorted, JSON) to `found_path`, their
    texts as JSON lines under `texts_prefix` for pass 2."""
    wanted = batches | "Wanted" >> beam.ParDo(
        _KeepWanted(needed_path), candidate_sets=beam.pvalue.AsList(candidate_sets)
    )
    _ = (
        wanted
        | "DocIds" >> beam.Map(lambda d: d[0])
        | "FoundDocIds" >> beam.combiners.ToList()
        | "WriteFound" >> beam.Map(lambda ids: _write_json(sorted(ids), found_path))
    )
    _ = (
        wanted
        | "TextLines" >> beam.Map(lambda d: json.dumps(list(d)))
        | "WriteTexts" >> beam.io.WriteToText(texts_prefix, file_name_suffix=".jsonl")
    )


def encoding_pass(
    make_pipeline: Callable[[], beam.Pipeline],
    cfg: DatagenConfig,
    queries: dict[str, str],
    groups: list[sampling.Group],
    text_files: list[str],
    duplicates: dict[str, list[list[int]]],
    vocab_path: str,
    vocab: list[str],
    num_shards: dict[str, int],
    stage: dict[str, str],
    work_dir: str,
) -> dict[str, int]:
    """Pass 2: tokenizes (tf.Transform) the texts the groups use (read from pass 1's
    `text_files`), writes the TransformGraph to stage["transform_graph"] and the example shards
    under stage["examples"]."""
    pass_dir = os.path.join(work_dir, "pass2")
    # Only the texts the examples use are encoded: on a large corpus with few queries that is
    # a small part of it. A duplicated docid keeps the copy of the first file.
    keep_file = {docid: copies[0][0] for docid, copies in duplicates.items()}
    wanted = {(d, keep_file.get(d)) for g in groups for d in g.docids}  # (docid, file | None)
    wanted_path = write_pickle(os.path.join(pass_dir, "wanted.pkl"), wanted)
    query_texts = sorted({("q:" + g.qid, queries[g.qid]) for g in groups})
    queries_path = write_pickle(os.path.join(pass_dir, "queries.pkl"), query_texts)
    group_files = [
        write_pickle(
            os.path.join(pass_dir, f"groups-{i:05d}.pkl"), groups[i : i + _GROUPS_PER_FILE]
        )
        for i in range(0, max(len(groups), 1), _GROUPS_PER_FILE)
    ]
    max_q, max_d = cfg.max_query_length, cfg.max_doc_length

    def build(p: beam.Pipeline) -> None:
        texts = (
            p
            | "TextFiles" >> beam.Create(text_files)
            | "ReadTexts" >> beam.io.ReadAllFromText()
            | "Parse" >> beam.Map(lambda line: tuple(json.loads(line)))
            | "Referenced"
            >> beam.ParDo(
                _KeepIn(wanted_path, lambda d: (d[0], d[2] if d[0] in keep_file else None))
            )
            | "Spread" >> beam.Reshuffle()
            | "KeyDocs" >> beam.Map(lambda d: ("d:" + d[0], d[1])),
            p
            | "QueriesFile" >> beam.Create([queries_path])
            | "Queries" >> beam.FlatMap(read_pickle),
        ) | "AllTexts" >> beam.Flatten()
        tokens = (
            texts
            | "Tokenize"
            >> beam_transforms.TokenizeWithTransform(
                vocab_path,
                cfg.vocab.lowercase,
                stage["transform_graph"],
                os.path.join(work_dir, "tft"),
            )
            | "CountTokens" >> beam.ParDo(beam_transforms.CountTokens(max_q, max_d))
        )
        groups_pc = (
            p | "GroupFiles" >> beam.Create(group_files) | "Groups" >> beam.FlatMap(read_pickle)
        )
        _ = (groups_pc, tokens) | "WriteExamples" >> beam_transforms.WriteExamples(
            stage["examples"],
            num_shards,
            cfg.shuffle_seed,
            max_q,
            max_d,
            tokenization.unk_id(vocab),
        )

    return run_pipeline(make_pipeline, build)
