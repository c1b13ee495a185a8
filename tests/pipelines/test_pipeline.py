"""Pipeline assembly and Kubeflow compilation (no component runs here)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import yaml
from google.protobuf import json_format
from kfp.pipeline_spec import pipeline_spec_pb2

from pipelines.config import load_config
from pipelines.pipeline import SCHEMA_FILE, create_pipeline

COMPONENTS = [
    "RankingDataGen",
    "StatisticsGen",
    "ImportSchemaGen",
    "ExampleValidator",
    "ExampleGate",
    "Trainer",
    "RankingEvaluator",
    "Pusher",
]


def test_create_pipeline_wires_every_component(shared_data: Path) -> None:
    config = load_config("cranfield")
    pipeline = create_pipeline(config)
    ids = [c.id for c in pipeline.components]
    assert set(COMPONENTS) <= set(ids)
    assert "latest_blessed_model_resolver" in ids
    assert pipeline.enable_cache
    assert f"--direct_running_mode={config.runner.beam.direct_running_mode}" in (
        pipeline.beam_pipeline_args
    )
    by_id = {c.id: c for c in pipeline.components}
    # The evaluator's baseline is the resolver's latest blessed model; the Pusher obeys the
    # evaluator's blessing; the Trainer waits for the anomaly gate.
    evaluator_inputs = by_id["RankingEvaluator"].inputs
    assert evaluator_inputs["baseline_model"].producer_component_id == (
        "latest_blessed_model_resolver"
    )
    assert by_id["Pusher"].inputs["model_blessing"].producer_component_id == "RankingEvaluator"
    assert "ExampleGate" in {node.id for node in by_id["Trainer"].upstream_nodes}
    assert SCHEMA_FILE.exists()


def test_compile_writes_a_kfp_pipeline_spec(tmp_path: Path, shared_data: Path) -> None:
    output = tmp_path / "p.yaml"
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pipelines.cli",
            "compile",
            "pipelines/configs/cranfield.yaml",
            "--output",
            str(output),
        ],
        cwd=Path(__file__).resolve().parents[2],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    spec = json_format.ParseDict(
        yaml.safe_load(output.read_text()), pipeline_spec_pb2.PipelineSpec()
    )
    assert spec.pipeline_info.name == "rankpipe-cranfield"
    tasks = set(spec.root.dag.tasks)
    assert set(COMPONENTS) <= tasks
    assert any(t.startswith("latest_blessed_model_resolver") for t in tasks)
    executors = json_format.MessageToDict(spec.deployment_spec)["executors"]
    assert executors["Trainer_executor"]["container"]["image"] == "rankpipe:latest"
