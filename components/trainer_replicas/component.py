"""TFJobTrainer: the RankingTrainer (TFX's Trainer spec, inputs, outputs and run_fn, and the
optional corpus vectors) whose executor runs the training as a Kubeflow Training Operator TFJob
of N replicas."""

from __future__ import annotations

from tfx.dsl.components.base import executor_spec

from components.ranking_trainer.component import RankingTrainer
from components.trainer_replicas import executor


class TFJobTrainer(RankingTrainer):
    """components.ranking_trainer's RankingTrainer with executor.TFJobTrainerExecutor; the
    TFJob's settings come in custom_config[executor.TFJOB_KEY]."""

    EXECUTOR_SPEC = executor_spec.ExecutorClassSpec(executor.TFJobTrainerExecutor)
