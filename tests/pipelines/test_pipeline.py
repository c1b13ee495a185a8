"""Pipeline assembly (no component runs here; compilation: test_kubeflow_runner.py)."""

from __future__ import annotations

import json
from pathlib import Path

from pipelines.config import COMPONENT_IDS, load_config
from pipelines.pipeline import SCHEMA_FILE, create_pipeline

COMPONENTS = list(COMPONENT_IDS)


def test_create_pipeline_wires_every_component(shared_data: Path) -> None:
    config = load_config("cranfield-knrm")
    pipeline = create_pipeline(config)
    ids = [c.id for c in pipeline.components]
    assert sorted(ids) == sorted(COMPONENTS) == sorted(COMPONENT_IDS)
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
