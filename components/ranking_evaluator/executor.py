"""RankingEvaluator executor: rerank held-out queries, score against qrels, bless or reject."""

from __future__ import annotations

import json
import logging
import os
import time
from typing import Any

import apache_beam as beam
import tensorflow as tf
from tfx import types
from tfx.dsl.components.base import base_beam_executor
from tfx.types import artifact_utils
from tfx.utils import io_utils, path_utils

from components import artifacts
from components.ranking_evaluator import blessing, report, scoring, significance, trec_eval

BLESSED_FILE, NOT_BLESSED_FILE = "BLESSED", "NOT_BLESSED"


def _write(path: str, text: str) -> None:
    tmp = path + ".tmp"
    with tf.io.gfile.GFile(tmp, "w") as f:
        f.write(text)
    tf.io.gfile.rename(tmp, path, overwrite=True)


def write_trec_run(path: str, run: dict[str, dict[str, float]], run_id: str) -> None:
    """TREC run with ranks consistent with scores (trec_eval order: score desc, docno desc)."""
    lines = []
    for qid in sorted(run):
        ranked = sorted(run[qid].items(), key=lambda kv: (kv[1], kv[0]), reverse=True)
        lines.extend(
            f"{qid} Q0 {docid} {rank} {score:.6f} {run_id}\n"
            for rank, (docid, score) in enumerate(ranked, 1)
        )
    _write(path, "".join(lines))


class Executor(base_beam_executor.BaseBeamExecutor):
    def Do(
        self,
        input_dict: dict[str, list[types.Artifact]],
        output_dict: dict[str, list[types.Artifact]],
        exec_properties: dict[str, Any],
    ) -> None:
        start = time.time()
        config = json.loads(exec_properties["evaluator"])
        split = config["split"]
        examples = artifact_utils.get_single_instance(input_dict["examples"])
        model = artifact_utils.get_single_instance(input_dict["model"])
        baseline = (input_dict.get("baseline_model") or [None])[0]
        evaluation = artifact_utils.get_single_instance(output_dict["evaluation"])
        blessing_artifact = artifact_utils.get_single_instance(output_dict["blessing"])
        run_artifact = artifact_utils.get_single_instance(output_dict["candidate_run"])

        qrels = trec_eval.read_qrels(
            os.path.join(artifact_utils.get_single_uri(input_dict["qrels"]), artifacts.QRELS_FILE)
        )
        first_stage_all = trec_eval.read_run(
            os.path.join(
                artifact_utils.get_single_uri(input_dict["first_stage_run"]), artifacts.RUN_FILE
            )
        )
        models = {"candidate": path_utils.serving_model_path(model.uri)}
        if baseline is not None and baseline.uri != model.uri:
            models["baseline"] = path_utils.serving_model_path(baseline.uri)

        # Score every candidate of the split with each model in one Beam pipeline.
        split_uri = artifact_utils.get_split_uri([examples], split)
        pattern = io_utils.all_files_pattern(split_uri)
        scores_dir = os.path.join(self._get_tmp_dir(), "scores")
        tf.io.gfile.makedirs(scores_dir)
        t0 = time.time()
        with self._make_beam_pipeline() as p:
            serialized = p | "ReadExamples" >> beam.io.ReadFromTFRecord(
                pattern, compression_type=beam.io.filesystem.CompressionTypes.GZIP
            )
            for name, model_dir in models.items():
                out_path = os.path.join(scores_dir, f"{name}.json")
                _ = (
                    serialized
                    | f"Score[{name}]" >> scoring.ScoreExamples(model_dir)
                    | f"Collect[{name}]" >> beam.combiners.ToList()
                    | f"Write[{name}]"
                    >> beam.Map(lambda s, path=out_path: _write(path, json.dumps(s)))
                )
        runs = {}
        for name in models:
            with tf.io.gfile.GFile(os.path.join(scores_dir, f"{name}.json")) as f:
                runs[name] = scoring.to_run(json.load(f))
        n_scored = sum(len(d) for d in runs["candidate"].values())
        logging.info(
            "Scored %d candidates of %d %s queries with %d model(s) in %.1fs",
            n_scored,
            len(runs["candidate"]),
            split,
            len(models),
            time.time() - t0,
        )
        split_qids = set(runs["candidate"])
        runs["first_stage"] = {q: d for q, d in first_stage_all.items() if q in split_qids}
        split_qrels = {q: j for q, j in qrels.items() if q in split_qids}

        measures = config["measures"]
        level = config["relevance_level"]
        per_query = {
            name: trec_eval.compute_metrics(split_qrels, run, measures, relevance_level=level)
            for name, run in runs.items()
        }
        aggregates = {name: trec_eval.mean_metrics(pq, measures) for name, pq in per_query.items()}
        comparisons = {
            reference: significance.compare_per_query(
                per_query[reference],
                per_query["candidate"],
                measures,
                trials=config["randomization_trials"],
                seed=config["seed"],
            )
            for reference in ("first_stage", "baseline")
            if reference in per_query
        }
        decision = blessing.decide(aggregates["candidate"], comparisons, config)

        for name, run in runs.items():
            write_trec_run(os.path.join(evaluation.uri, f"{name}.run"), run, name)
        tf.io.gfile.copy(
            os.path.join(evaluation.uri, "candidate.run"),
            os.path.join(run_artifact.uri, artifacts.RUN_FILE),
            overwrite=True,
        )
        metrics = {
            "split": split,
            "main_metric": config["main_metric"],
            "relevance_level": level,
            "num_queries": len(split_qids),
            "candidates_scored": n_scored,
            "aggregate": aggregates,
            "per_query": per_query,
            "comparisons": comparisons,
            "blessed": decision.blessed,
            "reasons": decision.reasons,
            "checks": decision.checks,
            "model": model.uri,
            "baseline_model": models.get("baseline"),
            "seconds": round(time.time() - start, 1),
        }
        _write(os.path.join(evaluation.uri, "metrics.json"), json.dumps(metrics, indent=2))
        _write(os.path.join(evaluation.uri, "report.md"), report.markdown(metrics))
        _write(os.path.join(evaluation.uri, "report.html"), report.html(metrics))

        # Standard ModelBlessing contract: Pusher and the LatestBlessedModel resolver read these.
        _write(
            os.path.join(
                blessing_artifact.uri, BLESSED_FILE if decision.blessed else NOT_BLESSED_FILE
            ),
            "\n".join(decision.reasons or decision.checks) + "\n",
        )
        blessing_artifact.set_int_custom_property("blessed", int(decision.blessed))
        blessing_artifact.set_string_custom_property("current_model", model.uri)
        blessing_artifact.set_int_custom_property("current_model_id", model.id)
        if "baseline" in models:
            blessing_artifact.set_string_custom_property("baseline_model", baseline.uri)
            blessing_artifact.set_int_custom_property("baseline_model_id", baseline.id)
        logging.info(
            "RankingEvaluator: %s %s = %.4f (first stage %.4f) -> %s %s",
            split,
            config["main_metric"],
            aggregates["candidate"][config["main_metric"]],
            aggregates["first_stage"][config["main_metric"]],
            "BLESSED" if decision.blessed else "NOT BLESSED",
            "; ".join(decision.reasons),
        )
