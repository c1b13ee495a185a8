"""What the RankingEvaluator writes: the TREC runs, metrics.json, the Markdown and HTML reports,
the Kubeflow UI's scalars and the blessing file (docs/evaluator.md); the executor records the
artifacts' properties from metrics.json."""

from __future__ import annotations

import json
import logging
import os
import time
from typing import Any, NamedTuple

import tensorflow as tf

from components import artifacts
from components.ranking_evaluator import kfp_ui, measuring, plots, report, texts
from components.ranking_evaluator.blessing import Decision
from components.ranking_evaluator.constants import (
    BLESSED,
    BLESSED_FILE,
    MAIN_METRIC,
    METRICS_FILE,
    NOT_BLESSED_FILE,
    REPORT_HTML_FILE,
    REPORT_MD_FILE,
)
from components.ranking_evaluator.inputs import EvalInputs
from components.ranking_evaluator.passes import Scoring
from components.ranking_evaluator.request import EvaluationRequest
from rankcore import folds, trec
from rankcore.file_io import write_text_atomic
from rankcore.metrics import rank_documents

# Run files inside the evaluation artifact, by system.
RUN_FILES = {
    "candidate": "candidate.run",
    "baseline": "baseline.run",
    "first_stage": "first_stage.run",
    "reranker": "reranker.run",  # the candidate without fusion (when it carries fusion)
}
# The warning when the qrels artifact has no record of the split's judged queries.
NOT_RECORDED = (
    f"the qrels artifact has no {folds.SPLIT_QUERIES_FILE} (RankingDataGen ran before it "
    "recorded each split's judged queries): a judged query without a first-stage candidate, "
    "if any, is left out of the evaluation; rerun RankingDataGen (runner.enable_cache: false) "
    "to count it"
)
# metrics.json's `thresholds`: the config's blessing rules.
THRESHOLDS = (
    "min_values",
    "min_delta_vs_first_stage",
    "min_delta_vs_baseline",
    "require_significance",
    "significance_level",
)


class Reports(NamedTuple):
    """metrics.json as written, the HTML and Markdown reports, and the Kubeflow UI scalars."""

    metrics: dict[str, Any]
    html: str
    markdown: str
    scalars: dict[str, float]


class _ModelRun(NamedTuple):
    """A model_run directory as plots.read_train_results reads an artifact (its `uri`)."""

    uri: str


def write_trec_run(path: str, run: dict[str, dict[str, float]], run_id: str) -> None:
    """TREC run whose rank column is trec_eval's order (score desc, then docno desc), written by
    the one run writer (rankcore/trec.py).

    Scores are written with repr(), which round-trips exactly: reading the file back gives the
    same floats, so trec_eval on the file reproduces metrics.json and no two documents that
    differ in score get the same printed score (a rounded score could reorder ties).
    """
    ranked = {qid: [(d, docs[d]) for d in rank_documents(docs)] for qid, docs in run.items()}
    trec.write_run(path, ranked, run_id)


def write_runs(request: EvaluationRequest, runs: dict[str, dict[str, dict[str, float]]]) -> None:
    """Every system's run into the evaluation artifact, and the candidate's again as the
    candidate_run artifact's run.txt."""
    for name, run in runs.items():
        write_trec_run(os.path.join(request.evaluation_dir, RUN_FILES[name]), run, name)
    tf.io.gfile.copy(
        os.path.join(request.evaluation_dir, RUN_FILES["candidate"]),
        os.path.join(request.candidate_run_dir, artifacts.RUN_FILE),
        overwrite=True,
    )


def metrics_json(
    request: EvaluationRequest,
    inputs: EvalInputs,
    scored: Scoring,
    fused: measuring.Fused,
    measured: measuring.Measured,
    verdict: measuring.Verdict,
    started: float,
) -> dict[str, Any]:
    """metrics.json up to the report's additions (add_report_inputs): the split, the
    measures, the tests, the verdict, the models compared and the scoring's cost."""
    config, baseline, choice = request.config, inputs.choice.served, inputs.choice
    main = config.main_metric
    decision = verdict.decision
    return {
        "split": request.split_label,
        MAIN_METRIC: main,
        "relevance_level": config.relevance_level,
        "num_queries": len(fused.split_qids),
        "num_judged_queries": len(measured.split_qrels),
        "candidates_scored": scored.n_scored,
        "first_stage_candidates_without_example": fused.missing,
        "queries_without_candidates": without_candidates_entry(fused),
        "aggregate": measured.aggregates,
        "per_query": measured.per_query,
        "comparisons": measured.comparisons,
        "reranker_comparisons": measured.reranker_comparisons,
        "fusion": fused.fusions["candidate"],
        "cross_validation": measuring.cross_validation(
            inputs.parts,
            fused.part_qids or scored.part_qids,
            scored.part_fusions,
            measured.per_query,
            main,
            fused.without_candidates,
        )
        if config.cross_validation.folds
        else None,
        "baseline_fusion": fused.fusions.get("baseline"),
        BLESSED: decision.blessed,
        "reasons": decision.reasons,
        # The served model not compared (another collection or vocabulary) is a warning
        # the report shows beside the small-sample one.
        "warnings": verdict.small_sample
        + ([f"no baseline: {choice.skipped}"] if choice.skipped else [])
        + ([NOT_RECORDED] if fused.without_candidates is None else []),
        "checks": decision.checks,
        "thresholds": {key: getattr(config, key) for key in THRESHOLDS},
        "runs": {name: RUN_FILES[name] for name in fused.runs},
        "model": request.model_uri,
        "model_id": request.model_id,
        "baseline_model": baseline.path if baseline else None,
        "baseline_version": baseline.version if baseline else None,
        # Why the served model was not compared (another collection or vocabulary), if so.
        "baseline_skipped": choice.skipped,
        "scoring": scored.scored_by,
        "scoring_seconds": round(scored.seconds, 2),
        # Where the scoring pass's time went (scoring.pass_phases) and whether it ran in
        # process (beam_mode): the pipeline's own cost, docs/speed.md.
        "scoring_phases": scored.phases,
        "candidates_per_second": round(scored.n_scored * len(inputs.models) / scored.seconds, 1),
        "seconds": round(time.time() - started, 1),
    }


