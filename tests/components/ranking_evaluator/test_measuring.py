"""measuring.py on runs small enough to check by hand: which runs each system is judged by
(fusion per fold, the reranker alone), the folds' fusion summary, and the small-sample reason."""

from __future__ import annotations

import pytest

from components.ranking_evaluator import measuring
from components.ranking_evaluator.config import EvaluatorConfig
from components.ranking_evaluator.inputs import Part
from components.ranking_evaluator.passes import Scoring
from rankcore import fusion
from rankcore.metrics import aggregate, compute_metrics

FIRST = {"q1": {"a": 3.0, "b": 2.0, "c": 1.0}, "q2": {"a": 1.0, "d": 2.0}, "q3": {"x": 1.0}}
RAW = {"q1": {"a": 0.1, "b": 0.9}, "q2": {"a": 0.5, "d": 0.2}}


def _scoring(part_qids, part_fusions, baseline=None, baseline_fusion=None) -> Scoring:
    raw = {"candidate": RAW, **({"baseline": baseline} if baseline else {})}
    return Scoring(raw, part_qids, part_fusions, baseline_fusion, {}, {}, 0.0, 1.0, 4)


def test_without_fusion_the_candidate_is_the_reranker_alone() -> None:
    fused = measuring.fuse(_scoring([["q1", "q2"]], [None]), FIRST, has_baseline=False)
    assert list(fused.runs) == ["first_stage", "candidate"]
    assert fused.runs["candidate"] == RAW
    assert fused.runs["first_stage"] == {"q1": FIRST["q1"], "q2": FIRST["q2"]}
    assert fused.split_qids == ["q1", "q2"] and fused.missing == 1  # q1's "c"
    assert fused.fusions == {"candidate": None}


def test_each_folds_queries_are_fused_with_its_own_alpha() -> None:
    part_fusions = [{"mode": "tuned", "alpha": 0.2}, {"mode": "tuned", "alpha": 0.8}]
    baseline = {"q1": {"a": 1.0, "b": 0.0}, "q2": {"a": 0.0, "d": 1.0}}
    scored = _scoring([["q1"], ["q2"]], part_fusions, baseline, {"mode": "tuned", "alpha": 0.5})
    fused = measuring.fuse(scored, FIRST, has_baseline=True)
    assert list(fused.runs) == ["first_stage", "reranker", "candidate", "baseline"]
    first = fused.runs["first_stage"]
    assert fused.runs["reranker"] == RAW
    assert fused.runs["candidate"] == {
        **fusion.fuse_run({"q1": RAW["q1"]}, first, 0.2),
        **fusion.fuse_run({"q2": RAW["q2"]}, first, 0.8),
    }
    assert fused.runs["baseline"] == fusion.fuse_run(baseline, first, 0.5)
    summary = fused.fusions["candidate"]
    assert summary["alpha"] == pytest.approx(0.5) and summary["alphas"] == [0.2, 0.8]
    assert "feedbacks" not in summary
    assert fused.fusions["baseline"] == {"mode": "tuned", "alpha": 0.5}


def test_too_few_queries_is_the_reason_when_significance_is_required() -> None:
    config = EvaluatorConfig.from_dict(
        {"measures": ["map"], "main_metric": "map", "require_significance": True, "min_values": {}}
    )
    fused = measuring.fuse(_scoring([["q1", "q2"]], [None]), FIRST, has_baseline=False)
    qrels = {"q1": {"b": 1}, "q2": {"a": 1}}
    measured = measuring.measure(fused, qrels, config)
    assert measured.aggregates["candidate"]["map"] == pytest.approx(1.0)
    assert measured.reranker_comparisons == {}
    verdict = measuring.decide(measured, config)
    assert not verdict.decision.blessed
    assert verdict.small_sample and verdict.decision.reasons[-1] == verdict.small_sample[0]


