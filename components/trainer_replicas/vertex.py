"""The Trainer run as replicas on Vertex AI: TFX's Vertex AI Trainer extension, whose CustomJob
runs replica.ReplicaExecutor in every worker pool (apart from executor.py: importing the
extension imports google-cloud-aiplatform, which the TFJob path does not need)."""

from __future__ import annotations

from typing import Any

from tfx.dsl.components.base import executor_spec
from tfx.extensions.google_cloud_ai_platform import constants
from tfx.extensions.google_cloud_ai_platform.trainer import executor as vertex_executor

from components.ranking_trainer.component import RankingTrainer
from components.trainer_replicas import replica
from components.trainer_replicas.config import TrainerReplicasConfig

ENABLE_VERTEX_KEY = constants.ENABLE_VERTEX_KEY
VERTEX_REGION_KEY = constants.VERTEX_REGION_KEY
TRAINING_ARGS_KEY = vertex_executor.TRAINING_ARGS_KEY


def worker_pool_specs(settings: TrainerReplicasConfig, image: str) -> list[dict[str, Any]]:
    """Vertex AI's worker pools: pool 0 the chief (1 replica), pool 1 the count - 1 workers;
    Vertex sets TF_CONFIG (chief / worker) for each. TFX's extension sets every pool's
    container command to its run_executor over this execution's input."""
    machine: dict[str, Any] = {"machine_type": settings.vertex_machine_type}
    if settings.accelerator_type:
        machine["accelerator_type"] = settings.accelerator_type
        machine["accelerator_count"] = settings.accelerator_count or 1
    pool = {"machine_spec": machine, "container_spec": {"image_uri": image}}
    pools = [{**pool, "replica_count": 1}]
    if settings.count > 1:
        pools.append({**pool, "replica_count": settings.count - 1})
    return pools


def vertex_custom_config(settings: TrainerReplicasConfig, image: str) -> dict[str, Any]:
    """The custom_config entries TFX's Vertex Trainer extension reads."""
    return {
        ENABLE_VERTEX_KEY: True,
        VERTEX_REGION_KEY: settings.vertex_region,
        TRAINING_ARGS_KEY: {
            "project": settings.vertex_project,
            "job_spec": {"worker_pool_specs": worker_pool_specs(settings, image)},
        },
    }


class VertexTrainerExecutor(vertex_executor.GenericExecutor):
    """TFX's Vertex extension executor; its replicas run replica.ReplicaExecutor (TFX's
    GenericExecutor, the non-chief replicas into scratch outputs)."""

    def _GetExecutorClass(self) -> type:
        return replica.ReplicaExecutor


class VertexReplicaTrainer(RankingTrainer):
    """The RankingTrainer (TFX's Trainer spec and the optional corpus vectors) with
    VertexTrainerExecutor, as `tfx.extensions.google_cloud_ai_platform.Trainer` is TFX's
    Trainer with its executor."""

    EXECUTOR_SPEC = executor_spec.ExecutorClassSpec(VertexTrainerExecutor)
