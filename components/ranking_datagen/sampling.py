"""Example groups: training samples from train queries, every candidate for dev/test queries.

A group is one query with n documents (see schemas/ranking_examples/schema.pbtxt). Groups hold
only ids and labels; token ids are joined in later by the Beam pipeline.

Training rules, per train query (`samples_per_query` draws, each from a generator seeded by
sha256(seed, qid), so a query's sample depends on nothing else):
  pairwise  (n=2): a positive (judged relevance >= positive_threshold, drawn uniformly with
            replacement, also when the first stage missed it), and one negative drawn
            uniformly among the first-stage candidates judged lower than that positive
            (unjudged = 0). A draw with no such negative is dropped.
  listwise  (n=1+negatives_per_positive): the same with that many distinct negatives (drawn
            with replacement only when the query has fewer).
  pointwise (n=1): one document drawn uniformly from positives + candidates.
  lists     (n=1): no sampling: every first-stage candidate of the query, one per group, as
            for dev/test (a query with no positive has none), for a Trainer that learns from
            each query's whole candidate list at once (trainer recipe.type frozen_documents).
Labels are the judged relevance clipped at 0 (unjudged = 0, `judged` = 0).
Dev/test: every first-stage candidate of the query, one per group, in rank order.

Cross-validation (`by_fold`): every judged query gets both, its training groups in
`fold<f>_train` and its eval groups in `fold<f>_eval` (rankcore/folds.py), since each fold is
trained on by some fold branches and ranked by another.
"""

from __future__ import annotations

import hashlib
import random
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

from rankcore import folds


@dataclass(frozen=True)
class Group:
    split: str
    qid: str
    docids: tuple[str, ...]
    labels: tuple[float, ...]
    judged: tuple[int, ...]
    scores: tuple[float, ...]
    ranks: tuple[int, ...]
    # Position among the query's groups: two samples may draw the same documents.
    index: int = 0

    @property
    def key(self) -> str:
        """A stable identity, used to order and shard examples deterministically."""
        return f"{self.split}|{self.qid}|{self.index}"


def _rng(seed: int, qid: str) -> random.Random:
    # One generator per query: the sample of a query does not depend on the other queries.
    return random.Random(
        int.from_bytes(hashlib.sha256(f"{seed}:{qid}".encode()).digest()[:8], "big")
    )


def eval_groups(
    split: str,
    qid: str,
    candidates: list[tuple[str, float, int]],
    qrels: dict[str, int],
) -> list[Group]:
    """Every first-stage candidate of a dev/test query, one per group, labelled from the qrels."""
    return [
        Group(
            split=split,
            qid=qid,
            docids=(docid,),
            labels=(float(max(qrels.get(docid, 0), 0)),),
            judged=(int(docid in qrels),),
            scores=(score,),
            ranks=(rank,),
            index=rank,
        )
        for docid, score, rank in candidates
    ]


def train_groups(
    qid: str,
    candidates: list[tuple[str, float, int]],
    qrels: dict[str, int],
    mode: str,
    samples_per_query: int,
    negatives_per_positive: int,
    positive_threshold: int,
    seed: int,
    split: str = "train",
) -> list[Group]:
    """Samples training groups for one train query, labelled `split`.

    Positives are the judged-relevant documents (also those the first stage missed); negatives
    are first-stage candidates with a lower relevance (unjudged counts as 0), so the model learns
    to reorder what the first stage actually returns.
    """
    rng = _rng(seed, qid)
    first_stage = {docid: (score, rank) for docid, score, rank in candidates}
    missing = (0.0, 0)
    positives = sorted(d for d, rel in qrels.items() if rel >= positive_threshold)
    if not positives:
        return []

    def info(docid: str) -> tuple[float, int, float, int]:
        score, rank = first_stage.get(docid, missing)
        return float(max(qrels.get(docid, 0), 0)), int(docid in qrels), score, rank

    def make(docids: list[str], index: int) -> Group:
        rows = [info(d) for d in docids]
        return Group(
            split=split,
            qid=qid,
            docids=tuple(docids),
            labels=tuple(r[0] for r in rows),
            judged=tuple(r[1] for r in rows),
            scores=tuple(r[2] for r in rows),
            # A positive the first stage missed ranks one past its last candidate, score 0.
            ranks=tuple(r[3] or len(candidates) + 1 for r in rows),
            index=index,
        )

    if mode == "lists":
        return eval_groups(split, qid, candidates, qrels)
    if mode == "pointwise":
        pool = sorted(set(positives) | set(first_stage))
        picks = [pool[rng.randrange(len(pool))] for _ in range(samples_per_query)]
        return [make([d], i) for i, d in enumerate(picks)]

    # Negatives per positive grade, in first-stage order (so a sample depends only on the seed).
    negatives_below: dict[int, list[str]] = {}
    k = 1 if mode == "pairwise" else negatives_per_positive
    groups = []
    for i in range(samples_per_query):
        pos = positives[rng.randrange(len(positives))]
        pos_rel = qrels[pos]
        if pos_rel not in negatives_below:
            negatives_below[pos_rel] = [
                d for d, _, _ in candidates if max(qrels.get(d, 0), 0) < pos_rel
            ]
        negatives = negatives_below[pos_rel]
        if not negatives:
            continue
        # Distinct negatives in a listwise group when there are enough of them.
        if len(negatives) >= k:
            negs = rng.sample(negatives, k)
        else:
            negs = [negatives[rng.randrange(len(negatives))] for _ in range(k)]
        groups.append(make([pos, *negs], i))
    return groups


