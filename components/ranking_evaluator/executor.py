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
)
from components.ranking_evaluator.baseline import find_baseline
from components.ranking_evaluator.config import EvaluatorConfig
from components.ranking_evaluator.constants import (
    BLESSED,
    BLESSED_FILE,
    MAIN_METRIC,
    METRICS_FILE,
    NOT_BLESSED_FILE,
    REPORT_HTML_FILE,
    REPORT_MD_FILE,
)
from rankcore import fusion
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
    the README's "alone" figures, which show whether the model learned anything beyond the
    first stage it is fused with. Report only, never for blessing. Empty when the candidate
    carries no fusion (its run is then the reranker alone, already in `comparisons`)."""
    if "reranker" not in per_query:
        return {}
    return {
        "first_stage": significance.compare_per_query(
            per_query["first_stage"], per_query["reranker"], metric_names, trials=trials, seed=seed
        )
    }


class Executor(base_beam_executor.BaseBeamExecutor):
    def Do(self, input_dict: Artifacts, output_dict: Artifacts, exec_properties: Props) -> None:
        start = time.time()
        config = EvaluatorConfig.from_dict(json.loads(exec_properties["evaluator"]))
        split = config.split
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
        baseline = find_baseline(exec_properties.get("push_destination") or "", model.uri)
        if baseline is not None:
            models["baseline"] = baseline.path

        # ---- scoring: every candidate of the split, all models in one Beam pass ---------------
        # Dual encoders embed each distinct text once; other models score every pair (scoring.py).
        split_uri = artifact_utils.get_split_uri([examples], split)
        # A fresh directory per attempt: a retried execution must not read a failed one's parts.
        # Workers write it and read the split and models: worker-reachable (worker_dirs.py).
        scores_prefix = os.path.join(
            worker_dirs.work_dir(
                self,
                f"scores-{uuid.uuid4().hex}",
                "RankingEvaluator",
                {"examples": split_uri, **models},
            ),
            "part",
        )
        # A small split is scored in process: no Beam worker start-up (components/beam_mode.py).
        split_bytes = beam_mode.input_bytes([os.path.join(split_uri, "*")])
        make_pipeline = beam_mode.pipeline_maker(self, split_bytes, "RankingEvaluator")
        phases: dict[str, float] = {}
        # A dual encoder's Trainer already embedded the dev split's texts with this very model
        # (rankcore/embeddings.py): the test split's texts among them are not embedded again.
        model_run = (input_dict.get("model_run") or [None])[0]
        reuse = {
            "candidate": scoring.reusable_embeddings(
                model_run.uri if model_run else None, models["candidate"]
            )
        }
        t0 = time.time()
        runs, scored_by = scoring.score_split(
            make_pipeline,
            split_uri,
            models,
            batch_size=config.batch_size,
            scores_prefix=scores_prefix,
            phases=phases,
            reuse=reuse,
        )
        scoring_seconds = time.time() - t0
        phases["in_process"] = beam_mode.chooses_in_process(self, split_bytes)
        n_scored = sum(len(d) for d in runs["candidate"].values())
        if not n_scored:
            raise ValueError(f"the {split} split of {examples.uri} has no examples to score")
        logging.info(
            "Scored %d candidates of %d %s queries with %d model(s) (%s) in %.1fs: %s",
            n_scored,
            len(runs["candidate"]),
            split,
            len(models),
            scored_by,
            scoring_seconds,
            phases,
        )

        # ---- metrics: the split's queries against the full qrels --------------------------
        split_qids = sorted(runs["candidate"])
        runs["first_stage"] = {q: first_stage_all.get(q, {}) for q in split_qids}
        missing = sum(
            len(set(runs["first_stage"][q]) - set(runs["candidate"][q])) for q in split_qids
        )
        if missing:
            logging.warning("%d first-stage candidates of the split have no example", missing)
        # Fusion with the first stage, as each model ranks when it carries fusion (its SavedModel's
        # assets.extra/fusion.json; the rank_candidates signature computes the same): "candidate"
        # and "baseline" are then the fused rankings, "reranker" the candidate's scores alone.
        fusions = {name: fusion.read_fusion(path) for name, path in models.items()}
        if fusions["candidate"] is not None:
            runs["reranker"] = runs["candidate"]
        for name, fused in fusions.items():
            if fused is not None:
                runs[name] = fusion.fuse_run(runs[name], runs["first_stage"], fused["alpha"])
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
            "baseline_fusion": fusions.get("baseline"),
            BLESSED: decision.blessed,
            "reasons": decision.reasons,
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
            "scoring": scored_by,
            "scoring_seconds": round(scoring_seconds, 2),
            # Where the scoring pass's time went (scoring.pass_phases) and whether it ran in
            # process (beam_mode): the pipeline's own cost, docs/speed.md.
            "scoring_phases": phases,
            "candidates_per_second": round(n_scored * len(models) / scoring_seconds, 1),
            "seconds": round(time.time() - start, 1),
        }
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
