"""The quality table: does the trained reranker beat its first stage? (not CI: `make bench-quality`)

Every row is a real `rankpipe run` (LocalDagRunner, from nothing: each system gets its own
pipeline name, so no cache, no baseline and no push is shared between rows) on CPU, with the
real all-MiniLM-L6-v2 checkpoint (`make pretrained`). Figures come from what the pipeline
wrote: the RankingEvaluator's metrics.json on the TEST split (first stage, reranker alone,
fused; paired randomization p vs BM25, wins/ties/losses) and the Trainer's train_results.json
(DEV figures: the fusion alpha and every recipe choice were made on dev queries only).

    python tests/benchmarks/bench_quality.py [--outputs DIR] [--only cranfield|msmarco]
        [--systems knrm,de-zero-shot,de-fine-tuned,ce-fine-tuned] [--json FILE] [--folds K]

--folds K: every run cross-validated over K folds (evaluator.cross_validation.folds), the
figures over all judged queries; the default 0 keeps the single test split the table above
the README's cross-validated one was measured on.

Systems (per collection):
  knrm            the from-scratch config (cranfield-knrm.yaml / msmarco-subset-knrm.yaml)
  de-zero-shot    the shipped dual-encoder config (cranfield.yaml / msmarco-subset.yaml) with
                  train_steps 0 (what cranfield.yaml ships); fusion tuned on dev
  de-fine-tuned   the same with trainer.train_steps=80, in-batch + BM25 hard negatives (what
                  msmarco-subset.yaml ships)
  ce-fine-tuned   the same data with model=bert (the MiniLM cross-encoder) and CE_RECIPE
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_common import REPO_ROOT, readonly_store  # noqa: E402

COLLECTIONS = {
    "cranfield": {"dual": "cranfield", "knrm": "cranfield-knrm"},
    "msmarco": {"dual": "msmarco-subset", "knrm": "msmarco-subset-knrm"},
}
# The MiniLM cross-encoder on CPU: a new score head on [CLS], listwise softmax over a positive
# and its BM25 hard negatives, a higher rate for the new head than for the encoder, warm-up.
CE_RECIPE = [
    "trainer.model=bert",
    "trainer.bert.checkpoint_dir=${RANKPIPE_MINILM}",
    "trainer.loss=listwise_softmax",
    "trainer.learning_rate=1e-3",
    "trainer.encoder_learning_rate=3e-5",
    "trainer.batch_size=8",
    "trainer.train_steps=80",
]
SYSTEMS = {
    "knrm": ("knrm", []),
    "de-zero-shot": ("dual", ["trainer.train_steps=0"]),
    "de-fine-tuned": ("dual", ["trainer.train_steps=80"]),
    "ce-fine-tuned": ("dual", CE_RECIPE),
}
MEASURES = ("ndcg_cut_10", "map", "mrr_cut_10")


def run(config: str, name: str, overrides: list[str], outputs: Path) -> tuple[Path, float]:
    argv = [sys.executable, "-m", "pipelines.cli", "run", config]
    argv += ["--set", f"runner.pipeline_name={name}"]
    for override in overrides:
        argv += ["--set", override]
    print(f"[{time.strftime('%H:%M:%S')}] {name}: rankpipe run {config} {overrides}", flush=True)
    t0 = time.perf_counter()
    env = dict(os.environ, RANKPIPE_OUTPUTS=str(outputs))
    proc = subprocess.run(argv, cwd=REPO_ROOT, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - t0
    if proc.returncode != 0:
        sys.exit(f"{name} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    print(f"  done in {seconds:.0f}s", flush=True)
    return outputs / "pipelines" / name, seconds


def latest(pipeline_root: Path, type_name: str, producer: str | None = None) -> str:
    """The newest artifact of a type (of one producer node, e.g. "Trainer" and not a fold
    branch's "Trainer_fold3", when given)."""
    artifacts = readonly_store(pipeline_root).get_artifacts_by_type(type_name)
    if producer:
        artifacts = [a for a in artifacts if f"/{producer}/" in a.uri]
    return max(artifacts, key=lambda a: a.id).uri


def rows_of(system: str, pipeline_root: Path, seconds: float) -> tuple[list[dict], dict]:
    with open(os.path.join(latest(pipeline_root, "ModelEvaluation"), "metrics.json")) as f:
        metrics = json.load(f)
    with open(
        os.path.join(latest(pipeline_root, "ModelRun", "Trainer"), "train_results.json")
    ) as f:
        trained = json.load(f)
    agg = metrics["aggregate"]
    main = metrics["main_metric"]
    fused = metrics.get("fusion") is not None
    alone_key, alone_cmp = (
        ("reranker", metrics["reranker_comparisons"])
        if fused
        else (
            "candidate",
            metrics["comparisons"],
        )
    )
    base = {
        "train_s": trained["wall_seconds"],
        "pipeline_s": seconds,
        "queries": metrics["num_queries"],
        "blessed": metrics["blessed"],
    }
    out = []
    for label, key, cmp in (
        ("alone", alone_key, alone_cmp),
        *((("fused", "candidate", metrics["comparisons"]),) if fused else ()),
    ):
        stats = cmp["first_stage"][main]
        out.append(
            {
                "system": f"{system} {label}",
                **{m: agg[key][m] for m in MEASURES},
                "p_vs_bm25": stats["randomization_p"],
                "wtl": f"{stats['wins']}/{stats['ties']}/{stats['losses']}",
                **base,
            }
        )
    first = {"system": "BM25", **{m: agg["first_stage"][m] for m in MEASURES}}
    dev = trained.get("fusion") or {}
    dev_row = {
        "system": system,
        "steps": trained["steps"],
        "alpha": dev.get("alpha"),
        "dev_reranker": dev.get("dev_reranker", trained.get("final_metric")),
        "dev_fused": dev.get("dev_fused"),
        "dev_first_stage": dev.get("dev_first_stage"),
    }
    cv_fusion = metrics.get("fusion") or {}
    if "alphas" in cv_fusion:  # cross-validation: every fold branch's dev figure, and the mean
        dev_fused = cv_fusion["dev_fused"]
        dev_row["fold_alphas"] = " ".join(f"{a:.2f}" for a in cv_fusion["alphas"])
        dev_row["fold_dev_fused_mean"] = sum(dev_fused) / len(dev_fused)
    return [first, *out], dev_row


def table(rows: list[dict], columns: list[str]) -> str:
    def fmt(v) -> str:
        if isinstance(v, float):
            return f"{v:.4f}" if abs(v) < 10 else f"{v:.0f}"
        return "" if v is None else str(v)

    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(fmt(r.get(c)) for c in columns) + " |" for r in rows]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--outputs", type=Path, default=None)
    parser.add_argument("--only", choices=sorted(COLLECTIONS), action="append")
    parser.add_argument("--systems", default=",".join(SYSTEMS))
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument(
        "--folds",
        type=int,
        default=0,
        help="evaluator.cross_validation.folds for every run (0: the single test split, "
        "whatever the config ships)",
    )
    args = parser.parse_args()
    folds = [f"evaluator.cross_validation.folds={args.folds}"]
    outputs = args.outputs or Path(tempfile.mkdtemp(prefix="bench-quality-"))
    results = {}
    for collection in args.only or list(COLLECTIONS):
        test_rows, dev_rows = [], []
        for system in args.systems.split(","):
            kind, overrides = SYSTEMS[system]
            root, seconds = run(
                COLLECTIONS[collection][kind],
                f"q-{collection}-{system}",
                [*overrides, *folds],
                outputs,
            )
            rows, dev = rows_of(system, root, seconds)
            if not test_rows:
                test_rows.append(rows[0])  # BM25 once
            test_rows += rows[1:]
            dev_rows.append(dev)
        results[collection] = {"test": test_rows, "dev": dev_rows}
        split = f"all queries, {args.folds} folds" if args.folds else "test split"
        print(f"\n## {collection}: {split} ({test_rows[1]['queries']} queries)\n")
        print(
            table(
                test_rows,
                ["system", *MEASURES, "p_vs_bm25", "wtl", "train_s", "pipeline_s", "blessed"],
            )
        )
        print(f"\n{collection}: dev figures the choices were made on\n")
        print(
            table(
                dev_rows,
                [
                    "system",
                    "steps",
                    "alpha",
                    "dev_first_stage",
                    "dev_reranker",
                    "dev_fused",
                    *(["fold_alphas", "fold_dev_fused_mean"] if args.folds else []),
                ],
            )
        )
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    print(f"\noutputs under {outputs}")


if __name__ == "__main__":
    main()
