"""`make bench-overhead`: the pipeline's own cost, and how the evaluator's scoring scales
(issue 16, items 3 and 4; figures in docs/speed.md "The pipeline's own cost").

Own cost (default): `rankpipe run demo` and `rankpipe run cranfield` (zero-shot MiniLM dual
encoder, `make pretrained`), each from nothing (fresh outputs, no cache), in a child process.
For each component: its wall seconds (MLMD execution create -> last update, as
bench_speed.component_seconds), the part its executor timed itself (RankingDataGen's
summary.json `timings`, the Trainer's train_results.json `seconds`, the evaluator's
metrics.json `seconds`, `scoring_seconds` and `scoring_phases`: SavedModel loads, seconds
inside the model, the rest of the Beam pass) and the rest (TFX driver/publisher bookkeeping,
MLMD, the executor's construction). For the whole run: the process's wall against the sum of
the components; the difference is the run's own start-up (imports, config, demo data,
pipeline compile), the gaps between components and the end. Also, in this process: the
start-up of one Beam pipeline whose workers import TensorFlow, in process (`in_memory`) and
with 2 `multi_processing` workers, and TFX's staging-package build
(dependency_utils.build_ephemeral_package), which every Beam component paid on every run.

`--before REV` runs each pipeline also from that commit (`git archive` into a temporary
directory, run with this .venv), interleaved with this tree's runs, and prints both side by
side.

Scale (`--scale`, needs a dual-encoder SavedModel: `--model DIR`, default the Cranfield run's):
a synthetic split (random token ids; Q queries, each with `depth` candidates drawn from a pool
of documents) scored by components/ranking_evaluator/scoring.py score_split, as the evaluator
runs it, in a child process per run: with 1 and 2 `multi_processing` workers and in process,
at 1x and 4x the candidates (depth D and 4D over the same queries and document pool). Reports
seconds, candidates/s, distinct texts/s, SavedModel loads, and the peak RSS of the whole
process tree (the child and its Beam workers, psutil polled every 0.1 s; RSS counts shared
pages in every process, so the sum is an upper bound).

The machine is shared: run it when nothing else does (`uptime`), and compare within one run.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO_ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import psutil  # noqa: E402
from bench_common import readonly_store  # noqa: E402

COMPONENT_ORDER = (
    "ImportSchemaGen",
    "RankingDataGen",
    "StatisticsGen",
    "ExampleValidator",
    "ExampleGate",
    "Trainer",
    "RankingEvaluator",
    "Pusher",
)


# ---- own cost ------------------------------------------------------------------------------


def run_pipeline(tree: Path, config: str, outputs: Path, name: str) -> dict:
    """`rankpipe run CONFIG` from source tree `tree` in a child process; its wall and the
    epoch seconds it started and ended."""
    argv = [sys.executable, "-m", "pipelines.cli", "run", config]
    argv += ["--set", f"runner.pipeline_name={name}"]
    env = dict(os.environ, RANKPIPE_OUTPUTS=str(outputs), PYTHONUNBUFFERED="1")
    env["PYTHONPATH"] = str(tree)  # the tree's packages before the editable install's
    print(f"  {name}: rankpipe run {config} from {tree} ...", flush=True)
    start = time.time()
    outputs.mkdir(parents=True, exist_ok=True)
    stderr = (outputs / "stderr.txt").open("w")
    proc = subprocess.Popen(
        argv, cwd=tree, env=env, stdout=subprocess.PIPE, stderr=stderr, text=True
    )
    printed = start
    lines = []
    for line in proc.stdout:  # unbuffered: a line arrives when it is printed
        lines.append(line)
        if line.startswith("Total time:"):
            printed = time.time()  # the summary is out: what follows is the exit
    proc.wait()
    end = time.time()
    if proc.returncode != 0:
        sys.exit("pipeline failed:\n" + "".join(lines[-40:]) + (outputs / "stderr.txt").read_text())
    print(f"    done in {end - start:.0f}s", flush=True)
    return {"root": outputs / "pipelines" / name, "start": start, "end": end, "printed": printed}


def executions(root: Path) -> dict[str, tuple[float, float]]:
    """(create, last update) epoch seconds of each component's execution, by component."""
    store = readonly_store(root)
    types = {t.id: t.name.rsplit(".", 1)[-1] for t in store.get_execution_types()}
    out = {}
    for e in store.get_executions():
        out[types[e.type_id]] = (
            e.create_time_since_epoch / 1000,
            e.last_update_time_since_epoch / 1000,
        )
    return out


