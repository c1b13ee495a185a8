"""measuring.py on runs small enough to check by hand: which runs each system is judged by
(fusion per fold, the reranker alone), the folds' fusion summary, and the small-sample reason."""

from __future__ import annotations

import pytest

from components.ranking_evaluator import measuring
from components.ranking_evaluator.config import EvaluatorConfig
from components.ranking_evaluator.passes import Scoring
from rankcore import fusion

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
