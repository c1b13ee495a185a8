"""The RankingEvaluator's marshalling: Executor.Do reads its artifacts into a plain
EvaluationRequest (request.py, inputs.py) and records the artifacts' properties from the
metrics.json evaluation.evaluate returns, without Beam or a model."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from demo_pipeline import artifact
from tfx.types import artifact_utils, standard_artifacts

from components import artifacts
from components.ranking_evaluator import executor, inputs
from components.ranking_evaluator.component import HtmlReport, MarkdownReport, ScalarMetrics
from components.ranking_evaluator.config import EvaluatorConfig
from components.ranking_evaluator.outputs import Reports
from components.ranking_evaluator.request import EvaluationRequest
from rankcore import folds, lineage


def _input_dict(tmp_path: Path, k: int = 0) -> dict:
    examples = artifact(
        standard_artifacts.Examples,
        str(tmp_path / "examples"),
        split_names=artifact_utils.encode_split_names(["train", "dev", "test"]),
    )
    examples.set_string_custom_property(lineage.RECORD_KEY, '{"vocabulary": "v1"}')
    model = artifact(standard_artifacts.Model, str(tmp_path / "model"))
    model.id = 42
    found = {
        "examples": [examples],
        "model": [model],
        "qrels": [artifact(artifacts.Qrels, str(tmp_path / "qrels"))],
        "first_stage_run": [artifact(artifacts.TrecRun, str(tmp_path / "run"))],
        "model_run": [artifact(standard_artifacts.ModelRun, str(tmp_path / "model_run"))],
    }
    for i in range(k):
        found[f"fold_model_{i}"] = [artifact(standard_artifacts.Model, str(tmp_path / f"m{i}"))]
    return found


def _output_dict(tmp_path: Path) -> dict:
    return {
        name: [artifact(cls, str(tmp_path / name))]
        for name, cls in (
            ("evaluation", standard_artifacts.ModelEvaluation),
            ("blessing", standard_artifacts.ModelBlessing),
            ("candidate_run", artifacts.TrecRun),
            ("report", HtmlReport),
            ("report_markdown", MarkdownReport),
            ("metrics", ScalarMetrics),
        )
    }


def test_the_request_holds_the_artifacts_paths(tmp_path: Path) -> None:
    config = {"split": "dev"}
    request = executor._request(
        _input_dict(tmp_path),
        _output_dict(tmp_path),
        {"evaluator": json.dumps(config), "push_destination": None},
    )
    assert request.config == EvaluatorConfig.from_dict(config)
    assert request.split_uris == {
        s: str(tmp_path / "examples" / f"Split-{s}") for s in ("train", "dev", "test")
    }
    assert inputs.examples_lineage(request.examples_lineage) == {"vocabulary": "v1"}
    assert (request.model_uri, request.model_id) == (str(tmp_path / "model"), 42)
    assert request.model_dir == str(tmp_path / "model" / "Format-Serving")
    assert request.model_run == str(tmp_path / "model_run")
    assert request.push_destination == ""
    assert request.ui_metrics_dir == str(tmp_path / "metrics")
    assert request.split_label == "dev"
    assert inputs.parts(request) == [
        inputs.Part(None, "dev", request.model_dir, str(tmp_path / "model_run"))
    ]
    with pytest.raises(ValueError, match="Expected exactly one artifact with split 'eval'"):
        request.split_uri("eval")


def test_each_fold_is_ranked_by_its_branch_model_and_a_missing_one_is_named(
    tmp_path: Path,
) -> None:
    config = json.dumps({"cross_validation": {"folds": 3}})
    request = executor._request(
        _input_dict(tmp_path, 3), _output_dict(tmp_path), {"evaluator": config}
    )
    assert request.split_label == "all (3-fold cross-validation)"
    assert [(p.fold, p.split, p.model_run) for p in inputs.parts(request)] == [
        (i, folds.split_name(i, folds.EVAL), None) for i in range(3)
    ]
    request = executor._request(
        _input_dict(tmp_path, 2), _output_dict(tmp_path), {"evaluator": config}
    )
    with pytest.raises(ValueError, match="input 'fold_model_2' .* is not wired"):
        inputs.parts(request)


def test_examples_without_a_readable_lineage_record_have_none() -> None:
    assert inputs.examples_lineage("") is None
    assert inputs.examples_lineage("not json") is None


def test_artifact_properties_come_from_metrics_json(tmp_path: Path) -> None:
    outputs = _output_dict(tmp_path)
    for name in ("report", "report_markdown"):
        tmp_path.joinpath(name).mkdir()
        outputs[name][0].uri = str(tmp_path / name / "value")
    metrics = {
        "split": "test",
        "main_metric": "map",
        "num_queries": 5,
        "blessed": True,
        "aggregate": {"first_stage": {"map": 0.25}, "candidate": {"map": 0.5}},
        "model": "/models/7",
        "baseline_model": "/serving/3",
        "baseline_version": 3,
    }
    executor._record(Reports(metrics, "<p>html</p>", "# md", {"map (candidate)": 0.5}), outputs)

    def props(name: str) -> dict:
        artifact = outputs[name][0]
        return {
            k: artifact.get_custom_property(k) for k in artifact.mlmd_artifact.custom_properties
        }

    assert props("candidate_run") == {"split": "test", "run_id": "candidate", "num_queries": 5}
    assert props("evaluation") == {
        "blessed": 1,
        "main_metric": "map",
        "first_stage_map": 0.25,
        "candidate_map": 0.5,
    }
    assert props("blessing") == {
        "blessed": 1,
        "current_model": "/models/7",
        "baseline_model": "/serving/3",
        "baseline_version": 3,
    }
    assert props("metrics") == {"display_name": "Ranking metrics", "map (candidate)": 0.5}
    assert (tmp_path / "report" / "value").read_text() == "<p>html</p>"
    assert (tmp_path / "report_markdown" / "value").read_text() == "# md"


def test_a_request_is_plain_values() -> None:
    request = EvaluationRequest(
        config=EvaluatorConfig(),
        examples_uri="e",
        split_uris={"test": "e/Split-test"},
        examples_lineage="",
        model_uri="m",
        model_id=1,
        model_dir="m/Format-Serving",
        model_run=None,
        qrels_uri="q",
        first_stage_run_uri="r",
        push_destination="",
        evaluation_dir="out/evaluation",
        blessing_dir="out/blessing",
        candidate_run_dir="out/candidate_run",
    )
    assert request.split_uri("test") == "e/Split-test"
    assert request.fold_models == {} and request.ui_metrics_dir is None
