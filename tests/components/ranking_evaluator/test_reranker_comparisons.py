"""The reranker-alone comparison (metrics.json "reranker_comparisons", the "alone" rows'
p-values and W/T/L in the reports and docs/results.md) on per-query values small enough to
work out by hand."""

from __future__ import annotations

import math

import pytest

from components.ranking_evaluator.measuring import compare_reranker_alone

# Three queries. ndcg_cut_10: the reranker alone gains 0.1, 0.2, 0.3 over the first stage.
#   t-test: d = (0.1, 0.2, 0.3), mean 0.2, sd 0.1, t = 0.2 / (0.1 / sqrt 3) = 2 sqrt 3, df 2;
#   for df 2, P(|T| > t) = 1 - t / sqrt(t^2 + 2) = 1 - sqrt(12 / 14).
#   sign flips: of the 8 patterns only +++ and --- reach |mean| 0.2 (the others give 0, 0.2/3,
#   0.4/3 in absolute value), so the exact randomization p is 2 / 8 = 0.25.
# P_10: one win (+0.125), one tie, one loss (-0.125): mean difference 0, both p-values 1.
PER_QUERY = {
    "first_stage": {
        "1": {"ndcg_cut_10": 0.25, "P_10": 0.5},
        "2": {"ndcg_cut_10": 0.25, "P_10": 0.5},
        "3": {"ndcg_cut_10": 0.25, "P_10": 0.5},
    },
    "reranker": {
        "1": {"ndcg_cut_10": 0.35, "P_10": 0.5},
        "2": {"ndcg_cut_10": 0.45, "P_10": 0.375},
        "3": {"ndcg_cut_10": 0.55, "P_10": 0.625},
    },
    # The fused candidate is not what "alone" compares: if it were, these would show.
    "candidate": {
        "1": {"ndcg_cut_10": 0.0, "P_10": 0.0},
        "2": {"ndcg_cut_10": 0.0, "P_10": 0.0},
        "3": {"ndcg_cut_10": 0.0, "P_10": 0.0},
    },
}


def test_reranker_alone_against_the_first_stage_by_hand() -> None:
    out = compare_reranker_alone(PER_QUERY, ["ndcg_cut_10", "P_10"], trials=20000, seed=3)
    assert list(out) == ["first_stage"]
    ndcg, p10 = out["first_stage"]["ndcg_cut_10"], out["first_stage"]["P_10"]

    assert ndcg["n"] == 3
    assert ndcg["mean_a"] == pytest.approx(0.25) and ndcg["mean_b"] == pytest.approx(0.45)
    assert ndcg["mean_delta"] == pytest.approx(0.2)  # reranker minus first stage
    assert (ndcg["wins"], ndcg["ties"], ndcg["losses"]) == (3, 0, 0)
    assert ndcg["ttest_p"] == pytest.approx(1 - math.sqrt(12 / 14), rel=1e-9)  # 0.0742
    # Monte Carlo estimate of 0.25 from 20,000 sign-flip trials (sd 0.003).
    assert ndcg["randomization_p"] == pytest.approx(0.25, abs=0.015)

    assert (p10["wins"], p10["ties"], p10["losses"]) == (1, 1, 1)
    assert p10["mean_delta"] == pytest.approx(0.0, abs=1e-12)
    assert p10["ttest_p"] == pytest.approx(1.0)
    assert p10["randomization_p"] == 1.0


def test_no_reranker_run_means_no_alone_comparison() -> None:
    # A candidate without fusion is the reranker alone: nothing extra to compare.
    without = {k: v for k, v in PER_QUERY.items() if k != "reranker"}
    assert compare_reranker_alone(without, ["ndcg_cut_10"], trials=100, seed=0) == {}
