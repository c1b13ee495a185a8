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
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
import time
import uuid
from typing import Any, NamedTuple

import tensorflow as tf
from tfx.dsl.components.base import base_beam_executor
from tfx.types import artifact_utils
from tfx.utils import path_utils

from components import artifacts, beam_mode, worker_dirs
from components.executor_types import Artifacts
from components.executor_types import ExecProperties as Props
from components.ranking_evaluator import (
    blessing,
    kfp_ui,
    plots,
    report,
    scoring,
    significance,
    texts,
)
from components.ranking_evaluator.baseline import find_baseline
from components.ranking_evaluator.config import EvaluatorConfig
from components.ranking_evaluator.constants import (
    BLESSED,
    BLESSED_FILE,
    FOLD_MODEL,
    FOLD_MODEL_RUN,
    MAIN_METRIC,
    METRICS_FILE,
    NOT_BLESSED_FILE,
    REPORT_HTML_FILE,
    REPORT_MD_FILE,
)
from rankcore import feedback, folds, fusion, lineage
from rankcore.file_io import write_text_atomic
from rankcore.metrics import compute_metrics, mean_metrics, rank_documents, read_qrels, read_run

# Run files inside the evaluation artifact, by system.
RUN_FILES = {
    "candidate": "candidate.run",
    "baseline": "baseline.run",
    "first_stage": "first_stage.run",
    "reranker": "reranker.run",  # the candidate without fusion (when it carries fusion)
}


def write_trec_run(path: str, run: dict[str, dict[str, float]], run_id: str) -> None:
    """TREC run whose rank column is trec_eval's order (score desc, then docno desc).

    Scores are written with repr(), which round-trips exactly: reading the file back gives the
    same floats, so trec_eval on the file reproduces metrics.json and no two documents that
    differ in score get the same printed score (a rounded score could reorder ties).
    """
    lines = []
    for qid in sorted(run):
        docs = run[qid]
        lines.extend(
            f"{qid} Q0 {docid} {rank} {docs[docid]!r} {run_id}\n"
            for rank, docid in enumerate(rank_documents(docs), 1)
        )
    write_text_atomic(path, "".join(lines))


def _local_copy(path: str, local_dir: str) -> str:
    # trec_eval's readers use open(); artifacts may live on gs:// or other gfile filesystems.
    if "://" not in path:
        return path
    local = os.path.join(local_dir, f"{len(os.listdir(local_dir))}-{os.path.basename(path)}")
    tf.io.gfile.copy(path, local, overwrite=True)
    return local


