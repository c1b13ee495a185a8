"""Benchmark: the demo pipeline through the local KFP v2 backend vs LocalDagRunner.

Run: .venv/bin/python tests/benchmarks/bench_kfp.py [--small] [--set KEY=VALUE ...]
     (make bench-kfp)

Runs the demo config (with --small: the CI test's budget, tests/pipelines/kfp_testing.py) once
with LocalDagRunner in one process and once through the local KFP backend (tests/kfp_local/),
where every component is a `python -m pipelines.kfp_entrypoint` process of its own, as on a
cluster (without the pod scheduling and image pull). Prints, per component:
  - LocalDagRunner: the execution's time in MLMD (its executor plus TFX's bookkeeping);
  - KFP: the task's wall time (driver + launcher: download, process, upload) split by the
    entrypoint's timing line into imports (interpreter, TF, TFX entrypoint), the executor
    class's import, and the executor run itself;
and the totals. Then it times the start-up costs in fresh processes, five times each (median):
the bare interpreter, `import tensorflow`, the TFX entrypoint's imports, and a one-element Beam
pipeline (DirectRunner, in_memory), i.e. what every task pays before its own work. KFP columns:
wall = the task (driver, launcher and process), transfer = download + upload, process = the
command, split into imports, executor import, executor, and start+exit (the interpreter's start
before the entrypoint's first line and its exit after the last, TF/Beam teardown included).
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO_ROOT))
sys.path.insert(0, str(REPO_ROOT / "tests" / "pipelines"))
sys.path.insert(0, str(REPO_ROOT / "tests"))  # kfp_local

import kfp_testing  # noqa: E402
from bench_common import readonly_store  # noqa: E402
from kfp_local import LocalKfpBackend  # noqa: E402

TIMING = re.compile(
    r"rankpipe entrypoint timing: imports ([\d.]+)s, executor import ([\d.]+)s, "
    r"executor ([\d.]+)s"
)
STARTUP_PROBES = {
    "python (bare interpreter)": "pass",
    "import tensorflow": "import tensorflow",
    "TFX entrypoint imports": (
        "import pipelines.kfp_entrypoint;"
        "import tfx.orchestration.kubeflow.v2.container.kubeflow_v2_run_executor"
    ),
    "imports + Beam in_memory pipeline": (
        "import tfx.orchestration.kubeflow.v2.container.kubeflow_v2_run_executor;"
        "import time, apache_beam as beam;"
        "from apache_beam.options.pipeline_options import PipelineOptions;"
        "t = time.perf_counter();"
        "o = PipelineOptions(['--direct_running_mode=in_memory', '--direct_num_workers=1']);"
        "p = beam.Pipeline(options=o); _ = p | beam.Create([1]) | beam.Map(lambda x: x + 1);"
        "p.run().wait_until_finish();"
        "print(f'BEAM {time.perf_counter() - t:.3f}')"
    ),
}


def local_dag_runner(work: Path, overrides: list[str]) -> tuple[float, dict[str, float]]:
    """`rankpipe run demo` in one process; per-component times from MLMD."""
    args = [sys.executable, "-m", "pipelines.cli", "run", "demo"]
    for override in overrides + [f"runner.pipeline_root={work / 'ldr'}"]:
        args += ["--set", override]
    args += ["--set", f"pusher.destination={work / 'ldr-serving'}"]
    env = dict(os.environ, RANKPIPE_OUTPUTS=str(work / "outputs"))
    t0 = time.perf_counter()
    proc = subprocess.run(args, cwd=REPO_ROOT, env=env, capture_output=True, text=True)
    total = time.perf_counter() - t0
    if proc.returncode != 0:
        sys.exit(f"LocalDagRunner run failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}")
    store = readonly_store(work / "ldr")
    node_type = store.get_context_type("node").id  # TFX names it "<pipeline>.<node id>"
    times = {}
    for execution in store.get_executions():
        contexts = store.get_contexts_by_execution(execution.id)
        node = next(c.name.split(".", 1)[1] for c in contexts if c.type_id == node_type)
        seconds = (execution.last_update_time_since_epoch - execution.create_time_since_epoch) / 1e3
        times[node] = seconds
    return total, times


def kfp_backend(work: Path, overrides: list[str]) -> tuple[float, dict[str, dict[str, float]]]:
    config = kfp_testing.demo_config(
        work / "outputs",
        overrides
        + [
            f"runner.pipeline_root={kfp_testing.PIPELINE_ROOT}",
            f"pusher.destination={work / 'kfp-serving'}",
        ],
    )
    spec = kfp_testing.compile_for_local_backend(config, work / "pipeline.yaml")
    t0 = time.perf_counter()
    result = LocalKfpBackend(work / "backend").run(spec)
    total = time.perf_counter() - t0
    times = {}
    for name, task in result.tasks.items():
        match = TIMING.search(task.log)
        imports, executor_import, executor = map(float, match.groups()) if match else (0, 0, 0)
        process = task.phases.get("process", 0.0)
        times[name] = {
            "wall": task.seconds,
            "transfer": task.phases.get("download", 0.0) + task.phases.get("upload", 0.0),
            "process": process,
            "imports": imports,
            "executor import": executor_import,
            "executor": executor,
            # Interpreter start before the entrypoint's first line, and exit (TF/Beam teardown).
            "start+exit": process - imports - executor_import - executor,
        }
    return total, times


def startup_costs(repeats: int = 5) -> dict[str, float]:
    costs = {}
    for label, code in STARTUP_PROBES.items():
        samples = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            proc = subprocess.run(
                [sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True
            )
            samples.append(time.perf_counter() - t0)
            if proc.returncode != 0:
                sys.exit(f"{label} failed: {proc.stderr[-2000:]}")
            beam = re.search(r"BEAM ([\d.]+)", proc.stdout)
            if beam:
                costs.setdefault("Beam pipeline alone (in the same process)", [])
                costs["Beam pipeline alone (in the same process)"].append(float(beam.group(1)))
        costs[label] = samples
    return {label: statistics.median(samples) for label, samples in costs.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--small", action="store_true", help="the CI test's budget")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--workdir", help="keep the runs here (default: a temp directory)")
    args = parser.parse_args()
    overrides = ["runner.pipeline_name=rankpipe-bench-kfp", *args.set]
    if not args.small:
        kfp_testing.SMALL_DEMO[:] = [
            # Only what makes the two runs comparable: the same Beam settings.
            "runner.beam.direct_running_mode=in_memory",
            "runner.beam.direct_num_workers=1",
        ]
    work = Path(args.workdir or tempfile.mkdtemp(prefix="rankpipe-bench-kfp-"))
    work.mkdir(parents=True, exist_ok=True)
    print(f"machine: {os.cpu_count()} CPUs; runs under {work}", flush=True)
    # The collection first, so that neither run pays for generating it.
    kfp_testing.demo_config(work / "outputs", overrides)

    ldr_total, ldr = local_dag_runner(work, kfp_testing.SMALL_DEMO + overrides)
    print(f"LocalDagRunner: {ldr_total:.1f}s", flush=True)
    kfp_total, kfp = kfp_backend(work, overrides)
    print(f"local KFP backend: {kfp_total:.1f}s", flush=True)

    print()
    columns = ("wall", "transfer", "process", "imports", "executor import", "executor")
    columns += ("start+exit",)
    header = ("component", "LocalDagRunner", *(f"KFP {c}" for c in columns))
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    sums = [0.0] * (len(header) - 1)
    for name, t in kfp.items():
        row = [ldr.get(name, 0.0), *(t[c] for c in columns)]
        sums = [a + b for a, b in zip(sums, row)]
        print(f"| {name} | " + " | ".join(f"{v:.1f}" for v in row) + " |")
    print("| **sum** | " + " | ".join(f"**{v:.1f}**" for v in sums) + " |")
    print(
        f"\nwhole run: LocalDagRunner {ldr_total:.1f}s (one process, incl. its imports), "
        f"KFP backend {kfp_total:.1f}s ({len(kfp)} processes)"
    )

    print("\nstart-up costs, fresh process, median of 5:")
    for label, seconds in startup_costs().items():
        print(f"  {label:<45} {seconds:6.2f}s")


if __name__ == "__main__":
    main()
