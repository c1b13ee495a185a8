"""Pipeline assembly (no component runs here; compilation: test_kubeflow_runner.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from pipelines import component_table
from pipelines.config import COMPONENT_IDS, REPO_ROOT, load_config
from pipelines.pipeline import SCHEMA_FILE, create_components, create_pipeline

COMPONENTS = list(COMPONENT_IDS)


def test_create_pipeline_wires_every_component(shared_data: Path) -> None:
    config = load_config("cranfield-knrm")
    pipeline = create_pipeline(config)
    ids = [c.id for c in pipeline.components]
    assert sorted(ids) == sorted(COMPONENTS) == sorted(COMPONENT_IDS)
    # Built in the table's order (the Pipeline sorts them topologically).
    assert [c.id for c in create_components(config)] == list(COMPONENT_IDS)
    assert pipeline.enable_cache
    assert f"--direct_running_mode={config.runner.beam.direct_running_mode}" in (
        pipeline.beam_pipeline_args
    )
    by_id = {c.id: c for c in pipeline.components}
    # No Resolver: the evaluator finds its baseline, the model served, under the Pusher's
    # destination. The Pusher obeys the evaluator's blessing; the Trainer waits for the gate.
    evaluator = by_id["RankingEvaluator"]
    assert "baseline_model" not in evaluator.inputs
    assert evaluator.exec_properties["push_destination"] == config.pusher.destination
    assert by_id["Pusher"].inputs["model_blessing"].producer_component_id == "RankingEvaluator"
    assert "ExampleGate" in {node.id for node in by_id["Trainer"].upstream_nodes}
    assert SCHEMA_FILE.exists()
    assert by_id["ImportSchemaGen"].exec_properties["schema_file"] == str(SCHEMA_FILE)
    # The model card's config is the config, without where the file was on this machine.
    card_config = json.loads(by_id["Pusher"].exec_properties["model_card_config"])
    assert "source" not in card_config and card_config["runner"]["pipeline_name"]


def test_the_component_table_is_read_without_tfx() -> None:
    """The KFP entrypoint reads the table in every task's container before TFX's imports (their
    time is reported apart): neither the table nor the entrypoint module may import TFX, TF or
    ml_metadata."""
    code = (
        "import sys, pipelines.kfp_entrypoint, pipelines.component_table\n"
        "print(sorted(m for m in ('tfx', 'tensorflow', 'ml_metadata') if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "[]"
    rows = component_table.COMPONENTS
    assert set(component_table.DISPLAY_NAMES) == set(COMPONENT_IDS) == {r.id for r in rows}
    # Every artifact type title has one row introducing it.
    titles = [t for r in rows for t in r.artifact_types]
    assert len(titles) == len(set(titles)) == len(component_table.ARTIFACT_TYPES)