Assigned = Iterable[tuple[str, str, bool]]  # (qid, split, whether its groups are train groups)


def by_split(split_of: dict[str, str], qrels: dict[str, dict[str, int]]) -> Assigned:
    """Every judged query that has a split, in qid order: train groups for "train"."""
    return [(q, split_of[q], split_of[q] == "train") for q in sorted(qrels) if q in split_of]


def by_fold(fold_of: dict[str, int], qrels: dict[str, dict[str, int]]) -> Assigned:
    """Cross-validation: every judged query in fold f = `fold_of[qid]`, in qid order, twice:
    its training groups under `fold<f>_train`, then its eval groups under `fold<f>_eval`."""
    return [
        (q, folds.split_name(fold_of[q], role), role == folds.TRAIN)
        for q in sorted(qrels)
        if q in fold_of
        for role in (folds.TRAIN, folds.EVAL)
    ]


def make_groups(
    assigned: Assigned,
    qrels: dict[str, dict[str, int]],
    ranked: dict[str, list[tuple[str, float, int]]],
    mode: str,
    samples_per_query: int,
    negatives_per_positive: int,
    positive_threshold: int,
    seed: int,
) -> tuple[list[Group], Counter[str]]:
    """The groups of each (qid, split, is_train) of `assigned` (`by_split` or `by_fold`), in
    that order, and the number of queries per split (a query counts in each of its splits)."""
    groups: list[Group] = []
    queries_per_split: Counter[str] = Counter()
    for qid, split, is_train in assigned:
        queries_per_split[split] += 1
        cands = ranked.get(qid, [])
        if is_train:
            groups.extend(
                train_groups(
                    qid,
                    cands,
                    qrels[qid],
                    mode,
                    samples_per_query,
                    negatives_per_positive,
                    positive_threshold,
                    seed,
                    split,
                )
            )
        else:
            groups.extend(eval_groups(split, qid, cands, qrels[qid]))
    return groups, queries_per_split


AUTO_THRESHOLD = "auto"


class ThresholdError(ValueError):
    """`positive_threshold` leaves the train split without a positive (a config mismatch, not a
    bad record: the fix is the key's value)."""


def train_grades(split_of: dict[str, str], qrels: dict[str, dict[str, int]]) -> Counter:
    """How many judgments of each grade the train queries have."""
    return Counter(
        grade
        for qid, judged in qrels.items()
        if split_of.get(qid) == "train"
        for grade in judged.values()
    )


def resolve_positive_threshold(value: int | str, grades: Counter) -> int:
    """The threshold `value` stands for, given the train queries' grade counts.

    `auto` is the lowest grade above 0 (the "not relevant" grade and below) that the train
    queries' judgments have: the most positives any threshold gives, from whatever grades the
    collection uses (0/1 like most BEIR sets, 0..3 like TREC DL, 1..4 like Cranfield). A number
    that no train judgment reaches is refused with the grades found and a value that works,
    since every train query would then be dropped.
    """
    above_zero = sorted(g for g in grades if g > 0)
    found = ", ".join(f"{g} ({grades[g]}x)" for g in sorted(grades)) or "none"
    if value == AUTO_THRESHOLD:
        if not above_zero:
            raise ThresholdError(
                f"auto finds no grade above 0 in the train queries' judgments (grades found: "
                f"{found}): nothing to learn from"
            )
        return above_zero[0]
    if not any(g >= value for g in grades):
        fix = f"use {above_zero[0]} or auto" if above_zero else "no grade above 0 is judged"
        raise ThresholdError(
            f"{value} leaves the train split without a positive: the train queries' judgments have "
            f"grades {found}; {fix}"
        )
    return int(value)
