"""blessing.decide: floors, required changes vs first stage / baseline, significance."""

from __future__ import annotations

from components.ranking_evaluator.blessing import decide
from components.ranking_evaluator.config import EvaluatorConfig


def stats(delta: float, p: float = 0.01) -> dict:
    return {"mean_delta": delta, "randomization_p": p, "ttest_p": p}


def config(**overrides) -> EvaluatorConfig:
    base = {
        "main_metric": "ndcg_cut_10",
        "min_values": {},
        "min_delta_vs_first_stage": None,
        "min_delta_vs_baseline": None,
        "require_significance": False,
        "significance_level": 0.05,
    }
    return EvaluatorConfig(**{**base, **overrides})


AGG = {"ndcg_cut_10": 0.42, "map": 0.30}


def test_no_thresholds_blesses_with_nothing_to_report() -> None:
    d = decide(AGG, {"first_stage": {"ndcg_cut_10": stats(-0.2)}}, config())
    assert (d.blessed, d.reasons, d.checks) == (True, [], [])


def test_floor_below_and_above() -> None:
    d = decide(AGG, {}, config(min_values={"ndcg_cut_10": 0.5, "map": 0.3}))
    assert not d.blessed
    assert d.reasons == ["ndcg_cut_10 = 0.4200 (floor 0.5000): below floor"]
    # Equal to the floor passes.
    assert d.checks == ["map = 0.3000 (floor 0.3000)"]


def test_floor_on_a_measure_that_was_not_computed_fails() -> None:
    d = decide(AGG, {}, config(min_values={"P_5": 0.1}))
    assert not d.blessed
    assert d.reasons == ["P_5: not computed (add it to evaluator.measures)"]


def test_change_vs_first_stage() -> None:
    comparisons = {"first_stage": {"ndcg_cut_10": stats(0.02)}}
    ok = decide(AGG, comparisons, config(min_delta_vs_first_stage=0.01))
    assert ok.blessed
    assert ok.checks == ["ndcg_cut_10 change vs first stage = +0.0200 (need >= +0.0100)"]
    bad = decide(AGG, comparisons, config(min_delta_vs_first_stage=0.03))
    assert bad.reasons == [
        "ndcg_cut_10 change vs first stage = +0.0200 (need >= +0.0300): too small"
    ]


def test_negative_threshold_tolerates_a_small_loss() -> None:
    comparisons = {"first_stage": {"ndcg_cut_10": stats(-0.04)}}
    assert decide(AGG, comparisons, config(min_delta_vs_first_stage=-0.05)).blessed
    assert not decide(AGG, comparisons, config(min_delta_vs_first_stage=-0.03)).blessed


def test_baseline_threshold_without_a_baseline_is_noted_not_failed() -> None:
    d = decide(AGG, {"first_stage": {"ndcg_cut_10": stats(0.1)}}, config(min_delta_vs_baseline=0))
    assert d.blessed
    assert d.checks == ["no baseline to compare with: min_delta_vs_baseline not applied"]


def test_change_vs_baseline_fails_when_worse() -> None:
    comparisons = {
        "first_stage": {"ndcg_cut_10": stats(0.1)},
        "baseline": {"ndcg_cut_10": stats(-0.01)},
    }
    d = decide(AGG, comparisons, config(min_delta_vs_first_stage=0.0, min_delta_vs_baseline=0.0))
    assert not d.blessed
    assert d.reasons == ["ndcg_cut_10 change vs baseline = -0.0100 (need >= +0.0000): too small"]
    assert d.checks == ["ndcg_cut_10 change vs first stage = +0.1000 (need >= +0.0000)"]


def test_change_vs_baseline_says_when_it_is_on_fewer_queries() -> None:
    """The served model is compared only on the queries held out from it (baseline.py): the
    check says on how many, where that is fewer than the candidate is measured on."""
    comparisons = {
        "first_stage": {"ndcg_cut_10": dict(stats(0.1), n=225)},
        "baseline": {"ndcg_cut_10": dict(stats(0.02), n=45)},
    }
    d = decide(AGG, comparisons, config(min_delta_vs_baseline=0.0))
    assert d.checks == [
        "ndcg_cut_10 change vs baseline = +0.0200 on the 45 of 225 queries it neither trained "
        "nor chose on (need >= +0.0000)"
    ]
    comparisons["baseline"]["ndcg_cut_10"]["n"] = 225  # every query: nothing to say
    d = decide(AGG, comparisons, config(min_delta_vs_baseline=0.0))
    assert d.checks == ["ndcg_cut_10 change vs baseline = +0.0200 (need >= +0.0000)"]


def test_required_significance() -> None:
    cfg = config(min_delta_vs_first_stage=0.0, require_significance=True)
    significant = decide(AGG, {"first_stage": {"ndcg_cut_10": stats(0.05, p=0.01)}}, cfg)
    assert significant.blessed
    assert "randomization p = 0.0100 (need < 0.05, gain > 0)" in significant.checks[1]

    not_significant = decide(AGG, {"first_stage": {"ndcg_cut_10": stats(0.05, p=0.2)}}, cfg)
    assert not not_significant.blessed
    assert not_significant.reasons == [
        "ndcg_cut_10 vs first stage: randomization p = 0.2000 (need < 0.05, gain > 0)"
    ]
    # A significant loss is not a significant gain.
    loss = decide(AGG, {"first_stage": {"ndcg_cut_10": stats(-0.05, p=0.001)}}, cfg)
    assert len(loss.reasons) == 2 and not loss.blessed


def test_significance_is_only_checked_where_a_change_threshold_is_set() -> None:
    cfg = config(require_significance=True)
    d = decide(AGG, {"first_stage": {"ndcg_cut_10": stats(0.05, p=0.9)}}, cfg)
    assert d.blessed and d.checks == []
