"""rankcore.lineage: which queries a pushed model saw (trained_queries) and which are held out.

The fingerprints (collection, vocabulary, tokenization) are tested on real pushes in
tests/components/ranking_evaluator/test_baseline.py; here, the queries record on its own."""

from __future__ import annotations

from rankcore import folds, lineage

QIDS = [f"q{i:03d}" for i in range(40)]
FOLD_OF = {q: i % 5 for i, q in enumerate(QIDS)}  # as RankingDataGen's summary records them
CV_SUMMARY = {"cross_validation": {"folds": 5, "seed": 0, "fold_of": FOLD_OF}}


def test_cross_validated_model_saw_every_judged_query() -> None:
    """The pushed model trains on every fold but dev_fold and chooses on dev_fold."""
    record = lineage.trained_queries(CV_SUMMARY, {"datagen": {"split": {"dev_fold": 2}}}, None)
    branch = folds.final_branch(2, 5)
    assert record[lineage.TRAIN] == sorted(q for q in QIDS if FOLD_OF[q] in branch.train)
    assert record[lineage.DEV] == sorted(q for q in QIDS if FOLD_OF[q] == 2)
    assert len(record[lineage.TRAIN]) == 32 and len(record[lineage.DEV]) == 8
    assert record[lineage.HELD_OUT] == []
    assert record[lineage.RULE].startswith("5-fold cross-validation: folds 0, 1, 3, 4 trained")
    assert lineage.held_out(QIDS, record) == []
    # Its own (cross-validated) evaluation does not change that: the figures were the folds'.
    evaluation = {"split": "all", "cross_validation": {"folds": 5}, "per_query": {}}
    assert lineage.trained_queries(CV_SUMMARY, {"datagen": {"split": {"dev_fold": 2}}}, evaluation)
    # Without the dev fold in the config nothing reliable is known.
    assert lineage.trained_queries(CV_SUMMARY, {}, evaluation) is None


def test_model_evaluated_on_its_test_split_is_held_out_there_only() -> None:
    test = QIDS[:8]
    evaluation = {
        "split": "test",
        "cross_validation": None,
        "per_query": {"candidate": {q: {"ndcg_cut_10": 0.5} for q in test}},
    }
    record = lineage.trained_queries({"collection": "demo"}, {}, evaluation)
    assert record == {
        lineage.HELD_OUT: test,
        lineage.RULE: "its own evaluation held out the 'test' split's 8 judged queries; the "
        "'train' split trained it, the 'dev' split chose its checkpoint and fusion",
    }
    # A later run with the same split evaluates the same queries: all held out.
    assert lineage.held_out(test, record) == test
    # A later run with another split: only the queries held out from it count.
    assert lineage.held_out(QIDS[4:12], record) == QIDS[4:8]


def test_model_evaluated_on_a_split_it_trained_or_chose_on_holds_nothing_out() -> None:
    for split in ("train", "dev"):
        evaluation = {"split": split, "per_query": {"candidate": {"q000": {}}}}
        record = lineage.trained_queries(None, None, evaluation)
        assert record[lineage.HELD_OUT] == []
        assert lineage.held_out(["q000"], record) == []


def test_nothing_known_is_no_record() -> None:
    assert lineage.trained_queries(None, None, None) is None
    assert lineage.trained_queries({"collection": "demo"}, {"datagen": {}}, None) is None


def test_held_out_excludes_train_and_dev_queries() -> None:
    record = {lineage.TRAIN: ["a", "b"], lineage.DEV: ["c"]}
    assert lineage.held_out(["a", "c", "d", "e"], record) == ["d", "e"]
    record[lineage.HELD_OUT] = ["e", "f"]
    assert lineage.held_out(["a", "c", "d", "e"], record) == ["e"]
