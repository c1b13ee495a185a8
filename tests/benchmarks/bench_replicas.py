"""Benchmark: the Cranfield-KNRM Trainer as one worker and as a 2-replica TFJob.

Run: .venv/bin/python tests/benchmarks/bench_replicas.py [--replicas 2] [--set KEY=VALUE ...]
     (make bench-replicas)

RankingDataGen's executor makes the examples of pipelines/configs/cranfield-knrm.yaml (the
collection in ../shared/data/cranfield). Then the pipeline's Trainer runs on them twice with the
same config, hence the same global batch (trainer.batch_size): once as one worker (TFX's Trainer
GenericExecutor in one process, no TF_CONFIG), once as the Kubeflow task's TFJobTrainerExecutor
with the local stand-in for the Training Operator (tests/components/trainer_replicas/
local_operator.py) running a Chief and Workers as processes with TF_CONFIG over localhost.
Prints each run's dev metric (the Trainer's: the validation metric of the exported, best model),
and for diagnosis the last step's and the fused (with BM25) dev metric, the wall times and the
differences. The acceptance: the Trainer's dev metrics within 0.005 (exit 1 otherwise). The last
step's can differ more: float sums in another order (an all-reduce of two replicas' gradients
against one sum) drift apart over thousands of steps once the hinge loss is near zero.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO_ROOT))
sys.path.insert(0, str(REPO_ROOT / "tests" / "components" / "trainer_replicas"))

import replicas_testlib as lib  # noqa: E402
from local_operator import LocalTrainingOperator  # noqa: E402

TOLERANCE = 0.005


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replicas", type=int, default=2)
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--work", help="working directory (default: a temporary one)")
    args = parser.parse_args()
    os.environ.setdefault("RANKPIPE_SHARED_DATA", str(REPO_ROOT.parent / "shared" / "data"))
    work = Path(args.work or tempfile.mkdtemp(prefix="bench-replicas-"))
    work.mkdir(parents=True, exist_ok=True)
    from pipelines.config import load_config

    overrides = [
        f"runner.kubeflow.trainer_replicas.count={args.replicas}",
        f"runner.kubeflow.trainer_replicas.staging_dir={work / 'staging'}",
        *args.set,
    ]
    config = load_config("cranfield-knrm", overrides)
    metric = config.trainer.validation_metric
    print(
        f"cranfield-knrm: {config.trainer.model}, {config.trainer.train_steps} steps, global batch "
        f"{config.trainer.batch_size}, {args.replicas} replicas; work dir {work}",
        flush=True,
    )
    t0 = time.monotonic()
    data = lib.run_datagen(config, work / "datagen")
    print(f"RankingDataGen: {time.monotonic() - t0:.0f}s", flush=True)

    t0 = time.monotonic()
    inputs, outputs, props = lib.trainer_input(config, data, work / "single")
    lib.run_one_worker(inputs, outputs, props, work / "single.log", threads=False, timeout=7200)
    single = lib.train_results(outputs["model_run"][0].uri)
    single_s = time.monotonic() - t0
    print(f"one worker: {single_s:.0f}s", flush=True)

    t0 = time.monotonic()
    inputs, outputs, props = lib.trainer_input(config, data, work / "task")
    operator = LocalTrainingOperator(work, env=lib.replica_env(threads=True))
    lib.run_replicated(inputs, outputs, props, operator, poll=2.0)
    multi = lib.train_results(outputs["model_run"][0].uri)
    multi_s = time.monotonic() - t0
    print(f"{args.replicas} replicas: {multi_s:.0f}s", flush=True)

    print(f"\n| dev {metric} | one worker | {args.replicas} replicas | difference |")
    print("|---|---:|---:|---:|")
    for key, label in (
        ("best_metric", "exported (best): the acceptance"),
        ("final_metric", "last step"),
    ):
        diff = multi[key] - single[key]
        print(f"| {label} | {single[key]:.4f} | {multi[key]:.4f} | {diff:+.4f} |")
    worst = abs(multi["best_metric"] - single["best_metric"])
    print(f"| best step | {single['best_step']} | {multi['best_step']} | |")
    print(f"| wall time (s) | {single_s:.0f} | {multi_s:.0f} | |")
    fused = [r.get("fusion") or {} for r in (single, multi)]
    if all("dev_fused" in f for f in fused):
        diff = fused[1]["dev_fused"] - fused[0]["dev_fused"]
        print(f"| fused with BM25 | {fused[0]['dev_fused']:.4f} | {fused[1]['dev_fused']:.4f} "
              f"| {diff:+.4f} |")  # fmt: skip
    ok = worst <= TOLERANCE
    verdict = "within" if ok else "OVER"
    print(f"\nTrainer dev {metric} difference {worst:.4f}: {verdict} {TOLERANCE}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