def latest_file(root: Path, type_name: str, file_name: str) -> dict:
    found = readonly_store(root).get_artifacts_by_type(type_name)
    if not found:
        return {}
    path = Path(max(found, key=lambda a: a.id).uri) / file_name
    return json.loads(path.read_text()) if path.exists() else {}


def in_process_lines(root: Path) -> list[str]:
    """The components' "Beam runs in process" log lines (components/beam_mode.py)."""
    lines = []
    for log in sorted((root / "logs").glob("*.log")):
        lines += [ln.strip() for ln in log.open(errors="replace") if "Beam runs in process" in ln]
    return lines


def trainer_log_seconds(root: Path) -> dict[str, float]:
    """The Trainer's `Trainer seconds: setup 2.9, ..., export 9.1, total 70.2` log line."""
    for log in sorted((root / "logs").glob("*.log")):
        for line in log.open(errors="replace"):
            if "Trainer seconds: " in line:
                pairs = line.split("Trainer seconds: ", 1)[1].strip().split(", ")
                return {k: float(v) for k, v in (pair.rsplit(" ", 1) for pair in pairs)}
    return {}


def own_cost(run: dict) -> dict:
    """Per component: wall, the executor's own timed seconds and what they are, the rest."""
    root = run["root"]
    spans = executions(root)
    summary = latest_file(root, "rankpipe.DatagenSummary", "summary.json")
    trained = latest_file(root, "ModelRun", "train_results.json")
    metrics = latest_file(root, "ModelEvaluation", "metrics.json")
    rows = {}
    for name, (t0, t1) in spans.items():
        row = {"wall": t1 - t0, "own": None, "detail": ""}
        if name == "RankingDataGen" and summary:
            row["own"] = summary.get("seconds")
            row["detail"] = ", ".join(f"{k} {v}" for k, v in summary.get("timings", {}).items())
        elif name == "Trainer" and (trainer_log_seconds(root) or trained.get("seconds")):
            # train_results.json is written before the export: the log line has it all.
            secs = trainer_log_seconds(root) or trained["seconds"]
            row["own"] = secs.get("total")
            row["detail"] = ", ".join(f"{k} {v:.1f}" for k, v in secs.items() if k != "total")
        elif name == "RankingEvaluator" and metrics:
            row["own"] = metrics.get("seconds")
            phases = metrics.get("scoring_phases") or {}
            row["detail"] = f"scoring {metrics.get('scoring_seconds')}" + (
                " ("
                + ", ".join(
                    f"{k} {phases[k]}"
                    for k in (
                        "saved_model_loads",
                        "model_load_seconds",
                        "model_seconds",
                        "beam_seconds",
                        "in_process",
                    )
                    if k in phases
                )
                + ")"
                if phases
                else ""
            )
        rows[name] = row
    first = min(t0 for t0, _ in spans.values())
    last = max(t1 for _, t1 in spans.values())
    ordered = sorted(spans.values())
    gaps = sum(max(0.0, b[0] - a[1]) for a, b in zip(ordered, ordered[1:]))
    return {
        "root": root,
        "components": rows,
        "wall": run["end"] - run["start"],
        "sum": sum(r["wall"] for r in rows.values()),
        "before_first": first - run["start"],
        "gaps": gaps,
        "after_last": run["printed"] - last,
        "exit": run["end"] - run["printed"],
        "in_process": in_process_lines(root),
        "ndcg": (metrics.get("aggregate", {}).get("candidate", {}) or {}).get(
            metrics.get("main_metric", "ndcg_cut_10")
        ),
    }


# The outputs that must not change (bytes): examples, vocabulary, qrels and runs, the scores.
COMPARED = (
    "RankingDataGen/examples/*/Split-*/*",
    "RankingDataGen/vocabulary/*/*",
    "RankingDataGen/transform_graph/*/transform_fn/assets/*",
    "RankingDataGen/qrels/*/*",
    "RankingDataGen/first_stage_run/*/*",
    "RankingEvaluator/evaluation/*/*.run",
    "StatisticsGen/statistics/*/Split-*/*",
)


