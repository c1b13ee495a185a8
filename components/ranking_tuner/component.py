"""RankingTuner: the standard TFX Tuner (same inputs, outputs, tuner_fn and exec properties)
plus the optional `corpus_vectors` and `qrels` inputs, as RankingTrainer adds them (TFX's Tuner
builds its TunerSpec inside __init__, so this class builds RankingTunerSpec with the same
arguments)."""

from __future__ import annotations

from typing import Any

from tfx import types
from tfx.components.tuner import component as tuner_component
from tfx.dsl.components.base import base_component, executor_spec
from tfx.proto import trainer_pb2
from tfx.types import standard_artifacts, standard_component_specs
from tfx.utils import json_utils

from components.ranking_trainer.component import EXTRA_INPUTS, extra_input_args
from components.ranking_tuner import executor


class RankingTunerSpec(standard_component_specs.TunerSpec):
    """TunerSpec with the optional corpus vectors and qrels inputs."""

    INPUTS = {**standard_component_specs.TunerSpec.INPUTS, **EXTRA_INPUTS}


class RankingTuner(tuner_component.Tuner):
    """`tfx.components.Tuner` (tuner_fn, examples, transform_graph, schema, train_args,
    eval_args, custom_config) whose tuner_fn also gets the corpus vectors' URI in
    custom_config["corpus_vectors_uri"] when `corpus_vectors` is given, the qrels' in
    custom_config["qrels_uri"] when `qrels` is."""

    SPEC_CLASS = RankingTunerSpec
    EXECUTOR_SPEC = executor_spec.ExecutorClassSpec(executor.Executor)

    def __init__(
        self,
        examples: types.BaseChannel,
        tuner_fn: str,
        transform_graph: types.BaseChannel | None = None,
        schema: types.BaseChannel | None = None,
        train_args: trainer_pb2.TrainArgs | None = None,
        eval_args: trainer_pb2.EvalArgs | None = None,
        custom_config: dict[str, Any] | None = None,
        corpus_vectors: types.BaseChannel | None = None,
        qrels: types.BaseChannel | None = None,
    ):
        spec = RankingTunerSpec(
            examples=examples,
            schema=schema,
            transform_graph=transform_graph,
            tuner_fn=tuner_fn,
            train_args=train_args or trainer_pb2.TrainArgs(),
            eval_args=eval_args or trainer_pb2.EvalArgs(),
            custom_config=json_utils.dumps(custom_config),
            best_hyperparameters=types.Channel(type=standard_artifacts.HyperParameters),
            tuner_results=types.Channel(type=standard_artifacts.TunerResults),
            **extra_input_args(corpus_vectors, qrels),
        )
        # TFX's Tuner.__init__ would build a TunerSpec; the base component takes ours.
        base_component.BaseComponent.__init__(self, spec=spec)
