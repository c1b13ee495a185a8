"""Benchmark: RankingEvaluator throughput (candidates scored per second) on Cranfield's test split.

Run: .venv/bin/python tests/benchmarks/bench_evaluator.py [--pipeline-root DIR] [--train-steps N]
     [--repeats N] [--replicate N] [--modes in_memory,multi_processing]

Needs a trained model and Cranfield's examples. Without --pipeline-root it runs the cranfield-knrm
pipeline once (`rankpipe run cranfield-knrm`, few train steps, in-process Beam) under
$RANKPIPE_OUTPUTS (default /tmp/rankpipe-bench-evaluator) and reuses it on later runs (cached);
with --pipeline-root it reuses that run's artifacts (latest Model, Examples, qrels, first-stage
run in its MLMD). Times, for each Beam running mode:
  - scoring: the evaluator's Beam scoring (ReadFromTFRecord -> ScoreExamples -> write), with
    one model and with two (candidate + baseline, one fused pass);
  - executor: the whole RankingEvaluator Do (scoring, trec_eval metrics, significance tests
    with 10,000 trials per measure, run files, report) with one model;
and, as the ceiling for the model itself, the SavedModel's score_examples signature called in a
plain loop. `--replicate N` also scores the split N times over (qids made distinct), to show
steady-state throughput once the fixed costs (worker start, model load) are amortised.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO_ROOT))

import apache_beam as beam  # noqa: E402
import tensorflow as tf  # noqa: E402
import tensorflow_text  # noqa: E402, F401  (the model's tokenizer ops)
from apache_beam.options.pipeline_options import PipelineOptions  # noqa: E402
from bench_common import readonly_store, run_cranfield_pipeline  # noqa: E402
from tfx.dsl.components.base import base_beam_executor  # noqa: E402
from tfx.types import artifact_utils, standard_artifacts  # noqa: E402

from components import artifacts  # noqa: E402
from components.ranking_evaluator import constants, executor, per_pair  # noqa: E402
from components.ranking_evaluator.component import HtmlReport  # noqa: E402
from components.ranking_evaluator.config import EvaluatorConfig  # noqa: E402
from rankcore.constants import SCORE_SIGNATURE  # noqa: E402

PIPELINE_NAME = "bench-evaluator"
SPLIT = "test"


def build_pipeline(outputs: Path, train_steps: int) -> Path:
    overrides = [
        f"trainer.train_steps={train_steps}",
        "runner.beam.direct_running_mode=in_memory",
        "runner.beam.direct_num_workers=1",
    ]
    return run_cranfield_pipeline(outputs, PIPELINE_NAME, overrides)


def latest_uris(pipeline_root: Path) -> dict[str, str]:
    store = readonly_store(pipeline_root)
    out = {}
    for key, type_name in (
        ("model", "Model"),
        ("examples", "Examples"),
        ("qrels", "rankpipe.Qrels"),
        ("first_stage_run", "rankpipe.TrecRun"),
    ):
        found = store.get_artifacts_by_type(type_name)
        if key == "first_stage_run":  # the datagen's, not an evaluator's candidate run
            found = [a for a in found if "RankingDataGen" in a.uri]
        if not found:
            sys.exit(f"no {type_name} artifact in {pipeline_root}/metadata.sqlite")
        out[key] = max(found, key=lambda a: a.id).uri
    return out


def split_files(examples_uri: str) -> list[str]:
    return sorted(tf.io.gfile.glob(os.path.join(examples_uri, f"Split-{SPLIT}", "*")))


def replicated_split(examples_uri: str, times: int, out_dir: Path) -> tuple[str, int]:
    """The split `times` over, qids suffixed so each copy is a distinct query."""
    path = out_dir / f"{SPLIT}-x{times}.tfrecord.gz"
    records = [
        r.numpy()
        for r in tf.data.TFRecordDataset(split_files(examples_uri), compression_type="GZIP")
    ]
    with tf.io.TFRecordWriter(str(path), options="GZIP") as writer:
        for i in range(times):
            for record in records:
                example = tf.train.Example.FromString(record)
                example.features.feature["qid"].bytes_list.value[0] += f"#{i}".encode()
                writer.write(example.SerializeToString())
    return str(path), len(records) * times


def beam_args(mode: str) -> list[str]:
    workers = 1 if mode == "in_memory" else (os.cpu_count() or 1)
    return [f"--direct_running_mode={mode}", f"--direct_num_workers={workers}"]


def time_scoring(pattern: str, model_dir: str, n_models: int, mode: str, tmp: Path) -> float:
    out = tmp / f"scores-{time.monotonic_ns()}"
    t0 = time.perf_counter()
    with beam.Pipeline(options=PipelineOptions(beam_args(mode))) as p:
        _ = (
            p
            | beam.io.ReadFromTFRecord(
                pattern, compression_type=beam.io.filesystem.CompressionTypes.GZIP
            )
            | per_pair.ScoreExamples([model_dir] * n_models)
            | beam.Map(json.dumps)
            | beam.io.WriteToText(str(out))
        )
    return time.perf_counter() - t0


def time_executor(uris: dict[str, str], mode: str, tmp: Path) -> tuple[float, dict]:
    base = Path(tempfile.mkdtemp(dir=tmp))

    def make(cls, name: str):
        os.makedirs(base / name)
        artifact = cls()
        # A ValueArtifact (the HTML report) is a file at its URI, the others are directories.
        artifact.uri = str(base / name / "value") if cls is HtmlReport else str(base / name)
        return artifact

    def given(cls, uri: str, **props):
        artifact = cls()
        artifact.uri = uri
        for k, v in props.items():
            setattr(artifact, k, v)
        return artifact

    inputs = {
        "examples": [
            given(
                standard_artifacts.Examples,
                uris["examples"],
                split_names=artifact_utils.encode_split_names(["train", "dev", "test"]),
            )
        ],
        "model": [given(standard_artifacts.Model, uris["model"])],
        "qrels": [given(artifacts.Qrels, uris["qrels"])],
        "first_stage_run": [given(artifacts.TrecRun, uris["first_stage_run"])],
    }
    outputs = {
        "evaluation": [make(standard_artifacts.ModelEvaluation, "evaluation")],
        "blessing": [make(standard_artifacts.ModelBlessing, "blessing")],
        "candidate_run": [make(artifacts.TrecRun, "candidate_run")],
        "report": [make(HtmlReport, "report")],
    }
    # The pipeline's default measures, 10,000 randomization trials, batch size.
    config = dataclasses.asdict(EvaluatorConfig(split=SPLIT, min_values={"ndcg_cut_10": 0.2}))
    context = base_beam_executor.BaseBeamExecutor.Context(
        beam_pipeline_args=beam_args(mode), tmp_dir=str(base / "tmp"), unique_id="1"
    )
    t0 = time.perf_counter()
    executor.Executor(context).Do(inputs, outputs, {"evaluator": json.dumps(config)})
    seconds = time.perf_counter() - t0
    with open(base / "evaluation" / constants.METRICS_FILE) as f:
        return seconds, json.load(f)


def time_signature(model_dir: str, examples_uri: str, batch_size: int) -> tuple[float, int]:
    records = [
        r.numpy()
        for r in tf.data.TFRecordDataset(split_files(examples_uri), compression_type="GZIP")
    ]
    fn = tf.saved_model.load(model_dir).signatures[SCORE_SIGNATURE]
    fn(examples=tf.constant(records[:batch_size]))  # trace/warm up
    t0 = time.perf_counter()
    for i in range(0, len(records), batch_size):
        fn(examples=tf.constant(records[i : i + batch_size]))
    return time.perf_counter() - t0, len(records)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pipeline-root", type=Path, help="reuse this cranfield pipeline run")
    ap.add_argument("--train-steps", type=int, default=200)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--replicate", type=int, default=10, help="0 to skip the replicated split")
    ap.add_argument("--modes", default="in_memory,multi_processing")
    ap.add_argument("--skip-executor", action="store_true")
    args = ap.parse_args()

    root = args.pipeline_root
    if root is None:
        outputs = Path(os.environ.get("RANKPIPE_OUTPUTS", "/tmp/rankpipe-bench-evaluator"))
        root = build_pipeline(outputs, args.train_steps)
    uris = latest_uris(root)
    model_dir = os.path.join(uris["model"], "Format-Serving")
    tmp = Path(tempfile.mkdtemp(prefix="bench-evaluator-"))
    pattern = os.path.join(uris["examples"], f"Split-{SPLIT}", "*")
    n_split = sum(
        1 for _ in tf.data.TFRecordDataset(split_files(uris["examples"]), compression_type="GZIP")
    )
    print(f"model: {model_dir}")
    print(f"Cranfield {SPLIT} split: {n_split} candidates; {os.cpu_count()} CPUs")

    rows = []  # (path, mode, models, candidates, [seconds])
    sig_s, sig_n = time_signature(model_dir, uris["examples"], 256)
    rows.append(("score_examples signature, plain loop", "-", 1, sig_n, [sig_s]))
    workloads = [(f"{SPLIT} split", pattern, n_split)]
    if args.replicate > 1:
        path, n = replicated_split(uris["examples"], args.replicate, tmp)
        workloads.append((f"{SPLIT} split x{args.replicate}", path, n))
    metrics = None
    for mode in args.modes.split(","):
        for label, data, n in workloads:
            for n_models in (1, 2):
                seconds = [
                    time_scoring(data, model_dir, n_models, mode, tmp) for _ in range(args.repeats)
                ]
                rows.append((f"Beam scoring, {label}", mode, n_models, n, seconds))
        if not args.skip_executor:
            runs = [time_executor(uris, mode, tmp) for _ in range(args.repeats)]
            metrics = runs[-1][1]
            rows.append((f"executor Do, {SPLIT} split", mode, 1, n_split, [s for s, _ in runs]))

    print()
    header = f"{'path':<42} {'beam mode':<17} {'models':>6} {'candidates':>10}"
    print(f"{header} {'median s':>9} {'min s':>7} {'cand/s (median)':>16}")
    for path, mode, n_models, n, seconds in rows:
        med = statistics.median(seconds)
        print(
            f"{path:<42} {mode:<17} {n_models:>6} {n:>10} {med:9.2f} {min(seconds):7.2f} "
            f"{n * n_models / med:16.0f}"
        )
    print("(cand/s counts candidate x model scorings; times include Beam start and model load)")
    if metrics:
        agg = metrics["aggregate"]
        print()
        print(
            f"evaluation of the benchmark model: {metrics['num_queries']} queries, "
            f"ndcg_cut_10 {agg['candidate']['ndcg_cut_10']:.4f} "
            f"(first stage {agg['first_stage']['ndcg_cut_10']:.4f}), "
            f"{'BLESSED' if metrics['blessed'] else 'NOT BLESSED'}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
