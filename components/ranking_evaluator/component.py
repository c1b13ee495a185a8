"""RankingEvaluator: reranks held-out queries, computes trec_eval metrics, blesses or rejects."""

from __future__ import annotations

import json

from tfx import types
from tfx.dsl.components.base import base_beam_component, executor_spec
from tfx.types import component_spec, standard_artifacts, value_artifact

from components import artifacts
from components.ranking_evaluator import executor


class HtmlReport(value_artifact.ValueArtifact):
    """A self-contained HTML page, stored as one file at the artifact's URI.

    The type name is KFP's `system.HTML`: the Kubeflow Pipelines (v2) UI renders artifacts of
    that type in its Visualization tab by reading the file at the URI, which is why this is a
    ValueArtifact (a file at the URI) rather than a directory artifact.
    """

    TYPE_NAME = "system.HTML"

    def encode(self, value: str) -> bytes:
        return value.encode("utf-8")

    def decode(self, serialized_value: bytes) -> str:
        return serialized_value.decode("utf-8")


class RankingEvaluatorSpec(types.ComponentSpec):
    PARAMETERS = {
        # JSON of pipelines.config.EvaluatorConfig.
        "evaluator": component_spec.ExecutionParameter(type=str),
    }
    INPUTS = {
        "examples": component_spec.ChannelParameter(type=standard_artifacts.Examples),
        "model": component_spec.ChannelParameter(type=standard_artifacts.Model),
        "qrels": component_spec.ChannelParameter(type=artifacts.Qrels),
        "first_stage_run": component_spec.ChannelParameter(type=artifacts.TrecRun),
        "baseline_model": component_spec.ChannelParameter(
            type=standard_artifacts.Model, optional=True
        ),
    }
    OUTPUTS = {
        "evaluation": component_spec.ChannelParameter(type=standard_artifacts.ModelEvaluation),
        "blessing": component_spec.ChannelParameter(type=standard_artifacts.ModelBlessing),
        "candidate_run": component_spec.ChannelParameter(type=artifacts.TrecRun),
        "report": component_spec.ChannelParameter(type=HtmlReport),
    }


class RankingEvaluator(base_beam_component.BaseBeamComponent):
    """Scores every first-stage candidate of the eval split with the model (and the baseline),
    writes TREC runs, trec_eval-exact metrics, paired significance tests, a report, and a
    standard ModelBlessing that the Pusher and the latest-blessed-model Resolver understand.

    `evaluator` is pipelines.config.EvaluatorConfig as a dict; see docs/evaluator.md.
    """

    SPEC_CLASS = RankingEvaluatorSpec
    EXECUTOR_SPEC = executor_spec.BeamExecutorSpec(executor.Executor)

    def __init__(
        self,
        examples: types.BaseChannel,
        model: types.BaseChannel,
        qrels: types.BaseChannel,
        first_stage_run: types.BaseChannel,
        evaluator: dict,
        baseline_model: types.BaseChannel | None = None,
    ):
        super().__init__(
            spec=RankingEvaluatorSpec(
                examples=examples,
                model=model,
                qrels=qrels,
                first_stage_run=first_stage_run,
                baseline_model=baseline_model,
                evaluator=json.dumps(evaluator, sort_keys=True),
                evaluation=types.Channel(type=standard_artifacts.ModelEvaluation),
                blessing=types.Channel(type=standard_artifacts.ModelBlessing),
                candidate_run=types.Channel(type=artifacts.TrecRun),
                report=types.Channel(type=HtmlReport),
            )
        )
