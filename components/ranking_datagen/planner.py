"""RankingDataGen's driver steps around the collection pass (generate.py runs them in order).

Step 0, `read_inputs`: the queries, qrels, the first-stage run and explicit split lists (small
next to the documents) are read and checked before any Beam work, and a given vocabulary is
checked; bad records fail or are counted right away.
Step 2, `plan`: with pass 1's findings, judgments and run entries that point nowhere are
reported, candidates ranked, splits assigned and the groups sampled (sampling needs all of a
query's judgments and candidates together). With `num_folds` = k > 0 (the pipeline's
`evaluator.cross_validation.folds`) the splits are rankcore/folds.py's 2k `fold<f>_train` /
`fold<f>_eval` instead of train/dev/test: every judged query is sampled for training AND
ranked in full, in the fold `datagen.split`'s kfold hash gives it, so each fold branch
downstream can train on some folds and rank another.
"""

from __future__ import annotations

import logging
import math
from typing import NamedTuple

import tensorflow as tf

from components.ranking_datagen import (
    candidates,
    dense,
    passes,
    readers,
    sampling,
    splits,
    tokenization,
)
from components.ranking_datagen import collection as collection_io
from components.ranking_datagen.config import CollectionConfig, DatagenConfig
from components.ranking_datagen.readers import BadRecord, sniff
from rankcore import folds

EXAMPLES_PER_SHARD = 20_000

Ranked = dict[str, list[tuple[str, float, int]]]  # qid -> candidates (docid, score, rank)


class Inputs(NamedTuple):
    queries: dict[str, str]
    judgments: collection_io.Judgments
    run: collection_io.Run | None
    explicit: splits.ExplicitSplit | None
    vocab_file: str | None


class Plan(NamedTuple):
    ranked: Ranked
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


# ------------------------------------------------------------------------------------------
# Step 0: the driver's inputs
# ------------------------------------------------------------------------------------------


def read_inputs(
    coll: CollectionConfig,
    cfg: DatagenConfig,
    report: collection_io.BadRecordReport,
    vocab_path: str,
) -> Inputs:
    """Everything small, checked before any Beam work; a given vocabulary is checked and
    copied to `vocab_path`."""
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
    explicit = _explicit_split(coll, cfg, queries, report)
    logging.info("Read %d queries, %d judged queries", len(queries), len(judgments.qrels))
    return Inputs(queries, judgments, run, explicit, vocab_file)


def _explicit_split(
    coll: CollectionConfig,
    cfg: DatagenConfig,
    queries: dict[str, str],
    report: collection_io.BadRecordReport,
) -> splits.ExplicitSplit | None:
    """The split lists (`explicit`) or judgment files (`qrels_files`) of `datagen.split`, their
    listed qids without a query dropped as bad records; None for the kfold hash."""
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
    return explicit


def needed_docids(inputs: Inputs) -> set[str]:
    """The docids the judgments and the first-stage run name: pass 1 looks for them."""
    needed = {d for docs in inputs.judgments.qrels.values() for d in docs}
    if inputs.run is not None:
        needed |= {d for docs in inputs.run.scores.values() for d in docs}
    return needed


def no_documents(coll: CollectionConfig, cp: passes.CollectionPass) -> str:
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


# ------------------------------------------------------------------------------------------
# Step 2: checks, candidates, splits, sampling
# ------------------------------------------------------------------------------------------


def plan(
    coll: CollectionConfig,
    cfg: DatagenConfig,
    inputs: Inputs,
    cp: passes.CollectionPass,
    report: collection_io.BadRecordReport,
    num_folds: int = 0,
) -> Plan:
    """Collection-level checks, then candidates, splits and the sampled groups (the 2k
    fold splits when `num_folds` = k > 0, train/dev/test otherwise)."""
    report_collection(coll, inputs, cp, report)
    qrels = inputs.judgments.qrels
    raw_run, run_id = first_stage_run(inputs, cp, report)
    # A run may cover more topics than the queries file: those are left out, and counted.
    ranked = candidates.rank_run(
        {q: d for q, d in raw_run.items() if q in inputs.queries}, cfg.candidates_depth
    )
    hybrid = None
    if cp.dense is not None:
        ranked, hybrid = dense.hybrid_candidates(ranked, cp.dense, qrels, cfg.hybrid.depth)
        hybrid.update(cp.dense_sources or {})  # with corpus vectors: stored / embedded
        logging.info("Hybrid candidates: %s", hybrid)
    split_of, fold_of = assign_splits(cfg, qrels, inputs.explicit, num_folds)
    threshold = positive_threshold(cfg, split_of, qrels)
    split_names = folds.split_names(num_folds) if num_folds else list(splits.SPLITS)
    groups, queries_per_split, per_split = sample(
        cfg, qrels, ranked, split_of, fold_of, threshold, split_names
    )
    report_empty_splits(
        coll, cfg, report, per_split, queries_per_split, len(qrels), threshold, num_folds
    )
    return Plan(
        ranked=ranked,
        run_id=run_id,
        run_qids_without_query=len(set(raw_run) - set(inputs.queries)),
        split_of=split_of,
        fold_of=fold_of,
        groups=groups,
        queries_per_split=queries_per_split,
        per_split=per_split,
        num_shards=num_shards(cfg, per_split),
        positive_threshold=threshold,
        hybrid=hybrid,
    )


def report_collection(
    coll: CollectionConfig,
    inputs: Inputs,
    cp: passes.CollectionPass,
    report: collection_io.BadRecordReport,
) -> None:
    """Pass 1's bad documents and docids seen in two files, then the judgments whose document
    the collection lacks, into `report`."""
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


