"""The scalars the RankingEvaluator's system.Metrics artifact shows in the Kubeflow UI."""

from __future__ import annotations

import pytest

from components.ranking_evaluator import kfp_ui


def _metrics(systems: dict[str, float], blessed: bool = True) -> dict:
    return {
        "main_metric": "ndcg_cut_5",
        "blessed": blessed,
        "num_queries": 12,
        "aggregate": {
            name: {"ndcg_cut_5": v, "map": v / 2, "recip_rank": v / 3, "bpref": 0.1}
            for name, v in systems.items()
        },
    }


def test_main_measures_of_every_system_with_readable_names() -> None:
    values = kfp_ui.scalars(_metrics({"first_stage": 0.3, "candidate": 0.6, "reranker": 0.5}))
    assert values == pytest.approx(
        {
            "blessed": 1.0,
            "num_queries": 12.0,
            "ndcg_cut_5 (candidate)": 0.6,
            "map (candidate)": 0.3,
            "recip_rank (candidate)": 0.2,
            "ndcg_cut_5 (first stage)": 0.3,
            "map (first stage)": 0.15,
            "recip_rank (first stage)": 0.1,
            "ndcg_cut_5 (reranker alone)": 0.5,
            "map (reranker alone)": 0.25,
            "recip_rank (reranker alone)": 0.5 / 3,
        },
        rel=1e-12,
    )
    assert all(isinstance(v, float) for v in values.values())


def test_baseline_and_verdict() -> None:
    values = kfp_ui.scalars(
        _metrics({"first_stage": 0.3, "candidate": 0.6, "baseline": 0.9}, False)
    )
    assert values["blessed"] == 0.0
    assert values["ndcg_cut_5 (baseline)"] == 0.9
    assert not any("bpref" in name for name in values)
