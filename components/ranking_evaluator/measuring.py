"""The RankingEvaluator's numbers: the runs each system is judged by (fused with the first stage
when its model carries fusion), trec_eval-exact measures against the full qrels, the paired
significance tests against the first stage and the baseline, and the blessing decision."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any, NamedTuple

from components.ranking_evaluator import baseline, blessing, report, significance
from components.ranking_evaluator.baseline import BaselineChoice
from components.ranking_evaluator.config import EvaluatorConfig
from components.ranking_evaluator.inputs import EvalInputs, Part
from components.ranking_evaluator.passes import Scoring
from rankcore import fusion
from rankcore.metrics import compute_metrics, mean_metrics

Run = dict[str, dict[str, float]]
PerQuery = dict[str, dict[str, dict[str, float]]]  # system -> qid -> measure -> value


class Fused(NamedTuple):
    """The runs by system ("first_stage", "reranker" when the candidate carries fusion,
    "candidate", "baseline" when there is one, in that order), the fusions the report shows,
    the split's judged queries (those with examples and those without a candidate), how many
    first-stage candidates had no example, each part's queries (with those without a
    candidate) and the queries without a candidate (None: the examples record none)."""

    runs: dict[str, Run]
    fusions: dict[str, dict | None]
    split_qids: list[str]
    missing: int
    part_qids: list[list[str]] | None = None
    without_candidates: list[str] | None = None


class Measured(NamedTuple):
    """The judged queries' qrels, per-query and mean measures by system, and the significance
    tests of the candidate (and of the reranker alone) against each reference."""

    split_qrels: dict[str, dict[str, int]]
    per_query: PerQuery
    aggregates: dict[str, dict[str, float]]
    comparisons: dict[str, dict]
    reranker_comparisons: dict[str, dict]


class Verdict(NamedTuple):
    """The blessing decision and the small-sample warnings (report.significance_warnings)."""

    decision: blessing.Decision
    small_sample: list[str]


def fusion_summary(part_fusions: list[dict | None]) -> dict | None:
    """The candidate's fusion for the report: its model's, or with folds the fold models'
    alphas (`alphas`, by fold) and their mean as `alpha`."""
    if len(part_fusions) == 1 or part_fusions[0] is None:
        return part_fusions[0]
    alphas = [f["alpha"] for f in part_fusions]
    summary = {
        "mode": part_fusions[0]["mode"],
        "alpha": sum(alphas) / len(alphas),
        "alphas": alphas,
        "dev_fused": [f.get("dev_fused") for f in part_fusions],
    }
    if any("feedback" in f for f in part_fusions):
        summary["feedbacks"] = [f.get("feedback") for f in part_fusions]
    return summary


def fuse(
    scored: Scoring,
    first_stage_all: Run,
    has_baseline: bool,
    without_candidates: list[list[str]] | None = None,
) -> Fused:
    """Fusion with the first stage, as each model ranks when it carries fusion (its
    SavedModel's assets.extra/fusion.json; the rank_candidates signature computes the same):
    "candidate" and "baseline" are then the fused rankings, "reranker" the candidate's scores
    alone. With folds, each fold's queries are fused with the alpha its own model carries.

    `without_candidates` (per part, inputs.without_candidates): the judged queries of each
    part's split that have no first-stage candidate, so no example and no line in any run.
    They are among the split's queries all the same: `measure` gives them, for every
    system, the values trec_eval -c gives a judged query missing from the run."""
    raw = scored.raw
    unranked = without_candidates or [[] for _ in scored.part_qids]
    part_qids = [sorted({*qids, *none}) for qids, none in zip(scored.part_qids, unranked)]
    split_qids = sorted({q for qids in part_qids for q in qids} | set(raw["candidate"]))
    first_stage = {q: first_stage_all.get(q, {}) for q in sorted(raw["candidate"])}
    missing = sum(len(set(first_stage[q]) - set(raw["candidate"][q])) for q in first_stage)
    if missing:
        logging.warning("%d first-stage candidates of the split have no example", missing)
    runs = {"first_stage": first_stage}
    if scored.part_fusions[0] is not None:
        runs["reranker"] = raw["candidate"]
    runs["candidate"] = {}
    for qids, fused in zip(scored.part_qids, scored.part_fusions):
        scores = {q: raw["candidate"][q] for q in qids}
        if fused is not None:
            scores = fusion.fuse_run(scores, first_stage, fused["alpha"])
        runs["candidate"].update(scores)
    fusions = {"candidate": fusion_summary(scored.part_fusions)}
    if has_baseline:
        fusions["baseline"] = scored.baseline_fusion
        runs["baseline"] = raw["baseline"]
        if fusions["baseline"] is not None:
            runs["baseline"] = fusion.fuse_run(
                raw["baseline"], first_stage, fusions["baseline"]["alpha"]
            )
    none = None if without_candidates is None else sorted({q for qs in unranked for q in qs})
    if none:
        logging.warning("%s", no_candidate_note(len(none), len(split_qids)))
    return Fused(runs, fusions, split_qids, missing, part_qids, none)


def no_candidate_note(count: int, judged: int) -> str:
    """The sentence metrics.json, the reports and the console give for the evaluated judged
    queries the first stage returned nothing for."""
    return (
        f"{count} of {judged} judged queries had no candidate: they score 0 for every system, "
        "as trec_eval -c counts them"
    )


def held_out_baseline(
    fused: Fused, inputs: EvalInputs, config: EvaluatorConfig
) -> tuple[Fused, BaselineChoice]:
    """The baseline choice for the split's judged queries (baseline.for_queries): the served
    model is compared only on those held out from it (`compare_on`), or, when too few are, not
    at all: its run and fusion are dropped and the choice says why (`skipped`)."""
    evaluated = [q for q in fused.split_qids if inputs.qrels.get(q)]
    choice = baseline.for_queries(inputs.choice, evaluated, config.significance_level)
    if choice.served is None and "baseline" in fused.runs:
        runs = {name: run for name, run in fused.runs.items() if name != "baseline"}
        fusions = {name: f for name, f in fused.fusions.items() if name != "baseline"}
        fused = fused._replace(runs=runs, fusions=fusions)
    return fused, choice


def compare_reranker_alone(
    per_query: PerQuery,
    metric_names: list[str],
    *,
    trials: int,
    seed: int,
) -> dict[str, dict[str, dict[str, float]]]:
    """{"first_stage": stats} of the reranker's own scores (no fusion) against the first stage:
    the reports' "alone" figures (docs/results.md), which show whether the model learned
    anything beyond the first stage it is fused with. Report only, never for blessing. Empty
    when the candidate carries no fusion (its run is then the reranker alone, already in
    `comparisons`)."""
    if "reranker" not in per_query:
        return {}
    return {
        "first_stage": significance.compare_per_query(
            per_query["first_stage"], per_query["reranker"], metric_names, trials=trials, seed=seed
        )
    }


def measure(
    fused: Fused,
    qrels: dict[str, dict[str, int]],
    config: EvaluatorConfig,
    compare_on: Sequence[str] | None = None,
) -> Measured:
    """Every system's measures on the split's queries, and the paired tests (t-test and
    randomization, significance.py) of the candidate against the first stage and the baseline,
    and of the reranker alone against the first stage (for the report, never for blessing).
    The baseline's figures and its test cover only `compare_on` (the queries held out from
    it, held_out_baseline; None: all), paired with the candidate's on the same queries."""
    # Full judgments: relevant documents the first stage never retrieved count (recall,
    # MAP, nDCG's ideal ranking), exactly as trec_eval run on the files would count them;
    # a judged query without a candidate is in no run and gets trec_eval -c's values
    # (compute_metrics(complete=True)) in every system's table: a tie in every test.
    split_qrels = {q: qrels[q] for q in fused.split_qids if qrels.get(q)}
    measures = config.measures
    level = config.relevance_level
    per_query = {
        name: compute_metrics(split_qrels, run, measures, relevance_level=level, complete=True)
        for name, run in fused.runs.items()
    }
    per_query = baseline.on_compared_queries(per_query, compare_on)
    aggregates = {name: mean_metrics(pq, measures) for name, pq in per_query.items()}
    metric_names = list(aggregates["candidate"])
    comparisons = {
        reference: significance.compare_per_query(
            per_query[reference],
            baseline.paired(per_query["candidate"], per_query[reference]),
            metric_names,
            trials=config.randomization_trials,
            seed=config.seed,
        )
        for reference in ("first_stage", "baseline")
        if reference in per_query
    }
    reranker_comparisons = compare_reranker_alone(
        per_query, metric_names, trials=config.randomization_trials, seed=config.seed
    )
    return Measured(split_qrels, per_query, aggregates, comparisons, reranker_comparisons)


