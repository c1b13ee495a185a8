"""What a model was trained for: the collection, the token ids it reads, the queries it saw.

A model can only be compared with another on the same examples when both read the same token
ids for the same texts (one vocabulary, one case folding, one truncation) and were trained for
the same collection: a served model of another collection fed this collection's token ids once
crashed the evaluator (an id beyond its embedding table) and, where the ids happened to fit,
compared nonsense silently. RankingDataGen records these fingerprints in its summary (and so in
every pushed model's card, which carries the summary) and on its examples artifact; the
evaluator compares a served model only when they match (components/ranking_evaluator/
baseline.py).

The queries a pushed model trained and chose on (`trained_queries`) are recorded beside it by
the Pusher, so that a later evaluation compares it only on queries it never saw (`held_out`).

In rankcore because the producer (RankingDataGen) and the readers (evaluator, pusher) are
independent components.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from typing import Any

from rankcore import folds

# The summary.json key, the examples artifact's custom property (JSON) and the model card's
# `data` entry that hold the record.
RECORD_KEY = "lineage"
COLLECTION = "collection"
VOCABULARY = "vocabulary"
TOKENIZATION = "tokenization"
# What the examples' token ids depend on beside the vocabulary file itself.
TOKENIZATION_SETTINGS = ("lowercase", "max_query_length", "max_doc_length")


def collection_fingerprint(
    queries: Mapping[str, str],
    qrels: Mapping[str, Mapping[str, int]],
    num_documents: int,
) -> str:
    """A digest of the judged task: every query's id and text, every judgment, the corpus size.

    From the content, not the paths: the same collection read from another machine (a Kubeflow
    pod's mount, a gs:// copy) is the same collection, and another file at the same path is not.
    """
    h = hashlib.sha256()
    for qid in sorted(queries):
        h.update(json.dumps([qid, queries[qid]]).encode())
    for qid in sorted(qrels):
        for docid in sorted(qrels[qid]):
            h.update(json.dumps([qid, docid, qrels[qid][docid]]).encode())
    h.update(str(num_documents).encode())
    return h.hexdigest()[:16]


def vocabulary_fingerprint(vocab_lines: Iterable[str]) -> str:
    """A digest of the WordPiece vocabulary, one token a line (ids are line numbers)."""
    h = hashlib.sha256()
    for token in vocab_lines:
        h.update(token.rstrip("\n").encode() + b"\n")
    return h.hexdigest()[:16]


def fingerprints(collection: str, vocabulary: str, settings: Mapping[str, Any]) -> dict[str, Any]:
    """The record RankingDataGen writes: {collection, vocabulary, tokenization settings}."""
    return {
        COLLECTION: collection,
        VOCABULARY: vocabulary,
        TOKENIZATION: {key: settings[key] for key in TOKENIZATION_SETTINGS},
    }


def incomparable(
    candidate: Mapping[str, Any] | None, served: Mapping[str, Any] | None
) -> str | None:
    """Why a served model cannot be compared with the candidate, or None when it can.

    A served model without a record (pushed before it was kept) is not compared either: nothing
    says what it reads."""
    if not candidate:
        return "the candidate's examples record no collection fingerprint"
    if not served:
        return "the served model's card records no collection or vocabulary fingerprint"
    if served.get(COLLECTION) != candidate.get(COLLECTION):
        return "it was trained for another collection (its queries, judgments or corpus differ)"
    if served.get(VOCABULARY) != candidate.get(VOCABULARY):
        return "it reads another vocabulary (its token ids mean other tokens)"
    theirs, ours = served.get(TOKENIZATION) or {}, candidate.get(TOKENIZATION) or {}
    differ = [
        f"{k} {theirs.get(k)} vs {ours.get(k)}"
        for k in TOKENIZATION_SETTINGS
        if theirs.get(k) != ours.get(k)
    ]
    if differ:
        return "it was trained on other tokenization settings (" + ", ".join(differ) + ")"
    return None


# ---- which queries a model trained and chose on ------------------------------------------
#
# A served model is a fair baseline only on queries that reached it in no form: its training
# queries (their judgments are its labels) and its dev queries (they chose its checkpoint and
# fusion alpha) flatter it. The Pusher records what it knows of them in TRAINED_QUERIES_FILE
# beside the pushed SavedModel (components/push_destination.py), derived here; the evaluator of
# a later run compares the served model only on the evaluated queries `held_out` leaves
# (components/ranking_evaluator/baseline.py). The collection is the same (`incomparable`
# checks the fingerprint first), so a qid means the same query in both runs.
TRAIN, DEV = "train", "dev"  # the record's keys: queries it trained on, queries it chose on
# The record's key for the queries known to have reached it in no form (the split its own
# evaluation measured it on): only these may then be compared on.
HELD_OUT = "held_out"
RULE = "rule"  # the record's sentence: where the lists come from
QUERY_LISTS = (TRAIN, DEV, HELD_OUT)
# RankingDataGen's summary: with cross-validation, each judged query's fold.
SUMMARY_CROSS_VALIDATION, SUMMARY_FOLD_OF = "cross_validation", "fold_of"
# The splits the pushed model's Trainer reads without cross-validation (TrainArgs and EvalArgs,
# pipelines/component_table.py trainer_splits): an evaluation of one of them is not held out.
TRAIN_SPLIT, DEV_SPLIT = "train", "dev"


def _folds_record(summary: Mapping[str, Any], config: Mapping[str, Any]) -> dict[str, Any] | None:
    """With cross-validation: the pushed model trains on every fold but
    `datagen.split.dev_fold` and chooses on that one (rankcore/folds.py final_branch), so it has
    seen every judged query. None without cross-validation or when the dev fold is unknown."""
    cv = summary.get(SUMMARY_CROSS_VALIDATION)
    split = (config.get("datagen") or {}).get("split") or {}
    if not isinstance(cv, Mapping) or not isinstance(cv.get(SUMMARY_FOLD_OF), Mapping):
        return None
    if "dev_fold" not in split:
        return None
    branch = folds.final_branch(int(split["dev_fold"]), int(cv["folds"]))
    fold_of = cv[SUMMARY_FOLD_OF]
    return {
        TRAIN: sorted(q for q, f in fold_of.items() if f in branch.train),
        DEV: sorted(q for q, f in fold_of.items() if f == branch.dev),
        HELD_OUT: [],
        RULE: f"{cv['folds']}-fold cross-validation: folds "
        f"{', '.join(map(str, branch.train))} trained it, fold {branch.dev} "
        "(datagen.split.dev_fold) chose its checkpoint and fusion; no judged query is held out",
    }


def trained_queries(
    summary: Mapping[str, Any] | None,
    pipeline_config: Mapping[str, Any] | None,
    evaluation: Mapping[str, Any] | None,
) -> dict[str, Any] | None:
    """What is known of the queries the pushed model saw: {TRAIN, DEV, HELD_OUT, RULE}, each
    list sorted, a key absent where it is not known; None when nothing is known.

    With cross-validation (the summary's fold of every judged query) it trained or chose on
    all of them. Without, its own evaluation (`evaluation`: the evaluator's metrics.json of
    this very model) measured it on a split it neither trained nor chose on: those queries,
    and only those, are held out (an evaluation of its `train` or `dev` split holds none)."""
    record = _folds_record(summary or {}, pipeline_config or {})
    if record is not None:
        return record
    if not evaluation or evaluation.get("cross_validation"):
        return None  # cross-validated figures are the fold models', not this model's
    split = evaluation.get("split")
    candidate = (evaluation.get("per_query") or {}).get("candidate")
    if not isinstance(candidate, Mapping):
        return None  # the evaluation lists no query: nothing known
    evaluated = sorted(candidate)
    if split in (TRAIN_SPLIT, DEV_SPLIT):
        return {HELD_OUT: [], RULE: f"its own evaluation was on its {split!r} split"}
    return {
        HELD_OUT: evaluated,
        RULE: f"its own evaluation held out the {split!r} split's {len(evaluated)} judged "
        f"queries; the {TRAIN_SPLIT!r} split trained it, the {DEV_SPLIT!r} split chose its "
        "checkpoint and fusion",
    }


def held_out(evaluated: Iterable[str], record: Mapping[str, Any]) -> list[str]:
    """The `evaluated` queries that reached the model of `record` in no form, sorted: neither
    its train nor its dev queries, and where the record lists its held-out queries, one of
    those. The only queries on which it is a fair reference."""
    left = set(evaluated) - set(record.get(TRAIN) or ()) - set(record.get(DEV) or ())
    if HELD_OUT in record:
        left &= set(record[HELD_OUT] or ())
    return sorted(left)