def first_stage_run(
    inputs: Inputs, cp: passes.CollectionPass, report: collection_io.BadRecordReport
) -> tuple[dict[str, dict[str, float]], str]:
    """The first-stage run (qid -> {docid: score}) and its id: the given run, its entries
    whose document the collection lacks reported, or pass 1's BM25."""
    if inputs.run is not None:
        collection_io.check_run(inputs.run, cp.found_docids, report)
        return inputs.run.scores, "first_stage"
    return cp.bm25 or {}, "bm25"


def assign_splits(
    cfg: DatagenConfig,
    qrels: dict[str, dict[str, int]],
    explicit: splits.ExplicitSplit | None,
    num_folds: int,
) -> tuple[dict[str, str], dict[str, int] | None]:
    """(qid -> split, qid -> fold or None): with `num_folds` every judged query is "train" and
    has a fold; else the explicit assignment or `datagen.split`'s kfold hash."""
    split_cfg = cfg.split
    if num_folds:
        fold_of = {q: splits.fold_of(q, num_folds, split_cfg.seed) for q in sorted(qrels)}
        # Every judged query trains in some fold: all their grades set the threshold.
        return dict.fromkeys(qrels, "train"), fold_of
    if explicit is not None:
        return explicit.assignment, None
    split_of = splits.kfold_assignment(
        qrels, split_cfg.num_folds, split_cfg.dev_fold, split_cfg.test_fold, split_cfg.seed
    )
    return split_of, None


def positive_threshold(
    cfg: DatagenConfig, split_of: dict[str, str], qrels: dict[str, dict[str, int]]
) -> int:
    """`datagen.sampling.positive_threshold`, `auto` resolved on the training grades."""
    configured = cfg.sampling.positive_threshold
    try:
        threshold = sampling.resolve_positive_threshold(
            configured, sampling.train_grades(split_of, qrels)
        )
    except sampling.ThresholdError as e:
        raise ValueError(f"datagen.sampling.positive_threshold: {e}") from None
    logging.info("Positive threshold: %d (configured: %s)", threshold, configured)
    return threshold


def sample(
    cfg: DatagenConfig,
    qrels: dict[str, dict[str, int]],
    ranked: Ranked,
    split_of: dict[str, str],
    fold_of: dict[str, int] | None,
    threshold: int,
    split_names: list[str],
) -> tuple[list[sampling.Group], dict[str, int], dict[str, int]]:
    """The groups `datagen.sampling` draws (per fold with `fold_of`, else per split), and
    the queries and the groups per split, in `split_names` order."""
    s = cfg.sampling
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
    per_split = {split: 0 for split in split_names}
    for g in groups:
        per_split[g.split] += 1
    queries_per_split = {split: queries_per_split[split] for split in split_names}
    return groups, queries_per_split, per_split


def split_members(plan: Plan, qrels: dict[str, dict[str, int]]) -> dict[str, list[str]]:
    """Each split's judged queries, in the examples' split order. With cross-validation a query
    is in both splits of its fold, as `sampling.by_fold` puts it."""
    members: dict[str, list[str]] = {split: [] for split in plan.per_split}
    for qid in sorted(qrels):
        if plan.fold_of is not None:
            if qid in plan.fold_of:
                for role in (folds.TRAIN, folds.EVAL):
                    members[folds.split_name(plan.fold_of[qid], role)].append(qid)
        elif qid in plan.split_of:
            members[plan.split_of[qid]].append(qid)
    return members


def split_queries(plan: Plan, qrels: dict[str, dict[str, int]]) -> dict[str, dict]:
    """Per split, in the examples' split order: how many judged queries it holds and which of
    them have no first-stage candidate (rankcore/folds.py SPLIT_QUERIES_FILE). Such a query has
    no example, so without this record the evaluator would never see it; with it, it scores 0
    for every system, as trec_eval -c counts a judged query missing from the run."""
    members = split_members(plan, qrels)
    return {
        split: {
            folds.JUDGED: len(qids),
            folds.WITHOUT_CANDIDATES: [q for q in qids if not plan.ranked.get(q)],
        }
        for split, qids in members.items()
    }


def num_shards(cfg: DatagenConfig, per_split: dict[str, int]) -> dict[str, int]:
    """Shards per split: `datagen.num_shards`, or one per EXAMPLES_PER_SHARD examples."""
    return {
        split: cfg.num_shards or max(1, math.ceil(n / EXAMPLES_PER_SHARD))
        for split, n in per_split.items()
    }


def report_empty_splits(
    coll: CollectionConfig,
    cfg: DatagenConfig,
    report: collection_io.BadRecordReport,
    per_split: dict[str, int],
    queries_per_split: dict[str, int],
    n_judged: int,
    threshold: int,
    num_folds: int,
) -> None:
    """Every split without a group, as a bad record (`empty_split`) in the splits kind."""
    fold_of_split = {
        folds.split_name(f, role): f for f in range(num_folds) for role in (folds.TRAIN, folds.EVAL)
    }
    for split, n in per_split.items():
        if not n:
            bad = empty_split(
                split,
                queries_per_split[split],
                n_judged,
                coll,
                cfg,
                threshold,
                fold_of_split.get(split),
            )
            report.add(collection_io.SPLITS_KIND, bad)


def empty_split(
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
            f"fold {getattr(split_cfg, f'{split}_fold')}" if split != "train" else "the train folds"
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
