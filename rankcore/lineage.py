"""What a model was trained for: the collection and the token ids it reads.

A model can only be compared with another on the same examples when both read the same token
ids for the same texts (one vocabulary, one case folding, one truncation) and were trained for
the same collection: a served model of another collection fed this collection's token ids once
crashed the evaluator (an id beyond its embedding table) and, where the ids happened to fit,
compared nonsense silently. RankingDataGen records these fingerprints in its summary (and so in
every pushed model's card, which carries the summary) and on its examples artifact; the
evaluator compares a served model only when they match (components/ranking_evaluator/
baseline.py).

In rankcore because the producer (RankingDataGen) and the readers (evaluator, pusher) are
independent components.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from typing import Any

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
