"""report.markdown / report.html on a hand-made metrics dict (the shape executor writes)."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

import pytest

from components.ranking_evaluator import report


def comparison(delta: float, wins: int, ties: int, losses: int, p: float = 0.03) -> dict:
    return {
        "n": wins + ties + losses,
        "mean_delta": delta,
        "wins": wins,
        "ties": ties,
        "losses": losses,
        "ttest_p": p / 2,
        "randomization_p": p,
    }


@pytest.fixture()
def metrics() -> dict:
    per_query = {
        "first_stage": {"q1": {"map": 0.5, "P_5": 0.4}, "q2": {"map": 0.2, "P_5": 0.2},
                        "q<3>": {"map": 0.9, "P_5": 0.8}},
        "candidate": {"q1": {"map": 0.7, "P_5": 0.6}, "q2": {"map": 0.2, "P_5": 0.2},
                      "q<3>": {"map": 0.6, "P_5": 0.6}},
    }  # fmt: skip
    return {
        "split": "test",
        "main_metric": "map",
        "num_queries": 3,
        "candidates_scored": 300,
        "aggregate": {
            "first_stage": {"map": 0.5333, "P_5": 0.4667},
            "candidate": {"map": 0.5, "P_5": 0.4667},
        },
        "per_query": per_query,
        "comparisons": {
            "first_stage": {
                "map": comparison(-0.0333, 1, 1, 1, p=float("nan")),
                "P_5": comparison(0.0, 1, 1, 1),
            }
        },
        "blessed": False,
        "reasons": ["map = 0.5000 (floor 0.6000): below floor"],
        "checks": ["P_5 ok"],
        "runs": {"candidate": "candidate.run", "first_stage": "first_stage.run"},
    }


def test_summary_rows(metrics: dict) -> None:
    rows = report.summary_rows(metrics)
    assert rows[0] == [
        "measure", "first stage", "candidate",
        "Δ vs first stage", "p (t-test)", "p (randomization)", "W/T/L",
    ]  # fmt: skip
    assert rows[1] == ["map", "0.5333", "0.5000", "-0.0333", "n/a", "n/a", "1/1/1"]
    assert rows[2] == ["P_5", "0.4667", "0.4667", "+0.0000", "0.0150", "0.0300", "1/1/1"]


def test_summary_rows_with_baseline(metrics: dict) -> None:
    metrics["aggregate"]["baseline"] = {"map": 0.45, "P_5": 0.5}
    metrics["per_query"]["baseline"] = metrics["per_query"]["first_stage"]
    metrics["comparisons"]["baseline"] = {
        "map": comparison(0.05, 2, 0, 1),
        "P_5": comparison(-0.0333, 0, 2, 1),
    }
    rows = report.summary_rows(metrics)
    assert rows[0][:4] == ["measure", "first stage", "baseline", "candidate"]
    assert rows[0][8] == "Δ vs baseline"
    assert rows[1] == [
        "map", "0.5333", "0.4500", "0.5000",
        "-0.0333", "n/a", "n/a", "1/1/1",
        "+0.0500", "0.0150", "0.0300", "2/0/1",
    ]  # fmt: skip
    md = report.markdown(metrics)
    assert "## Worst queries by map change vs baseline" in md


def test_per_query_deltas_worst_first(metrics: dict) -> None:
    deltas = report.per_query_deltas(metrics)
    assert [d[0] for d in deltas] == ["q<3>", "q2", "q1"]
    assert deltas[0] == pytest.approx(("q<3>", 0.9, 0.6, -0.3))


def test_markdown(metrics: dict) -> None:
    md = report.markdown(metrics)
    assert md.startswith("# RankingEvaluator report\n\n**NOT BLESSED** on the test split")
    assert "- failed: map = 0.5000 (floor 0.6000): below floor" in md
    assert "- passed: P_5 ok" in md
    assert "| map | 0.5333 | 0.5000 | -0.0333 | n/a | n/a | 1/1/1 |" in md
    worst = md.split("## Worst queries by map change vs first stage")[1]
    assert worst.index("| q<3> | 0.9000 | 0.6000 | -0.3000 |") < worst.index("| q1 |")
    assert "- candidate run: `candidate.run`" in md


def test_html_is_escaped_and_plots_every_query(metrics: dict) -> None:
    page = report.html(metrics)
    assert "NOT BLESSED" in page and "q&lt;3&gt;" in page and "q<3>" not in page
    svg = re.search(r"<svg.*?</svg>", page, re.S).group(0)
    root = ET.fromstring(svg)  # well-formed, self-contained SVG (matplotlib, plots.py)
    ns = "{http://www.w3.org/2000/svg}"
    bars = [g for g in root.iter(f"{ns}g") if g.get("id", "").startswith("delta-first-stage-")]
    assert len(bars) == 3
    # Sorted worst first: red (loss), grey (tie), green (win).
    fills = [re.search(r"fill: (#\w+)", g.find(f"{ns}path").get("style")).group(1) for g in bars]
    assert fills == ["#cc3333", "#888888", "#22aa77"]
    labels = [t.text for t in root.iter(f"{ns}text")]
    assert ["q<3>", "q2", "q1"] == [t for t in labels if t in ("q<3>", "q2", "q1")]
    # Self-contained: no scripts, nothing fetched (namespace URIs are names, not requests).
    assert not re.search(r"<script|src=|href=.http|url\(.?http", page)