def decide(measured: Measured, config: EvaluatorConfig) -> Verdict:
    """The blessing (blessing.decide on the config's thresholds). Too few queries for the
    randomization test to ever give p < significance_level: the report warns, and with
    require_significance it is the reason the model is refused."""
    decision = blessing.decide(measured.aggregates["candidate"], measured.comparisons, config)
    small_sample = report.significance_warnings(
        len(measured.per_query["candidate"]),
        config.significance_level,
        config.split,
        config.cross_validation.folds,
    )
    if small_sample and config.require_significance and not decision.blessed:
        decision.reasons.extend(small_sample)
    return Verdict(decision, small_sample)


def cross_validation(
    parts: list[Part],
    part_qids: list[list[str]],
    part_fusions: list[dict | None],
    per_query: PerQuery,
    main: str,
    without_candidates: list[str] | None = None,
) -> dict[str, Any]:
    """metrics.json's `cross_validation`: per fold, its queries (those without a candidate
    too, scored 0 by every system), model, alpha (chosen on the next fold's queries) and the
    main metric of each system on its queries."""
    per_fold = []
    none = set(without_candidates or ())
    for part, qids, fused in zip(parts, part_qids, part_fusions):
        # The baseline's figures cover only the queries held out from it (measure).
        means = {
            name: sum(pq[q][main] for q in qids if q in pq)
            / max(1, sum(q in pq for q in qids) if name == "baseline" else len(qids))
            for name, pq in per_query.items()
        }
        per_fold.append(
            {
                "fold": part.fold,
                "split": part.split,
                "queries": len(qids),
                "queries_without_candidates": sum(1 for q in qids if q in none),
                "model": part.model_dir,
                "alpha": fused["alpha"] if fused else None,
                "feedback": (fused or {}).get("feedback"),
                main: {name: round(v, 6) for name, v in means.items()},
            }
        )
    return {"folds": len(parts), "per_fold": per_fold}
