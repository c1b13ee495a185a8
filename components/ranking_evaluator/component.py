"""RankingEvaluator: reranks held-out queries, computes trec_eval metrics, blesses or rejects."""

from __future__ import annotations

import json

from tfx import types
from tfx.dsl.components.base import base_beam_component, executor_spec
from tfx.types import component_spec, standard_artifacts, value_artifact

from components import artifacts
from components.ranking_evaluator import executor
from components.ranking_evaluator.constants import CORPUS_VECTORS, FOLD_MODEL, FOLD_MODEL_RUN
from rankcore import folds


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


class MarkdownReport(HtmlReport):
    """The Markdown report as one file at the URI: KFP's `system.Markdown`, which the Kubeflow
    Pipelines UI renders in its Visualization tab like `system.HTML`."""

    TYPE_NAME = "system.Markdown"


class ScalarMetrics(types.Artifact):
    """KFP's `system.Metrics`: the Kubeflow Pipelines UI shows the artifact's numeric custom
    properties as a table of scalars (the main measures, named "<measure> (<system>)"); the
    directory at the URI holds the same values as `metrics.json`."""

    TYPE_NAME = "system.Metrics"


class RankingEvaluatorSpec(types.ComponentSpec):
    PARAMETERS = {
        # JSON of components.ranking_evaluator.config.EvaluatorConfig.
        "evaluator": component_spec.ExecutionParameter(type=str),
        # The Pusher's base directory: the newest model served there is the baseline
        # (components/ranking_evaluator/baseline.py). Empty: no baseline.
        "push_destination": component_spec.ExecutionParameter(type=str, optional=True),
    }
    INPUTS = {
        "examples": component_spec.ChannelParameter(type=standard_artifacts.Examples),
        "model": component_spec.ChannelParameter(type=standard_artifacts.Model),
        "qrels": component_spec.ChannelParameter(type=artifacts.Qrels),
        "first_stage_run": component_spec.ChannelParameter(type=artifacts.TrecRun),
        # The Trainer's model_run (train_results.json): the report's training curves.
        "model_run": component_spec.ChannelParameter(
            type=standard_artifacts.ModelRun, optional=True
        ),
        # The CorpusEncoder's vectors: the documents of models with a frozen document tower
        # are taken from them, not embedded (corpus_documents.py).
        CORPUS_VECTORS: component_spec.ChannelParameter(
            type=artifacts.CorpusVectors, optional=True
        ),
        # With evaluator.cross_validation.folds k: fold branch i's model (and its model_run)
        # for i < k, which ranks fold i's eval split; `model` is then the pushed model.
        **{
            key.format(fold=i): component_spec.ChannelParameter(type=kind, optional=True)
            for i in range(folds.MAX_FOLDS)
            for key, kind in (
                (FOLD_MODEL, standard_artifacts.Model),
                (FOLD_MODEL_RUN, standard_artifacts.ModelRun),
            )
        },
    }
    OUTPUTS = {
        "evaluation": component_spec.ChannelParameter(type=standard_artifacts.ModelEvaluation),
        "blessing": component_spec.ChannelParameter(type=standard_artifacts.ModelBlessing),
        "candidate_run": component_spec.ChannelParameter(type=artifacts.TrecRun),
        "report": component_spec.ChannelParameter(type=HtmlReport),
        # For the Kubeflow UI: the main measures as scalars, and the Markdown report.
        "metrics": component_spec.ChannelParameter(type=ScalarMetrics),
        "report_markdown": component_spec.ChannelParameter(type=MarkdownReport),
    }


class RankingEvaluator(base_beam_component.BaseBeamComponent):
    """Scores every first-stage candidate of the eval split with the model (and the baseline:
    the newest model served under `push_destination`), writes TREC runs, trec_eval-exact
    metrics, paired significance tests, a report, and a standard ModelBlessing for the Pusher.

    `evaluator` is config.EvaluatorConfig as a dict (components/ranking_evaluator/config.py); see
    docs/evaluator.md.
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
        push_destination: str = "",
        model_run: types.BaseChannel | None = None,
        corpus_vectors: types.BaseChannel | None = None,
        **fold_models: types.BaseChannel,
    ):
        """`fold_models`: fold_model_<i> and fold_model_run_<i> channels (cross-validation);
        `corpus_vectors`: the CorpusEncoder's output, when the pipeline has one."""
        super().__init__(
            spec=RankingEvaluatorSpec(
                **fold_models,
                corpus_vectors=corpus_vectors,
                examples=examples,
                model=model,
                qrels=qrels,
                first_stage_run=first_stage_run,
                model_run=model_run,
                push_destination=push_destination,
                evaluator=json.dumps(evaluator, sort_keys=True),
                evaluation=types.Channel(type=standard_artifacts.ModelEvaluation),
                blessing=types.Channel(type=standard_artifacts.ModelBlessing),
                candidate_run=types.Channel(type=artifacts.TrecRun),
                report=types.Channel(type=HtmlReport),
                metrics=types.Channel(type=ScalarMetrics),
                report_markdown=types.Channel(type=MarkdownReport),
            )
        )
