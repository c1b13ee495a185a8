"""The RankingEvaluator's work, one entry point: `evaluate` reranks the held-out queries, scores
them against the qrels, compares, blesses or rejects and writes the outputs, from a plain
EvaluationRequest (request.py) that the executor read from its artifacts.

The steps, each in its own module: read the inputs (inputs.py), score every candidate in Beam
(passes.py, scoring.py), fuse with the first stage, measure, test and decide (measuring.py),
write the runs, metrics.json, the reports and the blessing (outputs.py). See
docs/evaluator.md."""

from __future__ import annotations

import time

from tfx.dsl.components.base import base_beam_executor

from components.ranking_evaluator import measuring, outputs, passes
from components.ranking_evaluator.inputs import read_inputs
from components.ranking_evaluator.outputs import Reports
from components.ranking_evaluator.request import EvaluationRequest


def evaluate(
    request: EvaluationRequest, beam_executor: base_beam_executor.BaseBeamExecutor
) -> Reports:
    """Evaluates the request's model and writes every output file; returns metrics.json (from
    which the executor records the artifacts' properties), the reports and the UI scalars.
    `beam_executor` is the executor whose Beam settings and temp dir the scoring uses."""
    started = time.time()
    inputs = read_inputs(request)
    scored = passes.score_parts(beam_executor, request, inputs)
    fused = measuring.fuse(
        scored, inputs.first_stage, inputs.choice.served is not None, inputs.without_candidates
    )
    # The served model is compared only on the evaluated queries held out from it, or not at
    # all (its run dropped, the reason in choice.skipped) when too few are (baseline.py).
    fused, choice = measuring.held_out_baseline(fused, inputs, request.config)
    inputs = inputs._replace(choice=choice)
    measured = measuring.measure(fused, inputs.qrels, request.config, choice.compare_on)
    verdict = measuring.decide(measured, request.config)
    outputs.write_runs(request, fused.runs)
    metrics = outputs.metrics_json(request, inputs, scored, fused, measured, verdict, started)
    outputs.add_report_inputs(metrics, request, inputs, fused.runs, measured.split_qrels)
    # Metrics, significance tests and the report, timed up to here.
    scored.phases["after_scoring_seconds"] = round(time.time() - scored.started - scored.seconds, 2)
    reports = outputs.write_reports(request, metrics, fused.runs["candidate"], measured.split_qrels)
    # Standard ModelBlessing contract: the Pusher reads `blessed` (the executor records it).
    outputs.write_blessing(request, verdict.decision)
    outputs.log_verdict(metrics)
    return reports
