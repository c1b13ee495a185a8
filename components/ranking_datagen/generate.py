"""RankingDataGen's work: raw collection -> vocabulary, TransformGraph, sharded examples, written
to a staging directory (executor.py marshals the artifacts and publishes them).

Steps (two Beam pipelines, both built with `beam_pipeline_args`: DirectRunner, Dataflow, Flink
or Spark alike):
  0. driver (planner.read_inputs): read queries, qrels, the first-stage run and explicit split
     lists (small next to the documents), check the given vocabulary; bad records fail or are
     counted right away;
  1. collection pass (Beam, passes.collection_pass): read and count the documents, find which
     judged/run docids exist, learn the WordPiece vocabulary from word counts (unless
     `vocab_file` is given), without a first-stage run compute BM25 candidates (sharded:
     candidates.py) and with `datagen.hybrid` the dense candidates (dense_retrieval.py: the
     documents' vectors from the corpus-vectors artifact when one is given);
  2. driver (planner.plan): drop judgments/run entries that point nowhere, rank candidates,
     assign splits (or cross-validation folds) and sample the groups (sampling needs all of a
     query's judgments and candidates together);
  3. encoding pass (Beam, passes.encoding_pass): tf.Transform tokenizes the queries and
     documents the groups refer to in batches and writes the TransformGraph; groups are joined
     with token ids and written as shuffled, sharded gzip TFRecords;
  4. the small artifacts (qrels with each split's judged queries and those without a candidate,
     first-stage run) and the summary.
Everything is written under a staging directory, which the executor moves into the artifacts
at the end; a failure clears the artifact directories, so a failed run leaves nothing a later
component could read.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from typing import Any, NamedTuple

import apache_beam as beam
import tensorflow as tf

from components import artifacts, beam_mode
from components.ranking_datagen import collection as collection_io
from components.ranking_datagen import dense, outputs, passes, planner, readers, tokenization
from components.ranking_datagen.config import CollectionConfig, DatagenConfig
from rankcore import folds, lineage

OUTPUT_KEYS = ("examples", "transform_graph", "vocabulary", "qrels", "first_stage_run", "summary")


class Generated(NamedTuple):
    stage: dict[str, str]  # output key -> its staged directory, complete
    summary: dict[str, Any]  # summary.json's content
    split_names: list[str]  # the examples' splits, in order


def generate(
    coll: CollectionConfig,
    cfg: DatagenConfig,
    num_folds: int,
    work_dir: str,
    pipeline_for: Callable[[int], Callable[[], beam.Pipeline]],
    corpus_vectors: str | None = None,
) -> Generated:
    """Runs steps 0-4 (module docstring) with every output staged under `work_dir`.
    `pipeline_for(input bytes)`: what the Beam pipelines are made with, asked after step 0.
    `corpus_vectors`: the URI of a corpus-vectors artifact, read by dense hybrid retrieval
    (ignored without `datagen.hybrid.checkpoint_dir`)."""
    start = time.time()
    timings: dict[str, float] = {}
    report = collection_io.BadRecordReport(cfg.on_bad_record)
    stage = {name: os.path.join(work_dir, "stage", name) for name in OUTPUT_KEYS}
    for path in stage.values():
        tf.io.gfile.makedirs(path)
    vocab_path = os.path.join(stage["vocabulary"], artifacts.VOCAB_FILE)

    # ---- 0. driver inputs: everything small, checked before any Beam work -------------
    inputs = planner.read_inputs(coll, cfg, report, vocab_path)
    stored_vectors = None
    if corpus_vectors and cfg.hybrid.checkpoint_dir:
        stored_vectors = dense.stored_vectors_pattern(
            corpus_vectors, cfg.hybrid.checkpoint_dir, cfg.max_doc_length
        )
    timings["driver_inputs"] = time.time() - start
    # A small collection runs both Beam passes in process: no worker start-up
    # (components/beam_mode.py; the same bytes on every runner and mode).
    make_pipeline = pipeline_for(beam_mode.input_bytes([coll.documents]))

    # ---- 1. collection pass -----------------------------------------------------------
    t0 = time.time()
    cp = passes.collection_pass(
        make_pipeline,
        coll,
        cfg,
        inputs.queries,
        planner.needed_docids(inputs),
        None if inputs.vocab_file else vocab_path,
        inputs.run is None,
        work_dir,
        stored_vectors,
    )
    timings["collection_pass"] = time.time() - t0
    logging.info("Collection pass: %d documents in %.1fs", cp.num_documents, time.time() - t0)
    if not cp.num_documents:  # said as it is, not as every judged docid missing
        raise readers.EmptyInputError(planner.no_documents(coll, cp))

    # ---- 2. checks, candidates, splits, sampling (driver) -----------------------------
    t0 = time.time()
    plan = planner.plan(coll, cfg, inputs, cp, report, num_folds)
    timings["checks_and_sampling"] = time.time() - t0
    logging.info("Groups per split: %s; shards: %s", plan.per_split, plan.num_shards)

    # ---- 3. encoding pass -------------------------------------------------------------
    t0 = time.time()
    vocab = tokenization.read_vocab(vocab_path)
    counters = _encode(make_pipeline, cfg, inputs, cp, plan, vocab_path, vocab, stage, work_dir)
    timings["encoding_pass"] = time.time() - t0

    # ---- 4. small artifacts and the summary -------------------------------------------
    outputs.write_qrels(os.path.join(stage["qrels"], artifacts.QRELS_FILE), inputs.judgments.qrels)
    outputs.write_run(
        os.path.join(stage["first_stage_run"], artifacts.RUN_FILE), plan.ranked, plan.run_id
    )
    summary = _summary(coll, cfg, inputs, cp, plan, counters, len(vocab), report)
    summary["judged_queries_without_candidates_per_split"] = _split_queries(
        stage["qrels"], plan, inputs.judgments.qrels
    )
    summary["seconds"] = round(time.time() - start, 1)
    summary["timings"] = {k: round(v, 1) for k, v in timings.items()}
    summary[lineage.RECORD_KEY] = _lineage_record(cfg, inputs, summary["documents"], vocab_path)
    outputs.write_summary(stage["summary"], summary)
    return Generated(stage, summary, list(plan.per_split))


def _split_queries(
    qrels_dir: str, plan: planner.Plan, qrels: dict[str, dict[str, int]]
) -> dict[str, int]:
    """Writes each split's judged queries and those without a first-stage candidate beside
    qrels.txt (planner.split_queries), where the evaluator reads them: such a query has no
    example, and is scored 0 by every system (as trec_eval -c counts it) instead of never
    seen. Writes each split's judgments there too (rankcore/folds.py split_qrels_file), which
    a Trainer reads for its dev splits. Returns how many had none per split, for the summary."""
    record = planner.split_queries(plan, qrels)
    outputs.write_split_queries(qrels_dir, record)
    for split, qids in planner.split_members(plan, qrels).items():
        outputs.write_qrels(
            os.path.join(qrels_dir, folds.split_qrels_file(split)), {q: qrels[q] for q in qids}
        )
    return {split: len(entry[folds.WITHOUT_CANDIDATES]) for split, entry in record.items()}


def _encode(
    make_pipeline: Callable[[], beam.Pipeline],
    cfg: DatagenConfig,
    inputs: planner.Inputs,
    cp: passes.CollectionPass,
    plan: planner.Plan,
    vocab_path: str,
    vocab: list[str],
    stage: dict[str, str],
    work_dir: str,
) -> dict[str, int]:
    """Pass 2 over the plan's groups, every split's shards checked complete; returns its
    counters."""
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
    return counters


def _summary(
    coll: CollectionConfig,
    cfg: DatagenConfig,
    inputs: planner.Inputs,
    cp: passes.CollectionPass,
    plan: planner.Plan,
    counters: dict[str, int],
    vocab_size: int,
    report: collection_io.BadRecordReport,
) -> dict[str, Any]:
    """summary.json up to its `beam_counters` (the caller adds `seconds` and `timings`)."""
    qrels = inputs.judgments.qrels
    return {
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
            "size": vocab_size,
        },
        "queries_encoded": counters.get("texts_q", 0),
        "documents_encoded": counters.get("texts_d", 0),
        "texts_encoded": counters.get("texts_q", 0) + counters.get("texts_d", 0),
        "truncation_rate_queries": _rate(counters, "truncated_q", "texts_q"),
        "truncation_rate_documents": _rate(counters, "truncated_d", "texts_d"),
        "oov_rate": _rate(counters, "unk_tokens", "tokens"),
        "bad_records": report.to_dict(),
        "beam_counters": dict(sorted({**cp.counters, **counters}.items())),
    }


def _lineage_record(
    cfg: DatagenConfig, inputs: planner.Inputs, documents: int, vocab_path: str
) -> dict[str, Any]:
    """What a model trained on these examples reads: a served model is compared with it only
    when they match (rankcore/lineage.py; the pushed model's card carries this summary)."""
    with tf.io.gfile.GFile(vocab_path) as f:
        vocabulary = lineage.vocabulary_fingerprint(f)
    return lineage.fingerprints(
        lineage.collection_fingerprint(inputs.queries, inputs.judgments.qrels, documents),
        vocabulary,
        {
            "lowercase": cfg.vocab.lowercase,
            "max_query_length": cfg.max_query_length,
            "max_doc_length": cfg.max_doc_length,
        },
    )


def _cross_validation_summary(plan: planner.Plan, cfg: DatagenConfig) -> dict[str, Any]:
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