def test_a_judged_query_without_candidates_counts_zero_for_every_system() -> None:
    """q9 is judged but the first stage returned nothing for it (no example, in no run): it is
    among the split's queries, scores trec_eval -c's 0 for every system, ties in the tests
    and counts in its fold; the means are trec_eval -c's over all three judged queries."""
    config = EvaluatorConfig.from_dict(
        {"measures": ["ndcg_cut_10", "map"], "main_metric": "ndcg_cut_10", "min_values": {}}
    )
    qrels = {"q1": {"b": 1}, "q2": {"a": 1}, "q9": {"z": 2}, "q_other_split": {"a": 1}}
    part_fusions = [{"mode": "tuned", "alpha": 0.2}, {"mode": "tuned", "alpha": 0.8}]
    scored = _scoring([["q1"], ["q2"]], part_fusions)
    fused = measuring.fuse(scored, FIRST, has_baseline=False, without_candidates=[[], ["q9"]])
    assert fused.split_qids == ["q1", "q2", "q9"] and fused.without_candidates == ["q9"]
    assert fused.part_qids == [["q1"], ["q2", "q9"]]
    assert all("q9" not in run for run in fused.runs.values())
    measured = measuring.measure(fused, qrels, config)
    split_qrels = {q: qrels[q] for q in ("q1", "q2", "q9")}
    for system, run in fused.runs.items():
        assert measured.per_query[system]["q9"] == {"ndcg_cut_10": 0.0, "map": 0.0}
        trec_eval_c = aggregate(
            compute_metrics(split_qrels, run, ["ndcg_cut_10", "map"], complete=True),
            qrels=split_qrels,
            complete=True,
        )
        assert measured.aggregates[system]["ndcg_cut_10"] == trec_eval_c["ndcg_cut_10"]
    stats = measured.comparisons["first_stage"]["ndcg_cut_10"]
    assert stats["n"] == 3 and stats["ties"] >= 1
    cv = measuring.cross_validation(
        [Part(0, "fold0_eval", "m0", None), Part(1, "fold1_eval", "m1", None)],
        fused.part_qids,
        part_fusions,
        measured.per_query,
        "ndcg_cut_10",
        fused.without_candidates,
    )
    assert [(f["queries"], f["queries_without_candidates"]) for f in cv["per_fold"]] == [
        (1, 0),
        (2, 1),
    ]
    assert measuring.no_candidate_note(1, 3) == (
        "1 of 3 judged queries had no candidate: they score 0 for every system, as trec_eval "
        "-c counts them"
    )


def test_without_a_record_the_split_is_the_queries_with_examples() -> None:
    fused = measuring.fuse(_scoring([["q1", "q2"]], [None]), FIRST, has_baseline=False)
    assert fused.without_candidates is None and fused.split_qids == ["q1", "q2"]


def test_the_baseline_is_measured_and_tested_on_the_queries_held_out_from_it() -> None:
    """The served model trained on q0..q3 (it ranks them perfectly), not on the 6 others. Its
    figures, its mean and its test cover those 6 only, paired with the candidate's; with 5
    held out the test could never reach p < 0.05, so it is not compared at all."""
    from components.ranking_evaluator.baseline import BaselineChoice, ServedModel
    from components.ranking_evaluator.inputs import EvalInputs
    from rankcore import lineage

    qids = [f"q{i}" for i in range(10)]
    first = {q: {"rel": 1.0, "non": 2.0} for q in qids}
    candidate = {q: {"rel": 0.0, "non": 1.0} for q in qids}  # relevant doc second everywhere
    served = {q: {"rel": 1.0 if i < 4 else 0.0, "non": 0.5} for i, q in enumerate(qids)}
    qrels = {q: {"rel": 1} for q in qids}
    config = EvaluatorConfig.from_dict(
        {"measures": ["map"], "main_metric": "map", "min_values": {}}
    )
    raw = {"candidate": candidate, "baseline": served}
    scored = Scoring(raw, [qids], [None], None, {}, {}, 0.0, 1.0, 20)
    fused = measuring.fuse(scored, first, has_baseline=True)

    def inputs(trained: list[str]) -> EvalInputs:
        record = {lineage.TRAIN: trained, lineage.DEV: [], lineage.RULE: "r"}
        model = ServedModel("/srv/1", 1, "m1", {}, record)
        return EvalInputs(qrels, first, BaselineChoice(model), [], {})

    held, choice = measuring.held_out_baseline(fused, inputs(qids[:4]), config)
    assert choice.compare_on == tuple(qids[4:]) and "baseline" in held.runs
    measured = measuring.measure(held, qrels, config, choice.compare_on)
    assert sorted(measured.per_query["baseline"]) == qids[4:]
    assert measured.aggregates["baseline"]["map"] == pytest.approx(0.5)
    assert measured.aggregates["candidate"]["map"] == pytest.approx(0.5)  # all 10
    stats = measured.comparisons["baseline"]["map"]
    assert (stats["n"], stats["mean_delta"], stats["ties"]) == (6, 0.0, 6)
    assert measured.comparisons["first_stage"]["map"]["n"] == 10
    # On every query (the bug), the same runs read as a drop of 4 * 0.5 / 10.
    unrestricted = measuring.measure(fused, qrels, config)
    assert unrestricted.comparisons["baseline"]["map"]["mean_delta"] == pytest.approx(-0.2)

    dropped, skipped = measuring.held_out_baseline(fused, inputs(qids[:5]), config)
    assert skipped.served is None and "only 5 of the 10 evaluated queries" in skipped.skipped
    assert "baseline" not in dropped.runs and "baseline" not in dropped.fusions
    assert "baseline" not in measuring.measure(dropped, qrels, config).comparisons
