"""The rankpipe DAG.

RankingDataGen -> StatisticsGen -> ImportSchemaGen -> ExampleValidator -> ExampleGate ->
Trainer -> RankingEvaluator (baseline: the model served under pusher.destination) -> Pusher

The baseline is found by the evaluator itself (components/ranking_evaluator/baseline.py), not
by a TFX Resolver: the open-source KFP backend cannot run resolver nodes, so one mechanism
serves LocalDagRunner, Kubeflow and Vertex alike.

Which components, in which order and how each is wired is pipelines/component_table.py; this
module builds them and the TFX Pipeline around them.
"""

from __future__ import annotations

import dataclasses
import importlib
from pathlib import Path

from tfx import v1 as tfx
from tfx.dsl.components.base import executor_spec

from pipelines.component_table import COMPONENTS, Wiring
from pipelines.config import PipelineConfig

SCHEMA_FILE = (
    Path(__file__).resolve().parent.parent / "schemas" / "ranking_examples" / "schema.pbtxt"
)


def _import(path: str):
    """The class at an import path ("package.module.Class")."""
    module, name = path.rsplit(".", 1)
    return getattr(importlib.import_module(module), name)


def create_components(config: PipelineConfig, schema_file: str | None = None) -> list:
    """The pipeline's components, wired as pipelines/component_table.py says, in its order;
    `create_pipeline` adds the runner-level settings.

    `schema_file`: where the components will read the examples' schema (default: this
    checkout's; the Kubeflow compiler passes the path inside the image)."""
    wiring = Wiring(config, {}, schema_file or str(SCHEMA_FILE))
    for row in COMPONENTS:
        component_class = _import(row.component_class)
        executor = _import(row.executor_class) if row.executor_class else None
        # A per_fold row (the Trainer) is built again for each cross-validation fold branch.
        for fold, node_id in row.nodes(wiring.num_folds):
            component = component_class(**row.args(dataclasses.replace(wiring, fold=fold)))
            if executor is not None:
                component.executor_spec = executor_spec.BeamExecutorSpec(executor)
            for upstream in row.after:
                component.add_upstream_node(wiring.built[upstream])
            if component.id != node_id:
                component = component.with_id(node_id)
            wiring.built[node_id] = component
    return list(wiring.built.values())


def create_pipeline(
    config: PipelineConfig,
    metadata_connection_config=None,
    schema_file: str | None = None,
    beam_pipeline_args: list[str] | None = None,
) -> tfx.dsl.Pipeline:
    """Builds the TFX pipeline for a loaded config (see pipelines/config.py).

    `schema_file` and `beam_pipeline_args` override what suits a run on this machine (the
    Kubeflow compiler passes in-image paths and unresolved worker counts)."""
    return tfx.dsl.Pipeline(
        pipeline_name=config.runner.pipeline_name,
        pipeline_root=config.runner.pipeline_root,
        components=create_components(config, schema_file),
        enable_cache=config.runner.enable_cache,
        metadata_connection_config=metadata_connection_config,
        beam_pipeline_args=(
            config.runner.beam.pipeline_args() if beam_pipeline_args is None else beam_pipeline_args
        ),
    )
