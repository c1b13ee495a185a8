"""RankingDataGen executor: raw collection -> vocabulary, TransformGraph, sharded examples.

Steps (two Beam pipelines, both built with `beam_pipeline_args`: DirectRunner, Dataflow, Flink
or Spark alike):
  0. driver: read queries, qrels, the first-stage run and explicit split lists (small next to
     the documents), check the given vocabulary; bad records fail or are counted right away;
  1. collection pass (Beam): read and count the documents, find which judged/run docids exist,
     learn the WordPiece vocabulary from word counts (unless `vocab_file` is given) and, without
     a first-stage run, compute BM25 candidates (sharded: candidates.py);
  2. driver: drop judgments/run entries that point nowhere, rank candidates, assign splits and
     sample the groups (sampling needs all of a query's judgments and candidates together);
  3. encoding pass (Beam): tf.Transform tokenizes the queries and documents the groups refer to
     in batches and writes the TransformGraph; groups are joined with token ids and written as
     shuffled, sharded gzip TFRecords.
With `cross_validation_folds` = k > 0 (the pipeline's `evaluator.cross_validation.folds`) the
splits are rankcore/folds.py's 2k `fold<f>_train` / `fold<f>_eval` instead of train/dev/test:
every judged query is sampled for training AND ranked in full, in the fold `datagen.split`'s
kfold hash gives it, so each fold branch downstream can train on some folds and rank another.
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
from typing import Any, NamedTuple

import tensorflow as tf
from tfx import types
from tfx.dsl.components.base import base_beam_executor
from tfx.types import artifact_utils

from components import artifacts, beam_mode, worker_dirs
from components.executor_types import Artifacts
from components.executor_types import ExecProperties as Props
from components.ranking_datagen import (
    candidates,
    dense,
    outputs,
    passes,
    readers,
    sampling,
    splits,
    tokenization,
)
from components.ranking_datagen import collection as collection_io
from components.ranking_datagen.config import (
    CROSS_VALIDATION_FOLDS,
    CollectionConfig,
    DatagenConfig,
    cross_validation_folds,
)
from components.ranking_datagen.readers import BadRecord, sniff
from rankcore import folds, lineage

EXAMPLES_PER_SHARD = 20_000
OUTPUT_KEYS = ("examples", "transform_graph", "vocabulary", "qrels", "first_stage_run", "summary")


class Executor(base_beam_executor.BaseBeamExecutor):
    """Runs RankingDataGen; see the module docstring."""

    def Do(self, input_dict: Artifacts, output_dict: Artifacts, exec_properties: Props) -> None:
        out = {name: artifact_utils.get_single_instance(output_dict[name]) for name in OUTPUT_KEYS}
        # What the workers open: the documents and the work directory (pickles, pass 1's texts,
        # the staged artifacts). The executor's temp dir on the DirectRunner; on a runner whose
        # workers may be elsewhere, object-store URIs or an error naming the setting, before
        # any work (components/worker_dirs.py).
        documents = CollectionConfig.from_dict(json.loads(exec_properties["collection"])).documents
        work_dir = worker_dirs.work_dir(
            self, "ranking_datagen", "RankingDataGen", {"collection.documents": documents}
        )
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
        coll = CollectionConfig.from_dict(json.loads(props["collection"]))
        cfg = DatagenConfig.from_dict(json.loads(props["datagen"]))
        num_folds = cross_validation_folds(props.get(CROSS_VALIDATION_FOLDS) or 0, cfg.split)
        report = collection_io.BadRecordReport(cfg.on_bad_record)
        stage = {name: os.path.join(work_dir, "stage", name) for name in OUTPUT_KEYS}
        for path in stage.values():
            tf.io.gfile.makedirs(path)
        vocab_path = os.path.join(stage["vocabulary"], artifacts.VOCAB_FILE)

        # ---- 0. driver inputs: everything small, checked before any Beam work -------------
        inputs = self._read_inputs(coll, cfg, report, vocab_path)
        timings["driver_inputs"] = time.time() - start
        # A small collection runs both Beam passes in process: no worker start-up
        # (components/beam_mode.py; the same bytes on every runner and mode).
        size = beam_mode.input_bytes([coll.documents])
        make_pipeline = beam_mode.pipeline_maker(self, size, "RankingDataGen")

        # ---- 1. collection pass -----------------------------------------------------------
        t0 = time.time()
        needed = {d for docs in inputs.judgments.qrels.values() for d in docs}
        if inputs.run is not None:
            needed |= {d for docs in inputs.run.scores.values() for d in docs}
        cp = passes.collection_pass(
            make_pipeline,
            coll,
            cfg,
            inputs.queries,
            needed,
            None if inputs.vocab_file else vocab_path,
            inputs.run is None,
            work_dir,
        )
        timings["collection_pass"] = time.time() - t0
        logging.info("Collection pass: %d documents in %.1fs", cp.num_documents, time.time() - t0)
        if not cp.num_documents:  # said as it is, not as every judged docid missing
            raise readers.EmptyInputError(self._no_documents(coll, cp))

        # ---- 2. checks, candidates, splits, sampling (driver) -----------------------------
        t0 = time.time()
        plan = self._plan(coll, cfg, inputs, cp, report, num_folds)
        timings["checks_and_sampling"] = time.time() - t0
        logging.info("Groups per split: %s; shards: %s", plan.per_split, plan.num_shards)

        # ---- 3. encoding pass -------------------------------------------------------------
        t0 = time.time()
        vocab = tokenization.read_vocab(vocab_path)
        counters = passes.encoding_pass(
            make_pipeline,
            cfg,
            inputs.queries,
            plan.groups,
            cp.text_files,
            cp.duplicates,
            vocab_path,
            vocab,
            plan.num_shards,
            stage,
            work_dir,
        )
        outputs.complete_shards(stage["examples"], plan.num_shards)
        timings["encoding_pass"] = time.time() - t0

        # ---- small artifacts, summary, publish --------------------------------------------
        qrels = inputs.judgments.qrels
        outputs.write_qrels(os.path.join(stage["qrels"], artifacts.QRELS_FILE), qrels)
        outputs.write_run(
            os.path.join(stage["first_stage_run"], artifacts.RUN_FILE), plan.ranked, plan.run_id
        )
        summary = {
            "collection": coll.name,
            # Distinct documents: the extra copies of a duplicated docid are bad records.
            "documents": cp.num_documents - sum(len(v) - 1 for v in cp.duplicates.values()),
            "queries": len(inputs.queries),
            "judged_queries": len(qrels),
            "judged_pairs": sum(len(v) for v in qrels.values()),
            "queries_per_split": plan.queries_per_split,
            "positive_threshold": plan.positive_threshold,
            "examples_per_split": plan.per_split,
            "shards_per_split": plan.num_shards,
            "judged_queries_without_split": sum(1 for q in qrels if q not in plan.split_of),
            **_cross_validation_summary(plan, cfg),
            "first_stage": {
                "source": plan.run_id,
                "depth": cfg.candidates_depth,
                "queries_with_candidates": sum(1 for v in plan.ranked.values() if v),
                "run_qids_without_query": plan.run_qids_without_query,
            },
            **({"hybrid": plan.hybrid} if plan.hybrid else {}),
            "vocabulary": {
                "source": "file" if inputs.vocab_file else "learned",
                "size": len(vocab),
            },
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
        # What a model trained on these examples reads: a served model is compared with it only
        # when they match (rankcore/lineage.py; the pushed model's card carries this summary).
        with tf.io.gfile.GFile(vocab_path) as f:
            vocabulary = lineage.vocabulary_fingerprint(f)
        summary[lineage.RECORD_KEY] = lineage.fingerprints(
            lineage.collection_fingerprint(inputs.queries, qrels, summary["documents"]),
            vocabulary,
            {
                "lowercase": cfg.vocab.lowercase,
                "max_query_length": cfg.max_query_length,
                "max_doc_length": cfg.max_doc_length,
            },
        )
        out["examples"].set_string_custom_property(
            lineage.RECORD_KEY, json.dumps(summary[lineage.RECORD_KEY], sort_keys=True)
        )
        outputs.write_summary(stage["summary"], summary)
        outputs.publish(stage, {name: a.uri for name, a in out.items()})
        out["examples"].split_names = artifact_utils.encode_split_names(list(plan.per_split))
        logging.info("RankingDataGen finished in %.1fs: %s", time.time() - start, summary)

    # ---------------------------------------------------------------------------------------

    @staticmethod
    def _no_documents(coll: CollectionConfig, cp: passes.CollectionPass) -> str:
        """Why the collection pass read no document: empty files (or the wrong block format,
        readers/sniff.py), or every one a bad record skipped."""
        if cp.bad_documents:
            first = cp.bad_document_examples[0] if cp.bad_document_examples else None
            return (
                f"{coll.documents}: every one of its {cp.bad_documents} documents records is "
                f"bad (skipped under datagen.on_bad_record: skip; the first: {first}) "
                f"(collection.documents, read as {coll.documents_format})"
            )
        paths = collection_io.expand_paths(coll.documents)
        return sniff.no_records_message(paths, readers.DOCUMENTS, coll.documents_format)

    @staticmethod
    def _read_inputs(
        coll: CollectionConfig,
        cfg: DatagenConfig,
        report: collection_io.BadRecordReport,
        vocab_path: str,
    ) -> _Inputs:
        vocab_file = cfg.vocab.vocab_file
        if vocab_file:
            tokenization.read_vocab(vocab_file)  # fails fast, naming the line
            tf.io.gfile.copy(vocab_file, vocab_path, overwrite=True)
        queries = collection_io.read_queries(coll.queries, coll.queries_format, report)
        judgments = collection_io.read_qrels(coll.qrels, coll.qrels_format, report)
        collection_io.check_qrels(judgments, queries, None, report)
        run = None
        if coll.first_stage_run:
            run = collection_io.read_run(coll.first_stage_run, report)
        explicit = None
        split_cfg = cfg.split
        if split_cfg.method == "explicit":
            explicit = splits.explicit_split(
                split_cfg.train_qids, split_cfg.dev_qids, split_cfg.test_qids
            )
        elif split_cfg.method == "qrels_files":
            explicit = splits.qrels_file_split_of(split_cfg, coll.qrels_format)
        if explicit is not None:
            for bad in explicit.bad:
                report.add(collection_io.SPLITS_KIND, bad)
            for qid, (path, line) in sorted(explicit.where.items(), key=lambda kv: kv[1]):
                if qid not in queries:
                    problem = f"qid {qid!r} has no query"
                    report.add(collection_io.SPLITS_KIND, BadRecord(path, line, problem))
                    del explicit.assignment[qid]
        logging.info("Read %d queries, %d judged queries", len(queries), len(judgments.qrels))
        return _Inputs(queries, judgments, run, explicit, vocab_file)

    @classmethod
    def _plan(
        cls,
        coll: CollectionConfig,
        cfg: DatagenConfig,
        inputs: _Inputs,
        cp: passes.CollectionPass,
        report: collection_io.BadRecordReport,
        num_folds: int = 0,
    ) -> _Plan:
        """Collection-level checks, then candidates, splits and the sampled groups (the 2k
        fold splits when `num_folds` = k > 0, train/dev/test otherwise)."""
        report.add_counted(readers.DOCUMENTS, cp.bad_documents, cp.bad_document_examples)
        paths = collection_io.expand_paths(coll.documents)
        for docid, copies in sorted(cp.duplicates.items()):
            (first_file, first_line), *others = copies
            for file_index, line in others:
                problem = (
                    f"duplicate docid {docid!r} (first seen at {paths[first_file]}:{first_line};"
                    " that copy is kept)"
                )
                report.add(readers.DOCUMENTS, BadRecord(paths[file_index], line, problem))
        collection_io.check_qrels(inputs.judgments, inputs.queries, cp.found_docids, report)
        qrels = inputs.judgments.qrels
        if inputs.run is not None:
            collection_io.check_run(inputs.run, cp.found_docids, report)
            raw_run, run_id = inputs.run.scores, "first_stage"
        else:
            raw_run, run_id = cp.bm25 or {}, "bm25"
        # A run may cover more topics than the queries file: those are left out, and counted.
        ranked = candidates.rank_run(
            {q: d for q, d in raw_run.items() if q in inputs.queries}, cfg.candidates_depth
        )
        hybrid = None
        if cp.dense is not None:
            ranked, hybrid = dense.hybrid_candidates(
                ranked, cp.dense, inputs.judgments.qrels, cfg.hybrid.depth
            )
            logging.info("Hybrid candidates: %s", hybrid)
        split_cfg = cfg.split
        fold_of: dict[str, int] | None = None
        if num_folds:
            fold_of = {q: splits.fold_of(q, num_folds, split_cfg.seed) for q in sorted(qrels)}
            # Every judged query trains in some fold: all their grades set the threshold.
            split_of = dict.fromkeys(qrels, "train")
        elif inputs.explicit is not None:
            split_of = inputs.explicit.assignment
        else:
            split_of = splits.kfold_assignment(
                qrels, split_cfg.num_folds, split_cfg.dev_fold, split_cfg.test_fold, split_cfg.seed
            )
        s = cfg.sampling
        try:
            threshold = sampling.resolve_positive_threshold(
                s.positive_threshold, sampling.train_grades(split_of, qrels)
            )
        except sampling.ThresholdError as e:
            raise ValueError(f"datagen.sampling.positive_threshold: {e}") from None
        logging.info("Positive threshold: %d (configured: %s)", threshold, s.positive_threshold)
        groups, queries_per_split = sampling.make_groups(
            sampling.by_fold(fold_of, qrels)
            if fold_of is not None
            else sampling.by_split(split_of, qrels),
            qrels,
            ranked,
            s.mode,
            s.samples_per_query,
            s.negatives_per_positive,
            threshold,
            s.seed,
        )
        split_names = folds.split_names(num_folds) if num_folds else list(splits.SPLITS)
        fold_of_split = {
            folds.split_name(f, role): f
            for f in range(num_folds)
            for role in (folds.TRAIN, folds.EVAL)
        }
        per_split = {split: 0 for split in split_names}
        for g in groups:
            per_split[g.split] += 1
        queries_per_split = {split: queries_per_split[split] for split in split_names}
        for split in split_names:
            if not per_split[split]:
                report.add(
                    collection_io.SPLITS_KIND,
                    cls._empty_split(
                        split,
                        queries_per_split[split],
                        len(qrels),
                        coll,
                        cfg,
                        threshold,
                        fold_of_split.get(split),
                    ),
                )
        num_shards = {
            split: cfg.num_shards or max(1, math.ceil(n / EXAMPLES_PER_SHARD))
            for split, n in per_split.items()
        }
        return _Plan(
            ranked=ranked,
            run_id=run_id,
            run_qids_without_query=len(set(raw_run) - set(inputs.queries)),
            split_of=split_of,
            fold_of=fold_of,
            groups=groups,
            queries_per_split=queries_per_split,
            per_split=per_split,
            num_shards=num_shards,
            positive_threshold=threshold,
            hybrid=hybrid,
        )

    @staticmethod
    def _empty_split(
        split: str,
        n_queries: int,
        n_judged: int,
        coll: CollectionConfig,
        cfg: DatagenConfig,
        threshold: int,
        fold: int | None = None,
    ) -> BadRecord:
        """An empty split, as a bad record naming where its queries come from and why. `fold`:
        the fold of a cross-validation split (None for train/dev/test)."""
        split_cfg = cfg.split
        is_train = split == "train" or (
            fold is not None and split == folds.split_name(fold, folds.TRAIN)
        )
        if fold is not None:
            where = coll.qrels
            why = (
                f"none of the {n_judged} judged queries hashes to fold {fold} (datagen.split "
                f"num_folds={split_cfg.num_folds} seed={split_cfg.seed})"
            )
        elif split_cfg.method == "explicit":
            where = getattr(split_cfg, f"{split}_qids")
            why = "none of its listed qids is a judged query with a query text"
        elif split_cfg.method == "qrels_files":
            where = getattr(split_cfg, f"{split}_qrels") or split_cfg.train_qrels
            why = "none of the queries its judgment file judges has a query text"
        else:
            where = coll.qrels
            hashed_to = (
                f"fold {getattr(split_cfg, f'{split}_fold')}"
                if split != "train"
                else "the train folds"
            )
            why = (
                f"none of the {n_judged} judged queries hashes to {hashed_to} (datagen.split "
                f"num_folds={split_cfg.num_folds} seed={split_cfg.seed})"
            )
        if n_queries and is_train:
            why = (
                f"its {n_queries} queries have no judged document with relevance >= "
                f"{threshold} and a lower-judged candidate"
            )
        elif n_queries:
            why = f"its {n_queries} queries have no first-stage candidates"
        return BadRecord(where, 0, f"split {split!r} is empty: {why}")


class _Inputs(NamedTuple):
    queries: dict[str, str]
    judgments: collection_io.Judgments
    run: collection_io.Run | None
    explicit: splits.ExplicitSplit | None
    vocab_file: str | None


class _Plan(NamedTuple):
    ranked: dict[str, list[tuple[str, float, int]]]  # qid -> candidates (docid, score, rank)
    run_id: str
    run_qids_without_query: int
    # qid -> train/dev/test; with cross-validation every judged query is "train" (it trains in
    # every fold branch but the one that ranks it) and `fold_of` holds its fold.
    split_of: dict[str, str]
    fold_of: dict[str, int] | None
    groups: list[sampling.Group]
    queries_per_split: dict[str, int]
    per_split: dict[str, int]  # groups (= examples) per split
    num_shards: dict[str, int]
    positive_threshold: int  # datagen.sampling.positive_threshold, `auto` resolved
    hybrid: dict[str, int] | None  # datagen.hybrid on: the union's counts for the summary


def _cross_validation_summary(plan: _Plan, cfg: DatagenConfig) -> dict[str, Any]:
    """The summary's `cross_validation` entry (none without cross-validation)."""
    if plan.fold_of is None:
        return {}
    num_folds = cfg.split.num_folds
    per_fold = [0] * num_folds
    for fold in plan.fold_of.values():
        per_fold[fold] += 1
    return {
        "cross_validation": {
            "folds": num_folds,
            "seed": cfg.split.seed,
            "queries_per_fold": per_fold,
            "fold_of": dict(sorted(plan.fold_of.items())),
        }
    }


def _rate(counters: dict[str, int], part: str, whole: str) -> float:
    return counters.get(part, 0) / max(1, counters.get(whole, 0))
