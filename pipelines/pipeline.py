"""The rankpipe DAG.

[CorpusEncoder ->] RankingDataGen -> StatisticsGen -> ImportSchemaGen -> ExampleValidator ->
ExampleGate -> Trainer -> RankingEvaluator (baseline: the model served under
pusher.destination) -> Pusher

The baseline is found by the evaluator itself (components/ranking_evaluator/baseline.py), not
by a TFX Resolver: the open-source KFP backend cannot run resolver nodes, so one mechanism
serves LocalDagRunner, Kubeflow and Vertex alike.

Which components, in which order and how each is wired is pipelines/component_table.py (the
CorpusEncoder only when a config needs corpus vectors: its row's `include`); this module builds
them and the TFX Pipeline around them.
"""

from __future__ import annotations

import dataclasses
import importlib
from pathlib import Path
from typing import Any

from tfx import v1 as tfx
from tfx.dsl.components.base import executor_spec

from pipelines.component_table import COMPONENTS, Wiring
from pipelines.config import PipelineConfig
from rankcore.config_loader import ConfigError

SCHEMA_FILE = (
    Path(__file__).resolve().parent.parent / "schemas" / "ranking_examples" / "schema.pbtxt"
)


def import_path(path: str) -> Any:
    """The class at an import path ("package.module.Class")."""
    module, name = path.rsplit(".", 1)
    return getattr(importlib.import_module(module), name)


# The Trainer's class when runner.kubeflow.trainer_replicas.count > 1, by backend.
REPLICA_TRAINERS = {
    "tfjob": "components.trainer_replicas.component.TFJobTrainer",
    "vertex": "components.trainer_replicas.vertex.VertexReplicaTrainer",
}


def trainer_replicas(config: PipelineConfig, row_id: str, args: dict) -> tuple[str, dict] | None:
    """(class path, constructor arguments) of the Trainer run as replicas, for a Kubeflow /
    Vertex spec with runner.kubeflow.trainer_replicas.count > 1; None otherwise. The arguments
    are the Trainer's with the replicas' settings added to its custom_config (TFJob: ours;
    Vertex: those TFX's Vertex Trainer extension reads)."""
    settings = config.runner.kubeflow.trainer_replicas
    if row_id != "Trainer" or not settings.enabled:
        return None
    if config.trainer.batch_size % settings.count:
        raise ConfigError(
            f"{config.source}: trainer.batch_size={config.trainer.batch_size} (the global batch) "
            f"is not divisible by runner.kubeflow.trainer_replicas.count={settings.count}"
        )
    from pipelines import image_tag

    # The image every other task runs (compile appends the source tag to an untagged one).
    image = image_tag.with_tag(config.runner.image)
    if settings.backend == "vertex":
        from components.trainer_replicas.vertex import vertex_custom_config

        extra = vertex_custom_config(settings, image)
    else:
        from components.trainer_replicas.executor import TFJOB_KEY

        extra = {
            TFJOB_KEY: {
                "replicas": dataclasses.asdict(settings),
                "image": image,
                "pipeline_name": config.runner.pipeline_name,
            }
        }
    args = {**args, "custom_config": {**args["custom_config"], **extra}}
    return REPLICA_TRAINERS[settings.backend], args


def create_components(
    config: PipelineConfig, schema_file: str | None = None, kubeflow: bool = False
) -> list:
    """The pipeline's components, wired as pipelines/component_table.py says, in its order;
    `create_pipeline` adds the runner-level settings.

    `schema_file`: where the components will read the examples' schema (default: this
    checkout's; the Kubeflow compiler passes the path inside the image). `kubeflow`: a spec
    for Kubeflow / Vertex, where runner.kubeflow.trainer_replicas picks the Trainer's class
    (a local run trains in one process)."""
    wiring = Wiring(config, {}, schema_file or str(SCHEMA_FILE))
    for row in COMPONENTS:
        if not row.included(config):
            continue
        component_class = import_path(row.component_class)
        executor = import_path(row.executor_class) if row.executor_class else None
        # A per_fold row (the Trainer) is built again for each cross-validation fold branch.
        for fold, node_id in row.nodes(wiring.num_folds):
            args = row.args(dataclasses.replace(wiring, fold=fold))
            replicated = trainer_replicas(config, row.id, args) if kubeflow else None
            if replicated is not None:
                component = import_path(replicated[0])(**replicated[1])
            else:
                component = component_class(**args)
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
    kubeflow: bool = False,
) -> tfx.dsl.Pipeline:
    """Builds the TFX pipeline for a loaded config (see pipelines/config.py).

    `schema_file` and `beam_pipeline_args` override what suits a run on this machine (the
    Kubeflow compiler passes in-image paths and unresolved worker counts); `kubeflow` (the
    compiler) builds the Trainer as runner.kubeflow.trainer_replicas says."""
    return tfx.dsl.Pipeline(
        pipeline_name=config.runner.pipeline_name,
        pipeline_root=config.runner.pipeline_root,
        components=create_components(config, schema_file, kubeflow),
        enable_cache=config.runner.enable_cache,
        metadata_connection_config=metadata_connection_config,
        beam_pipeline_args=(
            config.runner.beam.pipeline_args() if beam_pipeline_args is None else beam_pipeline_args
        ),
    )
