"""Unit tests of components.ranking_datagen.sampling (no Beam)."""

from __future__ import annotations

import dataclasses
from collections import Counter

import pytest

from components.ranking_datagen import sampling
from components.ranking_datagen.sampling import (
    Group,
    by_fold,
    by_split,
    eval_groups,
    make_groups,
    train_groups,
)

# 8 first-stage candidates (docid, score, rank) and graded judgments; "p9" is a positive the
# first stage missed, "c3" is judged non-relevant, the unjudged ones count as 0.
CANDS = [(f"c{i}", 10.0 - i, i) for i in range(1, 9)]
QRELS = {"c1": 1, "c2": 3, "c3": 0, "c5": 2, "p9": 3, "c7": -1}


def _train(mode: str = "pairwise", n: int = 50, k: int = 1, threshold: int = 2, seed: int = 0):
    return train_groups("q1", CANDS, QRELS, mode, n, k, threshold, seed)


def test_eval_groups_are_every_candidate_with_qrels_labels() -> None:
    groups = eval_groups("dev", "q1", CANDS, QRELS)
    assert [g.docids for g in groups] == [(f"c{i}",) for i in range(1, 9)]
    assert [g.labels[0] for g in groups] == [1.0, 3.0, 0.0, 0.0, 2.0, 0.0, 0.0, 0.0]
    assert [g.judged[0] for g in groups] == [1, 1, 1, 0, 1, 0, 1, 0]  # c7: judged -1 -> label 0
    assert [g.ranks[0] for g in groups] == list(range(1, 9))
    assert [g.scores[0] for g in groups] == [9.0, 8.0, 7.0, 6.0, 5.0, 4.0, 3.0, 2.0]
    assert {g.split for g in groups} == {"dev"}
    assert len({g.key for g in groups}) == 8  # unique keys: they order and shard examples


def test_pairwise_rules() -> None:
    groups = _train("pairwise", n=200)
    assert len(groups) == 200  # every draw has a lower-judged candidate here
    first_stage = {d for d, _, _ in CANDS}
    for g in groups:
        pos, neg = g.docids
        assert QRELS[pos] >= 2  # positive_threshold
        assert neg in first_stage  # negatives come from what the first stage returned
        assert max(QRELS.get(neg, 0), 0) < QRELS[pos]
        assert g.labels == (float(QRELS[pos]), float(max(QRELS.get(neg, 0), 0)))
        assert g.judged == (1, int(neg in QRELS))
    positives = Counter(g.docids[0] for g in groups)
    assert set(positives) == {"c2", "c5", "p9"}  # also the positive the first stage missed
    # A grade-2 positive is never paired with c5 itself or with a grade-3 document.
    assert all(g.docids[1] not in {"c2", "c5", "p9"} for g in groups if g.docids[0] == "c5")
    missed = next(g for g in groups if g.docids[0] == "p9")
    assert missed.ranks[0] == len(CANDS) + 1 and missed.scores[0] == 0.0
    hit = next(g for g in groups if g.docids[0] == "c2")
    assert hit.ranks[0] == 2 and hit.scores[0] == 8.0


def test_listwise_groups_have_distinct_negatives() -> None:
    groups = _train("listwise", n=30, k=4)
    assert len(groups) == 30
    for g in groups:
        assert len(g.docids) == 5
        assert len(set(g.docids[1:])) == 4
        assert all(g.labels[i] < g.labels[0] for i in range(1, 5))
    # Fewer lower-judged candidates than k: drawn with replacement, the group keeps its size.
    few = train_groups("q1", CANDS[:3], {"c1": 3, "c2": 0}, "listwise", 5, 4, 1, 0)
    assert [len(g.docids) for g in few] == [5] * 5
    assert {d for g in few for d in g.docids[1:]} == {"c2", "c3"}


def test_pointwise_draws_from_positives_and_candidates() -> None:
    groups = _train("pointwise", n=300)
    assert len(groups) == 300 and all(len(g.docids) == 1 for g in groups)
    drawn = {g.docids[0] for g in groups}
    assert drawn == {f"c{i}" for i in range(1, 9)} | {"p9"}


def test_sampling_is_deterministic_per_query_and_seed() -> None:
    a = _train(seed=7)
    assert a == _train(seed=7)
    assert a != _train(seed=8)
    # A query's sample does not depend on which other queries exist or their order.
    split_of = {"q1": "train", "q2": "train"}
    two = {"q1": QRELS, "q2": {"c1": 2}}
    both, _ = make_groups(
        by_split(split_of, two),
        two,
        {"q1": CANDS, "q2": CANDS},
        "pairwise",
        50,
        1,
        2,
        7,
    )
    one = {"q1": QRELS}
    cands = {"q1": CANDS}
    alone, _ = make_groups(by_split({"q1": "train"}, one), one, cands, "pairwise", 50, 1, 2, 7)
    assert [g for g in both if g.qid == "q1"] == alone


def test_no_positive_or_no_negative_gives_no_group() -> None:
    assert train_groups("q", CANDS, {"c1": 1}, "pairwise", 10, 1, 2, 0) == []
    # The only positive is also the only candidate: nothing to pair it with.
    assert train_groups("q", CANDS[:1], {"c1": 2}, "pairwise", 10, 1, 2, 0) == []