def compare_outputs(a: Path, b: Path) -> tuple[list[str], list[str]]:
    """(identical, different) output files of two runs' pipeline roots (execution ids cut)."""
    import hashlib

    def digests(root: Path) -> dict[str, str]:
        out = {}
        for pattern in COMPARED:
            for path in root.glob(pattern):
                parts = path.relative_to(root).parts
                key = "/".join(parts[:2] + parts[3:])  # drop the execution id
                out[key] = hashlib.sha256(path.read_bytes()).hexdigest()
        return out

    da, db = digests(a), digests(b)
    same = sorted(k for k in da if db.get(k) == da[k])
    return same, sorted((set(da) | set(db)) - set(same))


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def print_own_cost(config: str, results: dict[str, dict]) -> None:
    """One table per config: a column pair (wall, own) per tree."""
    labels = list(results)
    print(f"\n### {config}\n")
    header = " | ".join(f"{lab} wall s | {lab} own s" for lab in labels)
    print(f"| component | {header} | {labels[-1]}: what its own seconds are |")
    print("|---|" + "---:|---:|" * len(labels) + "---|")
    names = [n for n in COMPONENT_ORDER if any(n in r["components"] for r in results.values())]
    for name in names:
        cells = []
        for lab in labels:
            row = results[lab]["components"].get(name, {})
            cells += [_fmt(row.get("wall")), _fmt(row.get("own"))]
        detail = results[labels[-1]]["components"].get(name, {}).get("detail", "")
        print(f"| {name} | {' | '.join(cells)} | {detail} |")

    def line(title: str, key: str) -> None:
        cells = [c for lab in labels for c in (f"{results[lab][key]:.1f}", "")]
        print(f"| {title} | {' | '.join(cells)} | |")

    line("sum of components", "sum")
    line("before the first component (start-up, imports, config, pipeline)", "before_first")
    line("between components (orchestration)", "gaps")
    line("after the last component (summary)", "after_last")
    line("process exit after the summary (interpreter teardown)", "exit")
    line("**whole run (process wall)**", "wall")
    for lab in labels:
        r = results[lab]
        print(f"\n{lab}: main metric {r['ndcg']}; in process: {r['in_process'] or 'none'}")
    if len(labels) > 1:
        same, different = compare_outputs(results[labels[0]]["root"], results[labels[-1]]["root"])
        print(
            f"\n{labels[0]} vs {labels[-1]}: {len(same)} output files identical; different: "
            f"{different or 'none'}"
        )


def beam_startup(mode: str, workers: int) -> float:
    """Seconds for a 4-element Beam pipeline whose workers import TensorFlow."""
    import apache_beam as beam
    from apache_beam.options.pipeline_options import PipelineOptions

    def touch(x: int) -> int:
        import tensorflow as tf  # noqa: F401  (what every worker of our components imports)

        return x

    args = [f"--direct_running_mode={mode}", f"--direct_num_workers={workers}"]
    t0 = time.perf_counter()
    with beam.Pipeline(options=PipelineOptions(args)) as p:
        _ = p | beam.Create(range(4)) | beam.Map(touch)
    return time.perf_counter() - t0


def staging_package_seconds() -> float:
    """TFX's ephemeral staging-package build (what each Beam executor did before)."""
    from tfx.utils import dependency_utils

    t0 = time.perf_counter()
    sdist = dependency_utils.build_ephemeral_package()
    seconds = time.perf_counter() - t0
    import shutil

    shutil.rmtree(Path(sdist).parents[3], ignore_errors=True)  # tmpdir/build/tfx/dist/x.tar.gz
    return seconds


def import_seconds() -> tuple[float, float]:
    """(process wall, of which importing what `rankpipe run` imports: TFX, TensorFlow, Beam,
    the pipeline) for a fresh Python process."""
    code = (
        "import time; t = time.perf_counter(); import pipelines.cli; "
        "from pipelines import local_runner, pipeline; print(time.perf_counter() - t)"
    )
    t0 = time.perf_counter()
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return time.perf_counter() - t0, float(out.strip().splitlines()[-1])


