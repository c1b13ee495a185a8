"""RankingDataGen executor: raw collection -> vocabulary, TransformGraph, sharded examples.

Steps (two Beam pipelines, both built with `beam_pipeline_args`: DirectRunner, Dataflow, Flink
or Spark alike):
  0. driver: read queries, qrels, the first-stage run and explicit split lists (small next to
     the documents), check the given vocabulary; bad records fail or are counted right away;
  1. collection pass (Beam): read and count the documents, find which judged/run docids exist,
     learn the WordPiece vocabulary from word counts (unless `vocab_file` is given) and, without
     a first-stage run, compute BM25 candidates;
  2. driver: drop judgments/run entries that point nowhere, rank candidates, assign splits and
     sample the groups (sampling needs all of a query's judgments and candidates together);
  3. encoding pass (Beam): tf.Transform tokenizes the queries and documents the groups refer to
     in batches and writes the TransformGraph; groups are joined with token ids and written as
     shuffled, sharded gzip TFRecords.
Everything is written under a staging directory and moved into the artifacts at the end; a
failure clears the artifact directories, so a failed run leaves nothing a later component could
read.
"""

from __future__ import annotations

import json
import logging
import math
import os
import time
from collections.abc import Callable
from typing import Any, NamedTuple

import apache_beam as beam
import tensorflow as tf
from tfx import types
from tfx.dsl.components.base import base_beam_executor
from tfx.types import artifact_utils

from components import artifacts
from components.ranking_datagen import (
    beam_transforms,
    candidates,
    outputs,
    readers,
    sampling,
    splits,
    tokenization,
)
from components.ranking_datagen import collection as collection_io
from components.ranking_datagen.readers import BadRecord

EXAMPLES_PER_SHARD = 20_000
OUTPUT_KEYS = ("examples", "transform_graph", "vocabulary", "qrels", "first_stage_run", "summary")


def _pipeline_counters(result: beam.runners.runner.PipelineResult) -> dict[str, int]:
    counters: dict[str, int] = {}
    for counter in result.metrics().query()["counters"]:
        if counter.key.metric.namespace == readers.METRICS_NAMESPACE:
            name = counter.key.metric.name
            counters[name] = counters.get(name, 0) + int(counter.committed or counter.attempted)
    return counters


def _write_json(value: Any, path: str) -> None:
    outputs.write_text(path, json.dumps(value))


def _read_json(path: str) -> Any:
    with tf.io.gfile.GFile(path) as f:
        return json.load(f)


class _CollectionPass(NamedTuple):
    num_documents: int
    found_docids: set[str]  # the asked-for docids that are in the corpus
    bad_documents: int
    bad_document_examples: list[BadRecord]
    duplicates: dict[str, list[int]]  # docid -> indexes of the files holding it (>1 file)
    bm25: dict[str, dict[str, float]] | None
    counters: dict[str, int]