def test_make_groups_assigns_splits_and_skips_unassigned_queries() -> None:
    qrels = {"a": QRELS, "b": QRELS, "c": QRELS, "z": QRELS}
    ranked = {q: CANDS for q in qrels}
    split_of = {"a": "train", "b": "dev", "c": "test"}  # "z" has no split
    assigned = by_split(split_of, qrels)
    groups, per_split = make_groups(assigned, qrels, ranked, "pairwise", 5, 1, 2, 0)
    assert per_split == {"train": 1, "dev": 1, "test": 1}
    assert Counter(g.split for g in groups) == {"train": 5, "dev": 8, "test": 8}
    assert {g.qid for g in groups if g.split == "dev"} == {"b"}
    assert "z" not in {g.qid for g in groups}
    # Groups come in (qid, index) order, and keys are unique across splits.
    assert [g.qid for g in groups] == sorted(g.qid for g in groups)
    assert len({g.key for g in groups}) == len(groups)


def test_by_fold_gives_every_query_its_folds_train_and_eval_groups() -> None:
    """Cross-validation: each query's training sample (the one make_groups draws for it as a
    train query) under fold<f>_train, and all its candidates under fold<f>_eval."""
    qrels = {"a": QRELS, "b": QRELS, "c": {"c1": 1}, "z": QRELS}
    ranked = {q: CANDS for q in qrels}
    fold_of = {"a": 0, "b": 2, "c": 0}  # "z" has no fold
    groups, per_split = make_groups(by_fold(fold_of, qrels), qrels, ranked, "pairwise", 5, 1, 2, 0)
    # "c" has no positive at threshold 2: counted in both of its splits, no train group.
    assert per_split == {"fold0_train": 2, "fold0_eval": 2, "fold2_train": 1, "fold2_eval": 1}
    assert Counter(g.split for g in groups) == {
        "fold0_train": 5,
        "fold0_eval": 16,
        "fold2_train": 5,
        "fold2_eval": 8,
    }
    for qid in ("a", "b"):
        split = f"fold{fold_of[qid]}_train"
        train = [g for g in groups if g.qid == qid and g.split == split]
        alone = by_split({qid: "train"}, qrels)
        expected, _ = make_groups(alone, qrels, ranked, "pairwise", 5, 1, 2, 0)
        assert [dataclasses.replace(g, split="train") for g in train] == expected
        split = f"fold{fold_of[qid]}_eval"
        assert [g for g in groups if g.qid == qid and g.split == split] == eval_groups(
            split, qid, CANDS, QRELS
        )
    assert "z" not in {g.qid for g in groups}
    # Qid order (train groups before eval groups), and keys unique across the splits.
    assert [g.qid for g in groups] == sorted(g.qid for g in groups)
    assert len({g.key for g in groups}) == len(groups)


def test_lists_mode_writes_every_candidate_unsampled() -> None:
    """mode lists: a train query's groups are its whole candidate list, one candidate each in
    first-stage order, labelled as dev/test groups are (the Trainer's frozen_documents scores
    them all at once), whatever samples_per_query and the seed say."""
    groups = train_groups("q1", CANDS, QRELS, "lists", 3, 4, 2, 0, split="fold2_train")
    want = eval_groups("fold2_train", "q1", CANDS, QRELS)
    assert groups == want and len(groups) == len(CANDS)
    assert train_groups("q1", CANDS, QRELS, "lists", 50, 1, 2, 7, split="fold2_train") == want
    # A query with no positive at the threshold has nothing to learn from: no groups.
    assert train_groups("q1", CANDS, {"c1": 1}, "lists", 3, 4, 2, 0) == []


def test_group_key_is_stable() -> None:
    g = Group("train", "q7", ("a", "b"), (1.0, 0.0), (1, 0), (2.0, 1.0), (1, 2), index=3)
    assert g.key == "train|q7|3"


@pytest.mark.parametrize("mode", ["pairwise", "listwise", "pointwise"])
def test_training_labels_clip_negative_grades(mode: str) -> None:
    for g in _train(mode, n=100, k=2):
        assert all(label >= 0 for label in g.labels)
        assert all(label == max(QRELS.get(d, 0), 0) for d, label in zip(g.docids, g.labels))


def _grades(*pairs: tuple[int, int]) -> Counter:
    return Counter(dict(pairs))


def test_auto_threshold_is_the_lowest_grade_above_zero() -> None:
    resolve = sampling.resolve_positive_threshold
    assert resolve("auto", _grades((0, 10), (1, 5))) == 1  # BEIR: 0/1
    assert resolve("auto", _grades((0, 10), (1, 5), (2, 3), (3, 1))) == 1  # TREC DL: 0..3
    assert resolve("auto", _grades((0, 4), (2, 3), (3, 1))) == 2  # no grade 1 judged
    assert resolve("auto", _grades((-1, 2), (0, 4), (4, 1))) == 4
    assert resolve(2, _grades((0, 4), (2, 3))) == 2  # a number that works is kept


def test_threshold_no_train_judgment_reaches_names_grades_and_fix() -> None:
    with pytest.raises(sampling.ThresholdError) as err:
        sampling.resolve_positive_threshold(2, _grades((0, 148), (1, 233)))
    assert str(err.value) == (
        "2 leaves the train split without a positive: the train queries' judgments have grades "
        "0 (148x), 1 (233x); use 1 or auto"
    )
    with pytest.raises(sampling.ThresholdError, match=r"auto finds no grade above 0.*0 \(3x\)"):
        sampling.resolve_positive_threshold("auto", _grades((0, 3)))


def test_train_grades_count_only_train_queries() -> None:
    qrels = {"a": {"d1": 1, "d2": 0}, "b": {"d1": 3}, "c": {"d3": 2}}
    split_of = {"a": "train", "b": "test", "c": "train"}
    assert sampling.train_grades(split_of, qrels) == Counter({1: 1, 0: 1, 2: 1})