def export_tree(rev: str, into: Path) -> Path:
    """`git archive REV` of this repository, unpacked under `into`."""
    archive = into / "tree.tar"
    subprocess.run(["git", "archive", "-o", str(archive), rev], cwd=REPO_ROOT, check=True)
    tree = into / f"tree-{rev}"
    with tarfile.open(archive) as tar:
        tar.extractall(tree)
    return tree


# ---- scale ---------------------------------------------------------------------------------


def write_synthetic_split(
    directory: Path, queries: int, depth: int, pool: int, seed: int = 0
) -> tuple[int, int]:
    """Eval examples as RankingDataGen writes them (one candidate each): `queries` queries of
    12-20 random token ids, each with `depth` distinct candidates from a pool of `pool`
    documents of 20-120 ids. Returns (candidates, distinct texts)."""
    import numpy as np
    import tensorflow as tf

    rng = np.random.default_rng(seed)
    docs = [rng.integers(2000, 20000, rng.integers(20, 121)).tolist() for _ in range(pool)]
    directory.mkdir(parents=True, exist_ok=True)
    used = set()
    n = 0
    with tf.io.TFRecordWriter(str(directory / "data.gz"), options="GZIP") as writer:
        for q in range(queries):
            query = rng.integers(2000, 20000, rng.integers(12, 21)).tolist()
            for d in rng.choice(pool, size=depth, replace=False).tolist():
                used.add(d)
                feature = {
                    "qid": tf.train.Feature(
                        bytes_list=tf.train.BytesList(value=[f"q{q}".encode()])
                    ),
                    "docids": tf.train.Feature(
                        bytes_list=tf.train.BytesList(value=[f"d{d}".encode()])
                    ),
                    "query_ids": tf.train.Feature(int64_list=tf.train.Int64List(value=query)),
                    "doc_ids": tf.train.Feature(int64_list=tf.train.Int64List(value=docs[d])),
                    "doc_lengths": tf.train.Feature(
                        int64_list=tf.train.Int64List(value=[len(docs[d])])
                    ),
                }
                example = tf.train.Example(features=tf.train.Features(feature=feature))
                writer.write(example.SerializeToString())
                n += 1
    return n, queries + len(used)


def score_child(split: str, model: str, mode: str, workers: int, out: str) -> None:
    """In a child process: one scoring pass as the evaluator runs it; JSON to `out`."""
    import apache_beam as beam
    import tensorflow_text  # noqa: F401
    from apache_beam.options.pipeline_options import PipelineOptions

    from components.ranking_evaluator import scoring

    args = [f"--direct_running_mode={mode}", f"--direct_num_workers={workers}"]
    phases: dict = {}
    t0 = time.perf_counter()
    runs, how = scoring.score_split(
        lambda: beam.Pipeline(options=PipelineOptions(args)),
        [split],
        {"candidate": model},
        256,
        os.path.join(tempfile.mkdtemp(prefix="scores-", dir=Path(split).parent), "part"),
        phases=phases,
    )
    seconds = time.perf_counter() - t0
    n = sum(len(d) for d in runs["candidate"].values())
    Path(out).write_text(json.dumps({"seconds": seconds, "candidates": n, "how": how, **phases}))


def measure_child(argv: list[str]) -> tuple[dict, float, float]:
    """Runs argv; returns (its JSON result, peak RSS of the tree in MiB, peak of one process)."""
    out = tempfile.mktemp(suffix=".json", prefix="bench-overhead-")
    proc = subprocess.Popen([*argv, "--out", out], cwd=REPO_ROOT)
    parent = psutil.Process(proc.pid)
    peak_tree = peak_one = 0
    while proc.poll() is None:
        total = 0
        try:
            for p in [parent, *parent.children(recursive=True)]:
                try:
                    rss = p.memory_info().rss
                except psutil.Error:
                    continue
                total += rss
                peak_one = max(peak_one, rss)
        except psutil.Error:
            pass
        peak_tree = max(peak_tree, total)
        time.sleep(0.1)
    if proc.returncode != 0:
        sys.exit(f"scoring child failed: {argv}")
    result = json.loads(Path(out).read_text())
    os.unlink(out)
    return result, peak_tree / (1 << 20), peak_one / (1 << 20)