class Executor(base_beam_executor.BaseBeamExecutor):
    """Runs RankingDataGen; see the module docstring."""

    def Do(
        self,
        input_dict: dict[str, list[types.Artifact]],
        output_dict: dict[str, list[types.Artifact]],
        exec_properties: dict[str, Any],
    ) -> None:
        out = {name: artifact_utils.get_single_instance(output_dict[name]) for name in OUTPUT_KEYS}
        work_dir = os.path.join(self._get_tmp_dir(), "ranking_datagen")
        try:
            self._run(out, exec_properties, work_dir)
        except BaseException:
            outputs.clear([a.uri for a in out.values()])
            raise
        finally:
            if tf.io.gfile.exists(work_dir):
                tf.io.gfile.rmtree(work_dir)

    # ---------------------------------------------------------------------------------------

    def _run(self, out: dict[str, types.Artifact], props: dict[str, Any], work_dir: str) -> None:
        start = time.time()
        timings: dict[str, float] = {}
        coll = json.loads(props["collection"])
        cfg = json.loads(props["datagen"])
        report = collection_io.BadRecordReport(cfg["on_bad_record"])
        stage = {name: os.path.join(work_dir, "stage", name) for name in OUTPUT_KEYS}
        for path in stage.values():
            tf.io.gfile.makedirs(path)
        vocab_path = os.path.join(stage["vocabulary"], artifacts.VOCAB_FILE)

        # ---- 0. driver inputs: everything small, checked before any Beam work -------------
        vocab_file = cfg["vocab"].get("vocab_file")
        if vocab_file:
            tokenization.read_vocab(vocab_file)  # fails fast, naming the line
            tf.io.gfile.copy(vocab_file, vocab_path, overwrite=True)
        queries = collection_io.read_queries(coll["queries"], coll["queries_format"], report)
        judgments = collection_io.read_qrels(coll["qrels"], coll["qrels_format"], report)
        collection_io.check_qrels(judgments, queries, None, report)
        run = None
        if coll.get("first_stage_run"):
            run = collection_io.read_run(coll["first_stage_run"], report)
        explicit = self._read_explicit_split(cfg["split"], queries, report)
        logging.info("Read %d queries, %d judged queries", len(queries), len(judgments.qrels))
        timings["driver_inputs"] = time.time() - start

        # ---- 1. collection pass -----------------------------------------------------------
        needed = {d for docs in judgments.qrels.values() for d in docs}
        if run is not None:
            needed |= {d for docs in run.scores.values() for d in docs}
        t0 = time.time()
        cp = self._collection_pass(
            coll, cfg, queries, needed, None if vocab_file else vocab_path, run is None, work_dir
        )
        timings["collection_pass"] = time.time() - t0
        logging.info("Collection pass: %d documents in %.1fs", cp.num_documents, time.time() - t0)
        t0 = time.time()
        report.add_counted(readers.DOCUMENTS, cp.bad_documents, cp.bad_document_examples)
        paths = collection_io.expand_paths(coll["documents"])
        for docid, indexes in sorted(cp.duplicates.items()):
            report.add(
                readers.DOCUMENTS,
                BadRecord(
                    paths[indexes[1]],
                    0,
                    f"duplicate docid {docid!r} (also in {paths[indexes[0]]}; the first file's "
                    "copy is kept)",
                ),
            )

        # ---- 2. checks, candidates, splits, sampling (driver) -----------------------------
        docids = cp.found_docids
        collection_io.check_qrels(judgments, queries, docids, report)
        qrels = judgments.qrels
        if run is not None:
            collection_io.check_run(run, docids, report)
            raw_run, run_id = run.scores, "first_stage"
        else:
            raw_run, run_id = cp.bm25 or {}, "bm25"
        ignored_run_qids = sorted(set(raw_run) - set(queries))
        ranked = candidates.rank_run(
            {q: d for q, d in raw_run.items() if q in queries}, cfg["candidates_depth"]
        )
        split_cfg = cfg["split"]
        if explicit is not None:
            split_of = explicit.assignment
        else:
            split_of = {
                qid: splits.kfold_split(
                    qid,
                    split_cfg["num_folds"],
                    split_cfg["dev_fold"],
                    split_cfg["test_fold"],
                    split_cfg["seed"],
                )
                for qid in qrels
            }
        s = cfg["sampling"]
        groups, queries_per_split = sampling.make_groups(
            split_of,
            qrels,
            ranked,
            s["mode"],
            s["samples_per_query"],
            s["negatives_per_positive"],
            s["positive_threshold"],
            s["seed"],
        )
        per_split = {split: 0 for split in splits.SPLITS}
        for g in groups:
            per_split[g.split] += 1
        self._check_empty_splits(per_split, queries_per_split, qrels, coll, cfg, report)
        num_shards = {
            split: cfg["num_shards"] or max(1, math.ceil(n / EXAMPLES_PER_SHARD))
            for split, n in per_split.items()
        }
        logging.info("Groups per split: %s; shards: %s", per_split, num_shards)
        timings["checks_and_sampling"] = time.time() - t0

        # ---- 3. encoding pass -------------------------------------------------------------
        t0 = time.time()
        vocab = tokenization.read_vocab(vocab_path)
        counters = self._encoding_pass(
            coll,
            cfg,
            queries,
            groups,
            cp.duplicates,
            vocab_path,
            vocab,
            num_shards,
            stage,
            work_dir,
        )
        timings["encoding_pass"] = time.time() - t0
        logging.info("Encoding pass done in %.1fs", time.time() - t0)
        outputs.complete_shards(stage["examples"], num_shards)

        # ---- small artifacts, summary, publish ----------------------------------------------
        outputs.write_qrels(os.path.join(stage["qrels"], artifacts.QRELS_FILE), qrels)
        outputs.write_run(
            os.path.join(stage["first_stage_run"], artifacts.RUN_FILE), ranked, run_id
        )
        summary = {
            "collection": coll.get("name"),
            "documents": cp.num_documents,
            "queries": len(queries),
            "judged_queries": len(qrels),
            "judged_pairs": sum(len(v) for v in qrels.values()),
            "queries_per_split": {split: queries_per_split[split] for split in splits.SPLITS},
            "examples_per_split": per_split,
            "shards_per_split": num_shards,
            "judged_queries_without_split": sum(1 for q in qrels if q not in split_of),
            "first_stage": {
                "source": run_id,
                "depth": cfg["candidates_depth"],
                "queries_with_candidates": sum(1 for v in ranked.values() if v),
                "run_qids_without_query": len(ignored_run_qids),
            },
            "vocabulary": {"source": "file" if vocab_file else "learned", "size": len(vocab)},
            "queries_encoded": counters.get("texts_q", 0),
            "documents_encoded": counters.get("texts_d", 0),
            "texts_encoded": counters.get("texts_q", 0) + counters.get("texts_d", 0),
            "truncation_rate_queries": _rate(counters, "truncated_q", "texts_q"),
            "truncation_rate_documents": _rate(counters, "truncated_d", "texts_d"),
            "oov_rate": _rate(counters, "unk_tokens", "tokens"),
            "bad_records": report.to_dict(),
            "beam_counters": dict(sorted({**cp.counters, **counters}.items())),
            "seconds": round(time.time() - start, 1),
            "timings": {k: round(v, 1) for k, v in timings.items()},
        }
        outputs.write_summary(stage["summary"], summary)
        outputs.publish(stage, {name: a.uri for name, a in out.items()})
        out["examples"].split_names = artifact_utils.encode_split_names(list(splits.SPLITS))
        logging.info("RankingDataGen finished in %.1fs: %s", time.time() - start, summary)

    # ---------------------------------------------------------------------------------------

    def _run_pipeline(self, build: Callable[[beam.Pipeline], None]) -> dict[str, int]:
        """Builds and runs one Beam pipeline; a bad record raised in a worker surfaces as a
        plain BadRecordError naming file, line and problem."""
        p = self._make_beam_pipeline()
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

    def _collection_pass(
        self,
        coll: dict,
        cfg: dict,
        queries: dict[str, str],
        needed: set[str],
        learn_vocab_to: str | None,
        need_bm25: bool,
        work_dir: str,
    ) -> _CollectionPass:
        pass_dir = os.path.join(work_dir, "pass1")
        files = {
            name: os.path.join(pass_dir, f"{name}.json")
            for name in ("documents", "found", "bad_count", "bad_examples", "duplicates", "bm25")
        }
        read = collection_io.ReadDocuments(
            coll["documents"],
            coll["documents_format"],
            cfg["on_bad_record"],
            coll["allow_empty_documents"],
        )

        def build(p: beam.Pipeline) -> None:
            docs_and_bad = p | "ReadDocuments" >> read
            docs, bad = docs_and_bad["documents"], docs_and_bad["bad"]
            _ = (
                docs
                | "CountDocuments" >> beam.combiners.Count.Globally()
                | "WriteCount" >> beam.Map(_write_json, files["documents"])
            )
            _ = (
                docs
                | "DocIds" >> beam.Map(lambda d: d[0])
                | "Needed" >> beam.Filter(lambda docid: docid in needed)
                | "FoundDocIds" >> beam.combiners.ToList()
                | "WriteFound" >> beam.Map(lambda ids: _write_json(sorted(ids), files["found"]))
            )
            _ = (
                bad
                | "CountBad" >> beam.combiners.Count.Globally()
                | "WriteBadCount" >> beam.Map(_write_json, files["bad_count"])
            )
            _ = (
                bad
                | "FirstBad" >> beam.combiners.Top.Smallest(collection_io.MAX_EXAMPLES)
                | "WriteBad"
                >> beam.Map(lambda b: _write_json([list(r) for r in b], files["bad_examples"]))
            )
            if len(read.paths) > 1:
                # The readers check duplicates within a file; across files it takes a shuffle.
                _ = (
                    docs
                    | "IdFile" >> beam.Map(lambda d: (d[0], d[2]))
                    | "GroupIds" >> beam.GroupByKey()
                    | "Repeated" >> beam.Filter(lambda kv: len(kv[1]) > 1)
                    | "SortFiles" >> beam.Map(lambda kv: (kv[0], sorted(kv[1])))
                    | "Duplicates" >> beam.combiners.ToDict()
                    | "WriteDuplicates" >> beam.Map(_write_json, files["duplicates"])
                )
            texts = docs | "Texts" >> beam.Map(lambda d: (d[0], d[1]))
            if learn_vocab_to:
                vocab_cfg = cfg["vocab"]
                _ = (
                    (texts, p | "Queries" >> beam.Create(sorted(queries.items())))
                    | "AllTexts" >> beam.Flatten()
                    | "LearnVocab"
                    >> beam_transforms.LearnVocabulary(vocab_cfg["size"], vocab_cfg["lowercase"])
                    | "WriteVocab"
                    >> beam.Map(
                        lambda v: outputs.write_text(learn_vocab_to, "".join(t + "\n" for t in v))
                    )
                )
            if need_bm25:
                bm25_cfg, depth = cfg["bm25"], cfg["candidates_depth"]
                _ = (
                    texts
                    | "AllDocs" >> beam.combiners.ToList()
                    | "BM25"
                    >> beam.Map(
                        lambda d: candidates.bm25_run(
                            sorted(d), queries, depth, bm25_cfg["k1"], bm25_cfg["b"]
                        )
                    )
                    | "WriteBM25" >> beam.Map(_write_json, files["bm25"])
                )

        counters = self._run_pipeline(build)
        duplicates = _read_json(files["duplicates"]) if len(read.paths) > 1 else {}
        return _CollectionPass(
            num_documents=_read_json(files["documents"]),
            found_docids=set(_read_json(files["found"])),
            bad_documents=_read_json(files["bad_count"]),
            bad_document_examples=[BadRecord(*r) for r in _read_json(files["bad_examples"])],
            duplicates=duplicates,
            bm25=_read_json(files["bm25"]) if need_bm25 else None,
            counters=counters,
        )

    def _encoding_pass(
        self,
        coll: dict,
        cfg: dict,
        queries: dict[str, str],
        groups: list[sampling.Group],
        duplicates: dict[str, list[int]],
        vocab_path: str,
        vocab: list[str],
        num_shards: dict[str, int],
        stage: dict[str, str],
        work_dir: str,
    ) -> dict[str, int]:
        # Only the texts the examples use are encoded: on a large corpus with few queries that
        # is a small part of it.
        wanted_docs = {d for g in groups for d in g.docids}
        query_texts = sorted({("q:" + g.qid, queries[g.qid]) for g in groups})
        keep_file = {docid: indexes[0] for docid, indexes in duplicates.items()}
        # Bad records were handled in pass 1 (a fail policy would have stopped there).
        read = collection_io.ReadDocuments(
            coll["documents"],
            coll["documents_format"],
            "skip",
            coll["allow_empty_documents"],
            spread=False,
        )
        max_q, max_d = cfg["max_query_length"], cfg["max_doc_length"]

        def build(p: beam.Pipeline) -> None:
            docs = (p | "ReadDocuments" >> read)["documents"]
            texts = (
                docs
                | "Referenced"
                >> beam.Filter(lambda d: d[0] in wanted_docs and keep_file.get(d[0], d[2]) == d[2])
                | "Spread" >> beam.Reshuffle()
                | "KeyDocs" >> beam.Map(lambda d: ("d:" + d[0], d[1])),
                p | "Queries" >> beam.Create(query_texts),
            ) | "AllTexts" >> beam.Flatten()
            tokens = (
                texts
                | "Tokenize"
                >> beam_transforms.TokenizeWithTransform(
                    vocab_path,
                    cfg["vocab"]["lowercase"],
                    stage["transform_graph"],
                    os.path.join(work_dir, "tft"),
                )
                | "CountTokens" >> beam.ParDo(beam_transforms.CountTokens(max_q, max_d))
            )
            _ = (
                p | "Groups" >> beam.Create(groups),
                tokens,
            ) | "WriteExamples" >> beam_transforms.WriteExamples(
                stage["examples"],
                num_shards,
                cfg["shuffle_seed"],
                max_q,
                max_d,
                tokenization.unk_id(vocab),
            )

        return self._run_pipeline(build)

    # ---------------------------------------------------------------------------------------

    @staticmethod
    def _read_explicit_split(
        split_cfg: dict, queries: dict[str, str], report: collection_io.BadRecordReport
    ) -> splits.ExplicitSplit | None:
        if split_cfg["method"] != "explicit":
            return None
        explicit = splits.explicit_split(
            split_cfg["train_qids"], split_cfg["dev_qids"], split_cfg["test_qids"]
        )
        for bad in explicit.bad:
            report.add(collection_io.SPLITS_KIND, bad)
        for qid, (path, line) in sorted(explicit.where.items(), key=lambda kv: kv[1]):
            if qid not in queries:
                report.add(
                    collection_io.SPLITS_KIND, BadRecord(path, line, f"qid {qid!r} has no query")
                )
                del explicit.assignment[qid]
        return explicit

    @staticmethod
    def _check_empty_splits(
        per_split: dict[str, int],
        queries_per_split: dict[str, int],
        qrels: dict[str, dict[str, int]],
        coll: dict,
        cfg: dict,
        report: collection_io.BadRecordReport,
    ) -> None:
        """An empty split stops the run (fail) or is reported and written empty (skip)."""
        split_cfg = cfg["split"]
        for split in splits.SPLITS:
            if per_split[split]:
                continue
            n = queries_per_split.get(split, 0)
            if split_cfg["method"] == "explicit":
                where = split_cfg[f"{split}_qids"]
                if not n:
                    why = "none of its listed qids is a judged query with a query text"
            else:
                where = coll["qrels"]
                if not n:
                    fold = split_cfg[f"{split}_fold"] if split != "train" else "other"
                    why = (
                        f"none of the {len(qrels)} judged queries hashes to its fold ({fold}; "
                        f"datagen.split num_folds={split_cfg['num_folds']} "
                        f"seed={split_cfg['seed']})"
                    )
            if n and split == "train":
                why = (
                    f"its {n} queries have no judged document with relevance >= "
                    f"{cfg['sampling']['positive_threshold']} and a lower-judged candidate"
                )
            elif n:
                why = f"its {n} queries have no first-stage candidates"
            report.add(
                collection_io.SPLITS_KIND, BadRecord(where, 0, f"split {split!r} is empty: {why}")
            )


def _rate(counters: dict[str, int], part: str, whole: str) -> float:
    return counters.get(part, 0) / max(1, counters.get(whole, 0))
