"""RankingTrainer: the standard TFX Trainer (same inputs, outputs, run_fn and exec properties)
plus two optional inputs: `corpus_vectors` (rankpipe.CorpusVectors, the CorpusEncoder's output)
and `qrels` (RankingDataGen's judgments: the dev split's are what the dev metric counts).

TFX's Trainer builds its TrainerSpec inside __init__, so a subclass cannot add an input by
extending the spec alone: this class builds RankingTrainerSpec (TrainerSpec's parameters and
channels, and corpus_vectors) with the same arguments TFX's Trainer takes. The replicated
Trainers (components/trainer_replicas: TFJob, Vertex AI) subclass it with their executors.
"""

from __future__ import annotations

from typing import Any

from tfx import types
from tfx.components.trainer import component as trainer_component
from tfx.dsl.components.base import base_component, executor_spec
from tfx.proto import trainer_pb2
from tfx.types import component_spec, standard_artifacts, standard_component_specs
from tfx.utils import json_utils

from components import artifacts
from components.ranking_trainer import executor
from components.ranking_trainer.executor import CORPUS_VECTORS_KEY, QRELS_KEY

# The inputs RankingTrainer (and components/ranking_tuner's RankingTuner) add to TFX's spec.
EXTRA_INPUTS = {
    CORPUS_VECTORS_KEY: component_spec.ChannelParameter(
        type=artifacts.CorpusVectors, optional=True
    ),
    QRELS_KEY: component_spec.ChannelParameter(type=artifacts.Qrels, optional=True),
}


def extra_input_args(
    corpus_vectors: types.BaseChannel | None, qrels: types.BaseChannel | None
) -> dict[str, Any]:
    """The spec's arguments for the optional inputs: those that are wired."""
    given = {CORPUS_VECTORS_KEY: corpus_vectors, QRELS_KEY: qrels}
    return {key: channel for key, channel in given.items() if channel is not None}


class RankingTrainerSpec(standard_component_specs.TrainerSpec):
    """TrainerSpec with the optional corpus vectors and qrels inputs."""

    INPUTS = {**standard_component_specs.TrainerSpec.INPUTS, **EXTRA_INPUTS}


class RankingTrainer(trainer_component.Trainer):
    """`tfx.components.Trainer` (run_fn, examples, transform_graph, schema, hyperparameters,
    train_args, eval_args, custom_config) whose run_fn also gets the corpus vectors' URI in
    custom_config["corpus_vectors_uri"] when `corpus_vectors` is given, and the qrels' in
    custom_config["qrels_uri"] when `qrels` is."""

    SPEC_CLASS = RankingTrainerSpec
    EXECUTOR_SPEC = executor_spec.ExecutorClassSpec(executor.Executor)

    def __init__(
        self,
        examples: types.BaseChannel,
        run_fn: str,
        transform_graph: types.BaseChannel | None = None,
        schema: types.BaseChannel | None = None,
        train_args: trainer_pb2.TrainArgs | None = None,
        eval_args: trainer_pb2.EvalArgs | None = None,
        custom_config: dict[str, Any] | None = None,
        corpus_vectors: types.BaseChannel | None = None,
        hyperparameters: types.BaseChannel | None = None,
        qrels: types.BaseChannel | None = None,
    ):
        spec = RankingTrainerSpec(
            examples=examples,
            transform_graph=transform_graph,
            schema=schema,
            hyperparameters=hyperparameters,
            train_args=train_args or trainer_pb2.TrainArgs(),
            eval_args=eval_args or trainer_pb2.EvalArgs(),
            run_fn=run_fn,
            custom_config=json_utils.dumps(custom_config),
            model=types.Channel(type=standard_artifacts.Model),
            model_run=types.Channel(type=standard_artifacts.ModelRun),
            **extra_input_args(corpus_vectors, qrels),
        )
        # TFX's Trainer.__init__ would build a TrainerSpec; the base component takes ours.
        base_component.BaseComponent.__init__(self, spec=spec)
