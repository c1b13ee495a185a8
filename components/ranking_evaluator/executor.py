"""RankingEvaluator executor: rerank held-out queries, score against qrels, bless or reject.

Outputs (see docs/evaluator.md):
- evaluation (ModelEvaluation): metrics.json, report.md, report.html and the TREC runs of the
  split: candidate.run (fused with the first stage when the model carries fusion),
  first_stage.run, reranker.run (the reranker alone, with fusion) and baseline.run (if any);
- candidate_run (rankpipe.TrecRun): the candidate's run again, as run.txt, for downstream use;
- blessing (ModelBlessing): a BLESSED or NOT_BLESSED file holding the reasons, and the custom
  properties the standard Pusher reads (`blessed`), with the models compared;
- report (system.HTML): report.html as a single file, which the Kubeflow UI renders;
- report_markdown (system.Markdown), metrics (system.Metrics): report.md as a single file, and
  the main measures as scalars, also for the Kubeflow UI (kfp_ui.py, docs/kubeflow.md).

The executor only marshals: it reads its artifacts and exec properties into an
EvaluationRequest (request.py), calls evaluation.evaluate, which does the work and writes the
files, and records the artifacts' properties from the metrics.json it returns.
"""

from __future__ import annotations

import json

from tfx.dsl.components.base import base_beam_executor
from tfx.types import artifact_utils
from tfx.utils import path_utils

from components.executor_types import Artifacts
from components.executor_types import ExecProperties as Props
from components.process_memory import released_after
from components.ranking_evaluator import kfp_ui
from components.ranking_evaluator.config import EvaluatorConfig
from components.ranking_evaluator.constants import (
    BLESSED,
    CORPUS_VECTORS,
    FOLD_MODEL,
    FOLD_MODEL_RUN,
    MAIN_METRIC,
)
from components.ranking_evaluator.evaluation import evaluate
from components.ranking_evaluator.outputs import Reports
from components.ranking_evaluator.request import EvaluationRequest
from rankcore import lineage


def _uri_or_none(artifact_list: list | None) -> str | None:
    """The URI of an optional input's artifact, None when it is not wired."""
    artifact = (artifact_list or [None])[0]
    return artifact.uri if artifact else None


def _request(
    input_dict: Artifacts, output_dict: Artifacts, exec_properties: Props
) -> EvaluationRequest:
    """The artifacts' paths and the exec properties as a plain EvaluationRequest."""
    config = EvaluatorConfig.from_dict(json.loads(exec_properties["evaluator"]))
    examples = artifact_utils.get_single_instance(input_dict["examples"])
    model = artifact_utils.get_single_instance(input_dict["model"])
    fold_models = {}
    for i in range(config.cross_validation.folds):
        if input_dict.get(FOLD_MODEL.format(fold=i)):
            fold_model = artifact_utils.get_single_instance(input_dict[FOLD_MODEL.format(fold=i)])
            fold_models[i] = (
                path_utils.serving_model_path(fold_model.uri),
                _uri_or_none(input_dict.get(FOLD_MODEL_RUN.format(fold=i))),
            )
    return EvaluationRequest(
        config=config,
        examples_uri=examples.uri,
        split_uris={
            split: artifact_utils.get_split_uri([examples], split)
            for split in artifact_utils.decode_split_names(examples.split_names)
        },
        examples_lineage=examples.get_string_custom_property(lineage.RECORD_KEY),
        model_uri=model.uri,
        model_id=model.id,
        model_dir=path_utils.serving_model_path(model.uri),
        model_run=_uri_or_none(input_dict.get("model_run")),
        qrels_uri=artifact_utils.get_single_uri(input_dict["qrels"]),
        first_stage_run_uri=artifact_utils.get_single_uri(input_dict["first_stage_run"]),
        push_destination=exec_properties.get("push_destination") or "",
        evaluation_dir=artifact_utils.get_single_uri(output_dict["evaluation"]),
        blessing_dir=artifact_utils.get_single_uri(output_dict["blessing"]),
        candidate_run_dir=artifact_utils.get_single_uri(output_dict["candidate_run"]),
        ui_metrics_dir=(
            artifact_utils.get_single_uri(output_dict["metrics"])
            if output_dict.get("metrics")
            else None
        ),
        fold_models=fold_models,
        corpus_vectors_uri=_uri_or_none(input_dict.get(CORPUS_VECTORS)),
    )


def _record(reports: Reports, output_dict: Artifacts) -> None:
    """The output artifacts' values and custom properties, from what evaluate returned."""
    metrics = reports.metrics
    main, blessed = metrics[MAIN_METRIC], int(metrics[BLESSED])
    run_artifact = artifact_utils.get_single_instance(output_dict["candidate_run"])
    run_artifact.set_string_custom_property("split", metrics["split"])
    run_artifact.set_string_custom_property("run_id", "candidate")
    run_artifact.set_int_custom_property("num_queries", metrics["num_queries"])
    for artifact in output_dict.get("report") or []:
        artifact.value = reports.html  # one file at the URI: what the KFP UI renders
    # Kubeflow UI: the report as Markdown too, and the main measures as scalars.
    for key, display_name in kfp_ui.DISPLAY_NAMES.items():
        for artifact in output_dict.get(key) or []:
            artifact.set_string_custom_property("display_name", display_name)
    if output_dict.get("report_markdown"):
        output_dict["report_markdown"][0].value = reports.markdown
    if output_dict.get("metrics"):
        ui_metrics = artifact_utils.get_single_instance(output_dict["metrics"])
        for name, value in reports.scalars.items():
            ui_metrics.set_float_custom_property(name, value)
    # Headline numbers on the artifact itself, for MLMD queries and the KFP artifact view.
    evaluation = artifact_utils.get_single_instance(output_dict["evaluation"])
    evaluation.set_int_custom_property(BLESSED, blessed)
    evaluation.set_string_custom_property(MAIN_METRIC, main)
    for name, values in metrics["aggregate"].items():
        evaluation.set_float_custom_property(f"{name}_{main}", values[main])
    # Standard ModelBlessing contract: the Pusher reads `blessed`; the rest says what was
    # compared (the baseline is a served version directory, not an MLMD artifact).
    blessing = artifact_utils.get_single_instance(output_dict["blessing"])
    blessing.set_int_custom_property(BLESSED, blessed)
    blessing.set_string_custom_property("current_model", metrics["model"])
    if metrics["baseline_model"] is not None:
        blessing.set_string_custom_property("baseline_model", metrics["baseline_model"])
        blessing.set_int_custom_property("baseline_version", metrics["baseline_version"])


class Executor(base_beam_executor.BaseBeamExecutor):
    @released_after
    def Do(self, input_dict: Artifacts, output_dict: Artifacts, exec_properties: Props) -> None:
        request = _request(input_dict, output_dict, exec_properties)
        _record(evaluate(request, self), output_dict)