def compare_reranker_alone(
    per_query: dict[str, dict[str, dict[str, float]]],
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


class _Part(NamedTuple):
    """What one model ranks: the eval split, the SavedModel, its Trainer's model_run (whose
    stored vectors the scoring may reuse); `fold` None without cross-validation."""

    fold: int | None
    split: str
    model_dir: str
    model_run: str | None


def _parts(config: EvaluatorConfig, inputs: Artifacts, model_dir: str) -> list[_Part]:
    """The model of each evaluated split: the candidate on `config.split`, or with
    cross-validation each fold branch's model on its fold's eval split (rankcore/folds.py)."""
    model_run = (inputs.get("model_run") or [None])[0]
    k = config.cross_validation.folds
    if not k:
        return [_Part(None, config.split, model_dir, model_run.uri if model_run else None)]
    parts = []
    for i in range(k):
        key = FOLD_MODEL.format(fold=i)
        if not inputs.get(key):
            raise ValueError(
                f"evaluator.cross_validation.folds is {k} but input {key!r} (fold branch {i}'s "
                "model) is not wired: build the pipeline with pipelines/pipeline.py"
            )
        fold_run = (inputs.get(FOLD_MODEL_RUN.format(fold=i)) or [None])[0]
        fold_model = artifact_utils.get_single_instance(inputs[key])
        parts.append(
            _Part(
                i,
                folds.split_name(i, folds.EVAL),
                path_utils.serving_model_path(fold_model.uri),
                fold_run.uri if fold_run else None,
            )
        )
    return parts


def _fusion_summary(part_fusions: list[dict | None]) -> dict | None:
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


def _cross_validation(
    parts: list[_Part],
    part_qids: list[list[str]],
    part_fusions: list[dict | None],
    per_query: dict[str, dict[str, dict[str, float]]],
    main: str,
) -> dict[str, Any]:
    """metrics.json's `cross_validation`: per fold, its queries, model, alpha (chosen on the
    next fold's queries) and the main metric of each system on its queries."""
    per_fold = []
    for part, qids, fused in zip(parts, part_qids, part_fusions):
        means = {
            name: sum(pq[q][main] for q in qids if q in pq) / max(1, len(qids))
            for name, pq in per_query.items()
        }
        per_fold.append(
            {
                "fold": part.fold,
                "split": part.split,
                "queries": len(qids),
                "model": part.model_dir,
                "alpha": fused["alpha"] if fused else None,
                "feedback": (fused or {}).get("feedback"),
                main: {name: round(v, 6) for name, v in means.items()},
            }
        )
    return {"folds": len(parts), "per_fold": per_fold}


def _examples_lineage(examples: list) -> dict | None:
    """RankingDataGen's record of what the examples' token ids mean (rankcore/lineage.py),
    from the examples artifact; None when it records none (examples from before the record)."""
    text = examples[0].get_string_custom_property(lineage.RECORD_KEY) if examples else ""
    try:
        return json.loads(text) if text else None
    except ValueError:
        return None


class Executor(base_beam_executor.BaseBeamExecutor):
    def _score(
        self,
        examples: Any,
        splits: list[str],
        models: dict[str, str],
        config: EvaluatorConfig,
        phases: dict[str, float],
        reuse: dict[str, scoring.StoredVectors | None] | None = None,
        fusions: dict[str, dict | None] | None = None,
        first_stage: dict[str, dict[str, float]] | None = None,
    ) -> tuple[dict[str, dict[str, dict[str, float]]], dict[str, str]]:
        """One scoring pass (scoring.score_split) over `splits` with `models`; its phases are
        added to `phases`. A model whose fusion (`fusions`, by name) carries feedback ranks each
        query's candidates with it (rankcore/feedback.py), from the lists of `first_stage`, at
        its fusion alpha: its run is then what its rank_candidates signature ranks."""
        feedbacks = {
            name: (fused["feedback"], fused.get("alpha"))
            for name, fused in (fusions or {}).items()
            if name in models and fused and feedback.is_on(fused.get("feedback"))
        }
        split_uris = [artifact_utils.get_split_uri([examples], s) for s in splits]
        # A fresh directory per pass: a retried execution must not read a failed one's parts.
        # Workers write it and read the splits and models: worker-reachable (worker_dirs.py).
        reads = {**{f"examples ({s})": u for s, u in zip(splits, split_uris)}, **models}
        scores_dir = worker_dirs.work_dir(
            self, f"scores-{uuid.uuid4().hex}", "RankingEvaluator", reads
        )
        # A small split is scored in process: no Beam worker start-up (components/beam_mode.py).
        split_bytes = beam_mode.input_bytes([os.path.join(u, "*") for u in split_uris])
        make_pipeline = beam_mode.pipeline_maker(self, split_bytes, "RankingEvaluator")
        pass_phases: dict[str, float] = {}
        try:
            runs, scored_by = scoring.score_split(
                make_pipeline,
                split_uris,
                models,
                batch_size=config.batch_size,
                scores_prefix=os.path.join(scores_dir, "part"),
                phases=pass_phases,
                reuse=reuse,
                feedbacks=feedbacks,
                first_stage=first_stage,
            )
        finally:
            # The scores are in `runs` now; under --temp_location (an object store) nothing
            # else would delete them.
            if tf.io.gfile.exists(scores_dir):
                tf.io.gfile.rmtree(scores_dir)
        for key, value in pass_phases.items():
            phases[key] = round(phases.get(key, 0) + value, 2)
        phases["in_process"] = beam_mode.chooses_in_process(self, split_bytes)
        return runs, scored_by

    def Do(self, input_dict: Artifacts, output_dict: Artifacts, exec_properties: Props) -> None:
        start = time.time()
        config = EvaluatorConfig.from_dict(json.loads(exec_properties["evaluator"]))
        # With cross-validation every judged query is evaluated, each by its fold's model.
        k = config.cross_validation.folds
        split = config.split if not k else f"all ({k}-fold cross-validation)"
        examples = artifact_utils.get_single_instance(input_dict["examples"])
        model = artifact_utils.get_single_instance(input_dict["model"])
        evaluation = artifact_utils.get_single_instance(output_dict["evaluation"])
        blessing_artifact = artifact_utils.get_single_instance(output_dict["blessing"])
        run_artifact = artifact_utils.get_single_instance(output_dict["candidate_run"])
        report_artifact = (output_dict.get("report") or [None])[0]

        local_dir = tempfile.mkdtemp(prefix="ranking_evaluator-")
        try:
            qrels = read_qrels(
                _local_copy(
                    os.path.join(
                        artifact_utils.get_single_uri(input_dict["qrels"]), artifacts.QRELS_FILE
                    ),
                    local_dir,
                )
            )
            first_stage_all = read_run(
                _local_copy(
                    os.path.join(
                        artifact_utils.get_single_uri(input_dict["first_stage_run"]),
                        artifacts.RUN_FILE,
                    ),
                    local_dir,
                )
            )
        finally:
            shutil.rmtree(local_dir, ignore_errors=True)

        # SavedModel directories by system. The baseline is the model served now: the newest
        # version under the push destination (a pushed version dir is the SavedModel itself).
        models = {"candidate": path_utils.serving_model_path(model.uri)}
        choice = find_baseline(
            exec_properties.get("push_destination") or "",
            model.uri,
            _examples_lineage(input_dict["examples"]),
        )
        baseline = choice.served
        if baseline is not None:
            models["baseline"] = baseline.path
        parts = _parts(config, input_dict, models["candidate"])
        main_run = (input_dict.get("model_run") or [None])[0]
        main_run = main_run.uri if main_run else None

        # ---- scoring: every candidate of the split(s), all models -----------------------------
        # Dual encoders embed each distinct text once; other models score every pair (scoring.py).
        # One part (no cross-validation): candidate and baseline in one pass. Folds: each fold's
        # eval split with its own model, then the baseline over all of them in one more pass.
        t0 = time.time()
        phases: dict[str, float] = {}
        raw: dict[str, dict[str, dict[str, float]]] = {}  # system -> scores, not fused
        part_qids: list[list[str]] = []
        # Each model's fusion (its SavedModel's assets.extra/fusion.json): with feedback, its
        # scores depend on each query's list, and scoring rescores them (rankcore/feedback.py).
        part_fusions = [fusion.read_fusion(part.model_dir) for part in parts]
        baseline_fusion = fusion.read_fusion(baseline.path) if baseline is not None else None
        for part, part_fusion in zip(parts, part_fusions):
            part_models = {"candidate": part.model_dir}
            if len(parts) == 1 and baseline is not None:
                part_models["baseline"] = baseline.path
            # A dual encoder's Trainer already embedded its dev split's texts with this very
            # model (rankcore/embeddings.py): the texts among them are not embedded again. With
            # a frozen document tower, the other Trainers' documents are this model's too.
            reuse = {
                "candidate": scoring.reusable_embeddings(
                    part.model_run,
                    part.model_dir,
                    [main_run, *(p.model_run for p in parts)],
                    part.split,
                )
            }
            scored, scored_by = self._score(
                examples,
                [part.split],
                part_models,
                config,
                phases,
                reuse,
                {"candidate": part_fusion, "baseline": baseline_fusion},
                first_stage_all,
            )
            part_qids.append(sorted(scored["candidate"]))
            for name, run in scored.items():
                raw.setdefault(name, {}).update(run)
        if len(parts) > 1 and baseline is not None:
            splits = [part.split for part in parts]
            scored, _ = self._score(
                examples,
                splits,
                {"baseline": baseline.path},
                config,
                phases,
                fusions={"baseline": baseline_fusion},
                first_stage=first_stage_all,
            )
            raw.update(scored)
        scoring_seconds = time.time() - t0
        n_scored = sum(len(d) for d in raw["candidate"].values())
        if not n_scored:
            raise ValueError(f"the {split} split of {examples.uri} has no examples to score")
        logging.info(
            "Scored %d candidates of %d %s queries with %d model(s) (%s) in %.1fs: %s",
            n_scored,
            len(raw["candidate"]),
            split,
            len(parts) + (baseline is not None),
            scored_by,
            scoring_seconds,
            phases,
        )

        # ---- metrics: the split's queries against the full qrels --------------------------
        split_qids = sorted(raw["candidate"])
        first_stage = {q: first_stage_all.get(q, {}) for q in split_qids}
        missing = sum(len(set(first_stage[q]) - set(raw["candidate"][q])) for q in split_qids)
        if missing:
            logging.warning("%d first-stage candidates of the split have no example", missing)
        # Fusion with the first stage, as each model ranks when it carries fusion (its SavedModel's
        # assets.extra/fusion.json; the rank_candidates signature computes the same): "candidate"
        # and "baseline" are then the fused rankings, "reranker" the candidate's scores alone.
        # With folds, each fold's queries are fused with the alpha its own model carries.
        runs = {"first_stage": first_stage}
        if part_fusions[0] is not None:
            runs["reranker"] = raw["candidate"]
        runs["candidate"] = {}
        for qids, fused in zip(part_qids, part_fusions):
            scores = {q: raw["candidate"][q] for q in qids}
            if fused is not None:
                scores = fusion.fuse_run(scores, first_stage, fused["alpha"])
            runs["candidate"].update(scores)
        fusions = {"candidate": _fusion_summary(part_fusions)}
        if baseline is not None:
            fusions["baseline"] = baseline_fusion
            runs["baseline"] = raw["baseline"]
            if fusions["baseline"] is not None:
                runs["baseline"] = fusion.fuse_run(
                    raw["baseline"], first_stage, fusions["baseline"]["alpha"]
                )
        # Full judgments: relevant documents the first stage never retrieved count (recall,
        # MAP, nDCG's ideal ranking), exactly as trec_eval run on the files would count them.
        split_qrels = {q: qrels[q] for q in split_qids if qrels.get(q)}
        measures = config.measures
        level = config.relevance_level
        per_query = {
            name: compute_metrics(split_qrels, run, measures, relevance_level=level, complete=True)
            for name, run in runs.items()
        }
        aggregates = {name: mean_metrics(pq, measures) for name, pq in per_query.items()}
        metric_names = list(aggregates["candidate"])
        comparisons = {
            reference: significance.compare_per_query(
                per_query[reference],
                per_query["candidate"],
                metric_names,
                trials=config.randomization_trials,
                seed=config.seed,
            )
            for reference in ("first_stage", "baseline")
            if reference in per_query
        }
        # The reranker alone against the first stage too, for the report (never for blessing).
        reranker_comparisons = compare_reranker_alone(
            per_query, metric_names, trials=config.randomization_trials, seed=config.seed
        )
        decision = blessing.decide(aggregates["candidate"], comparisons, config)
        # Too few queries for the randomization test to ever give p < significance_level: the
        # report warns, and with require_significance it is the reason the model is refused.
        small_sample = report.significance_warnings(
            len(per_query["candidate"]), config.significance_level, config.split, k
        )
        if small_sample and config.require_significance and not decision.blessed:
            decision.reasons.extend(small_sample)

        # ---- outputs --------------------------------------------------------------------------
        for name, run in runs.items():
            write_trec_run(os.path.join(evaluation.uri, RUN_FILES[name]), run, name)
        tf.io.gfile.copy(
            os.path.join(evaluation.uri, RUN_FILES["candidate"]),
            os.path.join(run_artifact.uri, artifacts.RUN_FILE),
            overwrite=True,
        )
        run_artifact.set_string_custom_property("split", split)
        run_artifact.set_string_custom_property("run_id", "candidate")
        run_artifact.set_int_custom_property("num_queries", len(split_qids))

        main = config.main_metric
        metrics = {
            "split": split,
            MAIN_METRIC: main,
            "relevance_level": level,
            "num_queries": len(split_qids),
            "num_judged_queries": len(split_qrels),
            "candidates_scored": n_scored,
            "first_stage_candidates_without_example": missing,
            "aggregate": aggregates,
            "per_query": per_query,
            "comparisons": comparisons,
            "reranker_comparisons": reranker_comparisons,
            "fusion": fusions["candidate"],
            "cross_validation": _cross_validation(parts, part_qids, part_fusions, per_query, main)
            if k
            else None,
            "baseline_fusion": fusions.get("baseline"),
            BLESSED: decision.blessed,
            "reasons": decision.reasons,
            # The served model not compared (another collection or vocabulary) is a warning
            # the report shows beside the small-sample one.
            "warnings": small_sample
            + ([f"no baseline: {choice.skipped}"] if choice.skipped else []),
            "checks": decision.checks,
            "thresholds": {
                key: getattr(config, key)
                for key in (
                    "min_values",
                    "min_delta_vs_first_stage",
                    "min_delta_vs_baseline",
                    "require_significance",
                    "significance_level",
                )
            },
            "runs": {name: RUN_FILES[name] for name in runs},
            "model": model.uri,
            "model_id": model.id,
            "baseline_model": baseline.path if baseline else None,
            "baseline_version": baseline.version if baseline else None,
            # Why the served model was not compared (another collection or vocabulary), if so.
            "baseline_skipped": choice.skipped,
            "scoring": scored_by,
            "scoring_seconds": round(scoring_seconds, 2),
            # Where the scoring pass's time went (scoring.pass_phases) and whether it ran in
            # process (beam_mode): the pipeline's own cost, docs/speed.md.
            "scoring_phases": phases,
            "candidates_per_second": round(n_scored * len(models) / scoring_seconds, 1),
            "seconds": round(time.time() - start, 1),
        }
        # The Trainers' TensorBoard logs (model_run: train/, validation/), for the report.
        metrics["tensorboard_logdirs"] = {
            name: uri
            for name, uri in [("Trainer", main_run)]
            + [(folds.node_id("Trainer", p.fold), p.model_run) for p in parts if k]
            if uri
        }
        # The report's listed queries in words: text and top documents (texts.py).
        metrics["listed_queries"] = texts.listed_queries_or_none(
            report.listed_qids(metrics),
            runs,
            split_qrels,
            [artifact_utils.get_split_uri([examples], p.split) for p in parts],
            models["candidate"],
        )
        # Metrics, significance tests and the report, timed up to here.
        phases["after_scoring_seconds"] = round(time.time() - t0 - scoring_seconds, 2)
        html = report.html(
            metrics,
            plots.figures_or_none(
                plots.read_train_results((input_dict.get("model_run") or [None])[0]),
                runs["candidate"],
                split_qrels,
                level,
            ),
        )
        write_text_atomic(os.path.join(evaluation.uri, METRICS_FILE), json.dumps(metrics, indent=2))
        write_text_atomic(os.path.join(evaluation.uri, REPORT_MD_FILE), report.markdown(metrics))
        write_text_atomic(os.path.join(evaluation.uri, REPORT_HTML_FILE), html)
        if report_artifact is not None:
            report_artifact.value = html  # one file at the URI: what the KFP UI renders
        # Kubeflow UI: the report as Markdown too, and the main measures as scalars.
        for key, display_name in kfp_ui.DISPLAY_NAMES.items():
            for artifact in output_dict.get(key) or []:
                artifact.set_string_custom_property("display_name", display_name)
        if output_dict.get("report_markdown"):
            output_dict["report_markdown"][0].value = report.markdown(metrics)
        if output_dict.get("metrics"):
            ui_metrics = artifact_utils.get_single_instance(output_dict["metrics"])
            for name, value in kfp_ui.scalars(metrics).items():
                ui_metrics.set_float_custom_property(name, value)
            write_text_atomic(
                os.path.join(ui_metrics.uri, METRICS_FILE),
                json.dumps(kfp_ui.scalars(metrics), indent=2),
            )
        # Headline numbers on the artifact itself, for MLMD queries and the KFP artifact view.
        evaluation.set_int_custom_property(BLESSED, int(decision.blessed))
        evaluation.set_string_custom_property(MAIN_METRIC, main)
        for name, values in aggregates.items():
            evaluation.set_float_custom_property(f"{name}_{main}", values[main])

        # Standard ModelBlessing contract: the Pusher reads `blessed`; the rest says what was
        # compared (the baseline is a served version directory, not an MLMD artifact).
        write_text_atomic(
            os.path.join(
                blessing_artifact.uri, BLESSED_FILE if decision.blessed else NOT_BLESSED_FILE
            ),
            "\n".join(decision.reasons or decision.checks) + "\n",
        )
        blessing_artifact.set_int_custom_property(BLESSED, int(decision.blessed))
        blessing_artifact.set_string_custom_property("current_model", model.uri)
        if baseline is not None:
            blessing_artifact.set_string_custom_property("baseline_model", baseline.path)
            blessing_artifact.set_int_custom_property("baseline_version", baseline.version)
        logging.info(
            "RankingEvaluator: %s %s = %.4f (first stage %.4f%s) -> %s %s",
            split,
            main,
            aggregates["candidate"][main],
            aggregates["first_stage"][main],
            f", baseline {aggregates['baseline'][main]:.4f}" if "baseline" in aggregates else "",
            "BLESSED" if decision.blessed else "NOT BLESSED",
            "; ".join(decision.reasons),
        )
