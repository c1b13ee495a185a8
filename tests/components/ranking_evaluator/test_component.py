"""RankingEvaluator's component surface: outputs, and the HTML report as a KFP artifact."""

from __future__ import annotations

from pathlib import Path

import yaml
from tfx.orchestration.kubeflow.v2 import compiler_utils
from tfx.types import channel, standard_artifacts, value_artifact

from components import artifacts
from components.ranking_evaluator.component import (
    HtmlReport,
    MarkdownReport,
    RankingEvaluator,
    ScalarMetrics,
)


def test_outputs_and_types() -> None:
    evaluator = RankingEvaluator(
        examples=channel.Channel(type=standard_artifacts.Examples),
        model=channel.Channel(type=standard_artifacts.Model),
        qrels=channel.Channel(type=artifacts.Qrels),
        first_stage_run=channel.Channel(type=artifacts.TrecRun),
        evaluator={"split": "test"},
    )
    types = {name: ch.type for name, ch in evaluator.outputs.items()}
    assert types == {
        "evaluation": standard_artifacts.ModelEvaluation,
        "blessing": standard_artifacts.ModelBlessing,
        "candidate_run": artifacts.TrecRun,
        "report": HtmlReport,
        "metrics": ScalarMetrics,
        "report_markdown": MarkdownReport,
    }


def test_report_is_a_kfp_html_artifact_stored_as_one_file(tmp_path: Path) -> None:
    # The KFP v2 compiler writes the type name as the schema title; the KFP UI renders
    # system.HTML artifacts by reading the file at the artifact URI.
    schema = yaml.safe_load(compiler_utils.get_artifact_schema(HtmlReport))
    assert schema["title"] == "system.HTML"
    assert issubclass(HtmlReport, value_artifact.ValueArtifact)
    report = HtmlReport()
    report.uri = str(tmp_path / "value")
    report.value = "<p>nDCG — 0.5</p>"
    assert (tmp_path / "value").read_bytes() == "<p>nDCG — 0.5</p>".encode()
    again = HtmlReport()
    again.uri = report.uri
    assert again.read() == "<p>nDCG — 0.5</p>"


def test_kubeflow_ui_artifact_types() -> None:
    # The KFP UI picks its viewer by MLMD type name, which the launcher takes from the title.
    titles = {
        cls: yaml.safe_load(compiler_utils.get_artifact_schema(cls))["title"]
        for cls in (HtmlReport, MarkdownReport, ScalarMetrics)
    }
    assert titles == {
        HtmlReport: "system.HTML",
        MarkdownReport: "system.Markdown",
        ScalarMetrics: "system.Metrics",
    }
    assert issubclass(MarkdownReport, value_artifact.ValueArtifact)
    assert not issubclass(ScalarMetrics, value_artifact.ValueArtifact)
