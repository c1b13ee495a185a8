"""The report's plots (plots.py): unit checks on small inputs, the figures of a real demo run's
report, and that page rendered by headless Chromium (`make test` installs it; skipped when
absent, except under CI=true, where its absence fails the test)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from components.ranking_evaluator import plots, report

NS = "{http://www.w3.org/2000/svg}"
REPO = Path(__file__).resolve().parents[3]


def _texts(svg: str) -> list[str]:
    return [t.text for t in ET.fromstring(svg).iter(f"{NS}text") if t.text]


def test_training_curves_draw_both_series() -> None:
    svg = plots.training_curves(
        [[50, 0.9], [100, 0.5], [120, 0.4]], [[100, 0.61], [120, 0.64]], "ndcg_cut_10", 120
    )
    root = ET.fromstring(svg)  # one well-formed <svg> element, nothing before it
    assert root.tag == f"{NS}svg"
    texts = _texts(svg)
    assert "training loss" in texts and "dev ndcg_cut_10" in texts
    # Two line series: matplotlib writes each Line2D as a <g id="line2d_N"> with a path.
    lines = [g for g in root.iter(f"{NS}g") if g.get("id", "").startswith("line2d_")]
    assert lines


def test_training_curves_without_validation_has_one_panel() -> None:
    svg = plots.training_curves([[10, 1.0], [20, 0.8]], [], "map")
    texts = _texts(svg)
    assert "training loss" in texts and not any(t.startswith("dev ") for t in texts)


def test_split_scores_follow_relevance_level() -> None:
    run = {"q1": {"a": 3.0, "b": 2.0, "c": 1.0}, "q2": {"d": 0.5}}
    qrels = {"q1": {"a": 2, "b": 1, "c": 0}}
    assert plots.split_scores(run, qrels, 1) == ([3.0, 2.0], [1.0, 0.5])
    assert plots.split_scores(run, qrels, 2) == ([3.0], [2.0, 1.0, 0.5])


def test_score_distributions_label_counts() -> None:
    svg = plots.score_distributions([1.0, 2.0, 2.5], [0.0, 0.1])
    texts = _texts(svg)
    assert "relevant (3)" in texts and "non-relevant or unjudged (2)" in texts


def test_svg_is_deterministic_and_ids_differ_between_figures() -> None:
    a = plots.score_distributions([1.0], [0.0])
    assert a == plots.score_distributions([1.0], [0.0])
    b = plots.per_query_change([("q1", 0.1, 0.2, 0.1)], "map", "first stage")
    clip_a = set(re.findall(r'clipPath id="(\w+)"', a))
    clip_b = set(re.findall(r'clipPath id="(\w+)"', b))
    assert clip_a and clip_b and not clip_a & clip_b


def test_figures_go_into_the_page() -> None:
    figures = plots.report_figures(
        {"loss_history": [[1, 1.0], [2, 0.5]], "validation_history": [], "steps": 2},
        {"q1": {"a": 1.0, "b": 0.0}},
        {"q1": {"a": 1}},
        1,
    )
    assert [title for title, *_ in figures] == [
        "Training",
        "Scores of relevant and non-relevant candidates",
    ]
    metrics = {
        "split": "test",
        "main_metric": "map",
        "num_queries": 1,
        "candidates_scored": 2,
        "aggregate": {"first_stage": {"map": 0.5}, "candidate": {"map": 1.0}},
        "per_query": {"first_stage": {"q1": {"map": 0.5}}, "candidate": {"q1": {"map": 1.0}}},
        "comparisons": {
            "first_stage": {
                "map": {
                    "n": 1,
                    "mean_delta": 0.5,
                    "wins": 1,
                    "ties": 0,
                    "losses": 0,
                    "ttest_p": float("nan"),
                    "randomization_p": 1.0,
                }
            }
        },
        "blessed": True,
        "reasons": [],
        "checks": [],
    }
    page = report.html(metrics, figures)
    assert page.count("<svg") == 3  # training, scores, per-query change
    assert "<h2>Training</h2>" in page


# -- the real demo runs (tests/components/ranking_evaluator/demo_pipeline.py) --------------
def _report_and_results(pipeline_runs) -> tuple[str, dict]:
    run = pipeline_runs.first
    page = Path(run.evaluation.uri, "report.html").read_text()
    model = Path(run.model.uri)  # <root>/Trainer/model/<execution>: model_run is its sibling
    results = json.loads(
        (model.parent.parent / "model_run" / model.name / "train_results.json").read_text()
    )
    return page, results


@pytest.mark.e2e
def test_demo_report_has_its_plots(pipeline_runs) -> None:
    page, results = _report_and_results(pipeline_runs)
    # The Trainer's history: a point every log_every (50) steps and the last one; validations
    # every 100 steps and at the end (the demo config; 120 steps in this run).
    assert [s for s, _ in results["loss_history"]] == [50, 100, 120]
    assert [s for s, _ in results["validation_history"]] == [100, 120]
    assert results["validation_history"][-1][1] == pytest.approx(results["final_metric"])
    svgs = re.findall(r"<svg.*?</svg>", page, re.S)
    assert len(svgs) >= 3
    for svg in svgs:
        ET.fromstring(svg)
    text = " ".join(t for svg in svgs for t in _texts(svg))
    assert "training loss" in text and "dev ndcg_cut_10" in text
    assert "candidate scores of the evaluated candidates" in text
    main = pipeline_runs.first.metrics["main_metric"]
    assert f"{main}: candidate minus first stage, per query" in text
    n = pipeline_runs.first.metrics["num_queries"]
    assert len(re.findall(r'<g id="delta-first-stage-\d+"', page)) == n


@pytest.mark.e2e
def test_chromium_renders_the_demo_report(pipeline_runs, tmp_path: Path) -> None:
    if not (shutil.which("chromium") or shutil.which("chromium-browser")):
        reason = "chromium not installed (scripts/setup-system.sh, or apt-get install -y chromium)"
        if os.environ.get("CI", "").lower() == "true":
            # CI must render the report, not pass by skipping the only check of what people see.
            pytest.fail(f"CI=true but {reason}")
        pytest.skip(reason)
    from PIL import Image

    page = Path(pipeline_runs.first.evaluation.uri, "report.html")
    shot = tmp_path / "report.png"
    subprocess.run(
        [str(REPO / "scripts" / "screenshot_report.sh"), str(page), str(shot), "1200x2600"],
        check=True,
        timeout=120,
        capture_output=True,
    )
    image = Image.open(shot).convert("RGB")
    assert image.size == (1200, 2600)
    pixels = list(image.getdata())
    # The plots' colours are on the page: green bars/histogram (#22aa77) and the loss curve
    # (#cc6600), i.e. the SVGs were drawn, not only the tables.
    green = sum(1 for r, g, b in pixels if abs(r - 0x22) < 30 and abs(g - 0xAA) < 30 and b > 80)
    orange = sum(1 for r, g, b in pixels if r > 180 and 80 < g < 130 and b < 40)
    assert green > 500 and orange > 50
