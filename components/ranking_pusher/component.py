"""RankingPusher: the standard TFX Pusher with never-overwrite versions and a model card."""

from __future__ import annotations

import json
from typing import Any

from tfx import types
from tfx.components.pusher import component as pusher_component
from tfx.dsl.components.base import base_component, executor_spec
from tfx.proto import pusher_pb2
from tfx.types import component_spec, standard_artifacts, standard_component_specs

from components import artifacts
from components.ranking_pusher import executor


class RankingPusherSpec(standard_component_specs.PusherSpec):
    """PusherSpec plus what the model card is made of."""

    PARAMETERS = {
        **standard_component_specs.PusherSpec.PARAMETERS,
        # JSON of the pipeline config (pipelines.config.PipelineConfig as a dict).
        executor.MODEL_CARD_CONFIG_KEY: component_spec.ExecutionParameter(type=str, optional=True),
    }
    INPUTS = {
        **standard_component_specs.PusherSpec.INPUTS,
        executor.EVALUATION_KEY: component_spec.ChannelParameter(
            type=standard_artifacts.ModelEvaluation, optional=True
        ),
        executor.DATAGEN_SUMMARY_KEY: component_spec.ChannelParameter(
            type=artifacts.DatagenSummary, optional=True
        ),
    }


class RankingPusher(pusher_component.Pusher):
    """Pushes a blessed model to `<base_directory>/<version>/` (TF Serving's layout) and writes
    model_card.md and model_card.json beside its saved_model.pb.

    A drop-in for `tfx.components.Pusher` with a filesystem destination: same blessing check,
    same `pushed_model` output and custom properties (`pushed`, `pushed_destination`,
    `pushed_version`, plus `model_card`). A version directory is never overwritten.
    """

    SPEC_CLASS = RankingPusherSpec
    EXECUTOR_SPEC = executor_spec.ExecutorClassSpec(executor.Executor)

    def __init__(
        self,
        model: types.BaseChannel,
        model_blessing: types.BaseChannel,
        push_destination: pusher_pb2.PushDestination,
        evaluation: types.BaseChannel | None = None,
        datagen_summary: types.BaseChannel | None = None,
        model_card_config: dict[str, Any] | None = None,
    ):
        if push_destination.WhichOneof("destination") != "filesystem":
            raise ValueError("RankingPusher needs a filesystem push_destination")
        # Pusher.__init__ builds a plain PusherSpec; this spec has the card's inputs too.
        base_component.BaseComponent.__init__(
            self,
            spec=RankingPusherSpec(
                model=model,
                model_blessing=model_blessing,
                push_destination=push_destination,
                evaluation=evaluation,
                datagen_summary=datagen_summary,
                model_card_config=json.dumps(model_card_config, sort_keys=True, default=str),
                pushed_model=types.Channel(type=standard_artifacts.PushedModel),
            ),
        )
