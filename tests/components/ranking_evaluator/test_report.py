"""report.markdown / report.html on a hand-made metrics dict (the shape executor writes)."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from components.ranking_evaluator import report, significance


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
    # Each reference gets its own lists.
    assert "## Largest losses in map vs baseline (1 of 3 queries lost)" in md
    assert "## Largest gains in map vs baseline (1 of 3 queries gained)" in md


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
    losses = md.split("## Largest losses in map vs first stage (1 of 3 queries lost)")[1]
    losses = losses.split("## ")[0]
    assert "| q<3> | 0.9000 | 0.6000 | -0.3000 |" in losses
    assert "| q1 |" not in losses and "| q2 |" not in losses  # a gain, a tie
    gains = md.split("## Largest gains in map vs first stage (1 of 3 queries gained)")[1]
    assert "| q1 | 0.5000 | 0.7000 | +0.2000 |" in gains.split("## ")[0]
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


# -- the lists by sign, the small-sample warning, query texts, TensorBoard (issue 37) ---------
def _set_deltas(metrics: dict, deltas: dict[str, float]) -> None:
    """Per-query map of the first stage 0.5 and of the candidate 0.5 + delta."""
    metrics["per_query"] = {
        "first_stage": {q: {"map": 0.5, "P_5": 0.5} for q in deltas},
        "candidate": {q: {"map": 0.5 + d, "P_5": 0.5} for q, d in deltas.items()},
    }


def test_all_improved_lists_gains_and_says_no_query_lost(metrics: dict) -> None:
    _set_deltas(metrics, {"a": 0.1, "b": 0.3, "c": 0.2})
    md = report.markdown(metrics)
    assert "Largest losses" not in md and "Worst" not in md
    assert "No query lost map against the first stage." in md
    gains = md.split("## Largest gains in map vs first stage (3 of 3 queries gained)")[1]
    rows = [line.split(" | ")[0] for line in gains.splitlines() if line.startswith("| ")]
    assert rows == ["| qid", "| b", "| c", "| a"]  # largest first
    page = report.html(metrics)
    assert "<b>No query lost map against the first stage.</b>" in page
    assert "<h3>Largest gains in map vs first stage (3 of 3 queries gained)</h3>" in page
    assert "Largest losses" not in page


def test_all_worse_says_no_query_gained(metrics: dict) -> None:
    _set_deltas(metrics, {"a": -0.1, "b": -0.3, "tie": 0.0})
    losses, gains = report.losses_and_gains(metrics, "first_stage")
    assert [q for q, *_ in losses] == ["b", "a"] and gains == []
    md = report.markdown(metrics)
    assert "## Largest losses in map vs first stage (2 of 3 queries lost)" in md
    assert "No query gained map against the first stage." in md
    assert report.listed_qids(metrics) == {"a", "b"}  # the tie is listed nowhere


def test_lists_are_capped_and_say_how_many_there_are(metrics: dict) -> None:
    _set_deltas(metrics, {f"q{i:02d}": -0.01 * (i + 1) for i in range(14)})
    losses, _ = report.losses_and_gains(metrics, "first_stage")
    assert len(losses) == report.LISTED_QUERIES and losses[0][0] == "q13"
    md = report.markdown(metrics)
    assert "## Largest losses in map vs first stage (14 of 14 queries lost; the 10 largest)" in md


@pytest.mark.parametrize(
    ("n", "level", "warns"),
    [
        (5, 0.05, True),
        (6, 0.05, False),
        (5, 0.0625, True),
        (5, 0.07, False),
        (7, 0.01, True),
        (8, 0.01, False),
    ],
)
def test_significance_warning_when_p_cannot_go_below_the_level(
    n: int, level: float, warns: bool
) -> None:
    found = report.significance_warnings(n, level)
    assert bool(found) == warns
    if warns:
        (text,) = found
        assert text.startswith(
            f"{n} test queries: the significance test cannot reach p < {level:g}"
        )
        assert f"2/2^{n} = {2 / 2**n:.4g}" in text
        # The fix names settings that exist (config.py): the evaluator's folds and the
        # datagen split's fold count, which must be equal.
        assert "evaluator.cross_validation.folds: 5 with datagen.split.num_folds: 5" in text


def test_significance_warning_with_cross_validation_asks_for_more_judged_queries() -> None:
    (text,) = report.significance_warnings(4, 0.05, folds=3)
    assert text.startswith("4 queries (3-fold cross-validation: every judged query)")
    assert "judge more queries" in text and "num_folds" not in text


@pytest.mark.parametrize("n", [5, 6])
def test_the_warning_tells_the_truth_about_the_randomization_test(n: int) -> None:
    """The best case, every query better by the same amount: with 5 queries the test's p stays
    at 2/2^5 = 0.0625 (up to sampling), with 6 it reaches 0.031 < 0.05."""
    p = significance.randomization_test([1.0] * n, [0.0] * n, trials=10000, seed=0)
    assert p == pytest.approx(significance.min_randomization_p(n), abs=0.01)
    assert (p >= 0.05) == bool(report.significance_warnings(n, 0.05))


def test_warning_is_in_the_verdict_of_both_reports(metrics: dict) -> None:
    metrics["warnings"] = report.significance_warnings(3, 0.05)
    md = report.markdown(metrics)
    verdict = md.split("## Summary")[0]
    assert "- warning: 3 test queries: the significance test cannot reach p < 0.05" in verdict
    page = report.html(metrics)
    assert "<li class='warn'>warning: 3 test queries: the significance test cannot" in page
    # With require_significance the executor makes it a reason too: listed once, as failed.
    metrics["reasons"].append(metrics["warnings"][0])
    md = report.markdown(metrics)
    assert "- failed: 3 test queries" in md and "- warning: 3 test queries" not in md


def test_tensorboard_command(metrics: dict) -> None:
    assert report.tensorboard_command(None) is None
    assert report.tensorboard_command({"Trainer": None}) is None
    one = {"Trainer": "/runs/root/Trainer/model_run/7"}
    assert report.tensorboard_command(one) == "tensorboard --logdir /runs/root/Trainer/model_run/7"
    folds = {**one, "Trainer_fold0": "gs://b/Trainer_fold0/model_run/8"}
    assert report.tensorboard_command(folds) == (
        "tensorboard --logdir_spec "
        "Trainer:/runs/root/Trainer/model_run/7,Trainer_fold0:gs://b/Trainer_fold0/model_run/8"
    )
    metrics["tensorboard_logdirs"] = one
    line = "the Trainer's TensorBoard logs: `tensorboard --logdir /runs/root/Trainer/model_run/7`"
    assert line in report.markdown(metrics)
    assert "<code>tensorboard --logdir /runs/root/Trainer/model_run/7</code>" in report.html(
        metrics
    )
    del metrics["tensorboard_logdirs"]
    assert "tensorboard" not in report.markdown(metrics)


def test_min_randomization_p() -> None:
    assert significance.min_randomization_p(5) == 0.0625
    assert significance.min_randomization_p(1) == significance.min_randomization_p(0) == 1.0
    assert significance.min_randomization_p(5000) == 0.0  # no overflow on a large split


@pytest.mark.e2e
def test_demo_report_names_query_texts_and_tensorboard(pipeline_runs) -> None:
    """The real demo run's report: every listed query and top document has its text, and the
    TensorBoard command points at the Trainer's model_run, which holds the event files."""
    run = pipeline_runs.first
    md = Path(run.evaluation.uri, "report.md").read_text()
    model = Path(run.model.uri)  # <root>/Trainer/model/<execution>: model_run is its sibling
    model_run = model.parent.parent / "model_run" / model.name
    assert (model_run / "train").is_dir() and (model_run / "validation").is_dir()
    assert f"`tensorboard --logdir {model_run}`" in md
    assert run.metrics["warnings"] == []  # 12 test queries: p can go down to 2/2^12
    listed = run.metrics["listed_queries"]
    assert listed["texts"] and listed["queries"]
    for qid, entry in listed["queries"].items():
        assert entry["text"] and entry["text"] in md, qid
        assert set(entry["top"]) == {"candidate", "first_stage"}
        for docs in entry["top"].values():
            assert len(docs) == 3 and all(d["text"] for d in docs), qid
    assert "Worst queries" not in md