def without_candidates_entry(fused: measuring.Fused) -> dict[str, Any] | None:
    """metrics.json's `queries_without_candidates`: how many of the evaluated judged queries
    had no first-stage candidate (in every system's per-query table, scored as trec_eval -c
    scores a query missing from the run), their qids and the sentence the reports and the
    console print (`note`, None when there is none); None when the qrels artifact records no
    split queries (NOT_RECORDED)."""
    if fused.without_candidates is None:
        return None
    count, judged = len(fused.without_candidates), len(fused.split_qids)
    return {
        "count": count,
        "judged": judged,
        "qids": fused.without_candidates,
        "note": measuring.no_candidate_note(count, judged) if count else None,
    }


def add_report_inputs(
    metrics: dict[str, Any],
    request: EvaluationRequest,
    inputs: EvalInputs,
    runs: dict[str, dict[str, dict[str, float]]],
    split_qrels: dict[str, dict[str, int]],
) -> None:
    """Adds what the report shows besides the numbers: the Trainers' TensorBoard logs
    (model_run: train/, validation/) and the listed queries in words (texts.py)."""
    k = request.config.cross_validation.folds
    metrics["tensorboard_logdirs"] = {
        name: uri
        for name, uri in [("Trainer", request.model_run)]
        + [(folds.node_id("Trainer", p.fold), p.model_run) for p in inputs.parts if k]
        if uri
    }
    # The report's listed queries in words: text and top documents (texts.py).
    metrics["listed_queries"] = texts.listed_queries_or_none(
        report.listed_qids(metrics),
        runs,
        split_qrels,
        [request.split_uri(p.split) for p in inputs.parts],
        inputs.models["candidate"],
    )


def write_reports(
    request: EvaluationRequest,
    metrics: dict[str, Any],
    candidate_run: dict[str, dict[str, float]],
    split_qrels: dict[str, dict[str, int]],
) -> Reports:
    """metrics.json, report.md and report.html into the evaluation artifact (the HTML with the
    training curves and score distributions, plots.py), and the Kubeflow UI's scalars into
    the system.Metrics artifact's directory when it is wired (kfp_ui.py)."""
    model_run = _ModelRun(request.model_run) if request.model_run else None
    html = report.html(
        metrics,
        plots.figures_or_none(
            plots.read_train_results(model_run),
            candidate_run,
            split_qrels,
            request.config.relevance_level,
        ),
    )
    markdown = report.markdown(metrics)
    write_text_atomic(
        os.path.join(request.evaluation_dir, METRICS_FILE), json.dumps(metrics, indent=2)
    )
    write_text_atomic(os.path.join(request.evaluation_dir, REPORT_MD_FILE), markdown)
    write_text_atomic(os.path.join(request.evaluation_dir, REPORT_HTML_FILE), html)
    scalars = kfp_ui.scalars(metrics)
    if request.ui_metrics_dir is not None:
        write_text_atomic(
            os.path.join(request.ui_metrics_dir, METRICS_FILE), json.dumps(scalars, indent=2)
        )
    return Reports(metrics, html, markdown, scalars)


def write_blessing(request: EvaluationRequest, decision: Decision) -> None:
    """The standard ModelBlessing file: BLESSED or NOT_BLESSED, holding the reasons (or, when
    blessed, the checks passed)."""
    name = BLESSED_FILE if decision.blessed else NOT_BLESSED_FILE
    write_text_atomic(
        os.path.join(request.blessing_dir, name),
        "\n".join(decision.reasons or decision.checks) + "\n",
    )


def log_verdict(metrics: dict[str, Any]) -> None:
    """The evaluation's one line in the component's log."""
    main, aggregates = metrics[MAIN_METRIC], metrics["aggregate"]
    logging.info(
        "RankingEvaluator: %s %s = %.4f (first stage %.4f%s) -> %s %s",
        metrics["split"],
        main,
        aggregates["candidate"][main],
        aggregates["first_stage"][main],
        f", baseline {aggregates['baseline'][main]:.4f}" if "baseline" in aggregates else "",
        "BLESSED" if metrics[BLESSED] else "NOT BLESSED",
        "; ".join(metrics["reasons"]),
    )
