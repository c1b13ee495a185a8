"""TFJobTrainer: the standard TFX Trainer (same spec, inputs, outputs and run_fn) whose
executor runs the training as a Kubeflow Training Operator TFJob of N replicas."""

from __future__ import annotations

from tfx.components.trainer import component as trainer_component
from tfx.dsl.components.base import executor_spec

from components.trainer_replicas import executor


class TFJobTrainer(trainer_component.Trainer):
    """`tfx.components.Trainer` with executor.TFJobTrainerExecutor; the TFJob's settings come
    in custom_config[executor.TFJOB_KEY]."""

    EXECUTOR_SPEC = executor_spec.ExecutorClassSpec(executor.TFJobTrainerExecutor)