def scale(model: str, queries: int, depth: int, pool: int, work: Path) -> None:
    splits = {}
    for factor in (1, 4):
        d = work / f"split-x{factor}"
        splits[factor] = (d, *write_synthetic_split(d, queries, depth * factor, pool))
    print(f"\nscoring scale: model {model}")
    print(
        "| candidates | Beam | workers | s | candidates/s | texts/s | model loads | "
        "model s (sum) | peak RSS tree MiB | peak RSS one process MiB |"
    )
    print("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    plan = [
        (1, "multi_processing", 1),
        (1, "multi_processing", 2),
        (1, "in_memory", 1),
        (4, "multi_processing", 2),
        (4, "multi_processing", 1),
        (4, "in_memory", 1),
    ]
    for factor, mode, workers in plan:
        directory, n, texts = splits[factor]
        argv = [
            sys.executable,
            __file__,
            "--score-child",
            "--split",
            str(directory),
            "--model",
            model,
            "--mode",
            mode,
            "--workers",
            str(workers),
        ]
        result, tree_mib, one_mib = measure_child(argv)
        s = result["seconds"]
        print(
            f"| {n:,} ({factor}x) | {mode} | {workers} | {s:.1f} | {n / s:,.0f} | "
            f"{texts / s:,.0f} | {result.get('saved_model_loads')} | "
            f"{result.get('model_seconds')} | {tree_mib:,.0f} | {one_mib:,.0f} |",
            flush=True,
        )
    print(
        f"({queries} queries, depth {depth} and {depth * 4}, pool of {pool} documents; "
        f"distinct texts {splits[1][2]:,} and {splits[4][2]:,})"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--configs", default="demo,cranfield")
    parser.add_argument("--before", help="also run each pipeline from this git revision")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--skip-own-cost", action="store_true")
    parser.add_argument("--scale", action="store_true", help="the scoring scale runs too")
    parser.add_argument("--model", help="dual-encoder SavedModel for --scale")
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--depth", type=int, default=100)
    parser.add_argument("--pool", type=int, default=1000)
    # child mode (internal)
    parser.add_argument("--score-child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--split", help=argparse.SUPPRESS)
    parser.add_argument("--mode", help=argparse.SUPPRESS)
    parser.add_argument("--workers", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.score_child:
        score_child(args.split, args.model, args.mode, args.workers, args.out)
        return

    work = Path(tempfile.mkdtemp(prefix="bench-overhead-"))
    print(f"work directory {work}; load {os.getloadavg()}", flush=True)
    model = args.model
    if not args.skip_own_cost:
        trees = {"after": REPO_ROOT}
        if args.before:
            trees = {"before": export_tree(args.before, work), "after": REPO_ROOT}
        for config in args.configs.split(","):
            results: dict[str, dict] = {}
            for rep in range(args.repeats):
                for label, tree in trees.items():
                    out = work / f"{config}-{label}-{rep}"
                    run = run_pipeline(tree, config, out, f"overhead-{config}")
                    cost = own_cost(run)
                    key = label if args.repeats == 1 else f"{label} #{rep + 1}"
                    results[key] = cost
                    if config == "cranfield" and label == "after" and not model:
                        found = readonly_store(run["root"]).get_artifacts_by_type("Model")
                        model = os.path.join(max(found, key=lambda a: a.id).uri, "Format-Serving")
            print_own_cost(config, results)
        print(f"\nload after the pipelines: {os.getloadavg()}")
        for mode, workers in (("in_memory", 1), ("multi_processing", 2)):
            seconds = min(beam_startup(mode, workers) for _ in range(2))
            print(
                f"Beam pipeline start-up, workers importing TensorFlow, {mode} "
                f"({workers}): {seconds:.1f}s (best of 2)"
            )
        print(f"TFX staging package build: {staging_package_seconds():.1f}s")
        wall, imports = min(import_seconds() for _ in range(2))
        print(
            f"a fresh process importing the pipeline: {wall:.1f}s, of which imports "
            f"{imports:.1f}s (best of 2)"
        )
    if args.scale:
        if not model:
            sys.exit("--scale needs --model (a dual-encoder SavedModel) or a cranfield run")
        scale(model, args.queries, args.depth, args.pool, work)
    print(f"\nload at the end: {os.getloadavg()}")


if __name__ == "__main__":
    main()
