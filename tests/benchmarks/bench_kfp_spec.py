"""Benchmark: a shipped config's compiled spec run whole on the local KFP backend, with a retry.

Run: .venv/bin/python tests/benchmarks/bench_kfp_spec.py [CONFIG] [--fail-first TASK]
     [--parallelism N] [--set KEY=VALUE ...]   (make bench-kfp-spec; CONFIG: cranfield-knrm)

CI runs the demo's spec on the local backend (tests/pipelines/test_kfp_local_backend.py); this
runs a real collection's: `rankpipe compile CONFIG` (as kfp_testing.compile_for_local_backend
adapts it to this machine), every task a `python -m pipelines.kfp_entrypoint` process of its
own, the fold Trainers in parallel, and TASK's first pod killed (exit 137; default: Trainer)
so that its retryPolicy must start it again. Prints what the spec asks for (requests, limits,
retries, the platform spec's tasks), then per task: attempts, the wait before each retry and
seconds; then the evaluator's verdict and headline figures.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO_ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO_ROOT))
sys.path.insert(0, str(REPO_ROOT / "tests" / "pipelines"))
sys.path.insert(0, str(REPO_ROOT / "tests"))  # kfp_local

import kfp_testing  # noqa: E402
from kfp_local import LocalKfpBackend  # noqa: E402

from pipelines.config import load_config  # noqa: E402


def spec_summary(spec_file: Path) -> None:
    """What the compiled spec asks of the cluster, task by task."""
    documents = list(yaml.safe_load_all(spec_file.read_text()))
    spec = documents[0]
    platform = documents[1] if len(documents) > 1 else {}
    executors = spec["deploymentSpec"]["executors"]
    print("| task | requests (CPU / GB) | limits (CPU / GB) | retries | platform spec |")
    print("|---|---|---|---|---|")
    k8s = (platform.get("platforms") or {}).get("kubernetes", {}).get("deploymentSpec", {})
    k8s_executors = k8s.get("executors", {})
    for name, task in sorted(spec["root"]["dag"]["tasks"].items()):
        label = spec["components"][task["componentRef"]["name"]]["executorLabel"]
        resources = executors[label].get("container", {}).get("resources", {})
        retry = task.get("retryPolicy", {})
        print(
            f"| {name} | {resources.get('cpuRequest', '-')} / {resources.get('memoryRequest', '-')}"
            f" | {resources.get('cpuLimit', '-')} / {resources.get('memoryLimit', '-')}"
            f" | {retry.get('maxRetryCount', 0)} (backoff {retry.get('backoffDuration', '-')})"
            f" | {'yes' if label in k8s_executors else '-'} |"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("config", nargs="?", default="cranfield-knrm")
    parser.add_argument(
        "--fail-first", metavar="TASK", help="default: the first Trainer task by name (Trainer)"
    )
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument(
        "--parallelism",
        type=int,
        help="at most this many tasks at once (Argo's workflow parallelism); default: all. "
        "Cranfield's six Trainer pods hold about 4 GB each here, more than a 24 GB machine "
        "has for them at once",
    )
    parser.add_argument("--workdir", help="keep the run here (default: a temp directory)")
    args = parser.parse_args()
    work = Path(args.workdir or tempfile.mkdtemp(prefix="rankpipe-bench-kfp-spec-"))
    work.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("RANKPIPE_OUTPUTS", str(work / "outputs"))
    overrides = [
        f"runner.pipeline_name=rankpipe-bench-{args.config}",
        f"runner.pipeline_root={kfp_testing.PIPELINE_ROOT}",
        f"pusher.destination={work / 'serving'}",
        *args.set,
    ]
    config = load_config(args.config, overrides)
    spec_file = kfp_testing.compile_for_local_backend(config, work / "pipeline.yaml")
    print(f"machine: {os.cpu_count()} CPUs; {args.config} compiled to {spec_file}", flush=True)
    spec_summary(spec_file)
    tasks = next(yaml.safe_load_all(spec_file.read_text()))["root"]["dag"]["tasks"]
    args.fail_first = args.fail_first or min(t for t in tasks if t.startswith("Trainer"))
    if args.fail_first not in tasks:
        sys.exit(f"--fail-first {args.fail_first!r}: not a task of the spec ({sorted(tasks)})")
    backend = LocalKfpBackend(
        work / "backend", fail_first={args.fail_first: 1}, parallelism=args.parallelism
    )
    t0 = time.perf_counter()
    result = backend.run(spec_file)
    total = time.perf_counter() - t0
    print(f"\nrun {result.run_id}: {total:.0f}s on the local KFP backend\n")
    print("| task | attempts | waits (s) | seconds |")
    print("|---|---:|---|---:|")
    for name, task in sorted(result.tasks.items(), key=lambda kv: kv[1].started):
        waits = ", ".join(f"{w:.1f}" for w in getattr(task, "retry_waits", []) or []) or "-"
        print(f"| {name} | {task.attempts} | {waits} | {task.seconds:.0f} |")
    if result.tasks[args.fail_first].attempts != 2:
        sys.exit(f"{args.fail_first} was not retried once: the retryPolicy did not run")
    evaluation = result.tasks["RankingEvaluator"].outputs["evaluation"]
    metrics = json.loads((backend.store_path(evaluation.uri) / "metrics.json").read_text())
    print(f"\nRankingEvaluator: blessed {metrics['blessed']}, {metrics['num_queries']} queries")
    for line in metrics["checks"] + metrics["reasons"]:
        print(f"  {line}")
    for system, values in metrics["aggregate"].items():
        print(f"  {system}: {metrics['main_metric']} {values.get(metrics['main_metric'])}")


if __name__ == "__main__":
    main()
