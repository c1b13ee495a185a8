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
figures over all judged queries; the default 0 keeps the single test split of
docs/results.md's single-split tables.

Systems (per collection):
  knrm            the from-scratch config (cranfield-knrm.yaml / msmarco-subset-knrm.yaml)
  de-zero-shot    the shipped dual-encoder config (cranfield.yaml / msmarco-subset.yaml) with
                  train_steps 0 (msmarco-subset.yaml ships it) and BM25's candidates only;
                  fusion tuned on dev
  de-fine-tuned   both towers, 80 steps, in-batch + BM25 hard negatives (IN_BATCH)
  de-frozen-documents  the query tower only, against frozen document vectors over whole
                  candidate lists, with feedback (FROZEN_DOCUMENTS; what cranfield.yaml ships)
  ce-fine-tuned   the same data with model=bert (the MiniLM cross-encoder) and CE_RECIPE
  de-feedback     zero-shot, BM25's candidates, with pseudo-relevance feedback tuned on dev
                  (trainer.ranking.feedback.mode: tuned; rankcore/feedback.py), from BM25's
                  top documents
  de-feedback-fused  the same, feedback from the top of the fused first pass
                  (trainer.ranking.feedback.source: fused; cranfield.yaml)
  de-hybrid       zero-shot with hybrid candidates (datagen.hybrid: MiniLM's dense top 100
                  over the whole corpus joined to BM25's top 100; docs/datagen.md)

Choosing between candidate sets on dev needs a dev figure that counts every judged document:
the Trainer's dev nDCG (dev_fused) judges only the candidates the examples hold, so a larger
candidate set (hybrid) lowers it by finding more relevant documents. With --folds K and a
zero-shot recipe (the same model in every fold branch), `dev_full` is that figure over full
judgments: each query is fused at the alpha of the branch that validated on it (its dev fold)
and scored with every judgment, from the evaluator's reranker and first-stage runs.
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

from pipelines.config import load_config  # noqa: E402
from rankcore import feedback  # noqa: E402

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
    "trainer.ranking.feedback.mode=none",  # feedback moves a dual encoder's vectors: none here
    "trainer.recipe=null",
    "datagen.sampling.mode=listwise",
    "datagen.sampling.negatives_per_positive=3",
    "datagen.sampling.samples_per_query=16",
]
# The checkpoint as it is (cranfield.yaml fine-tunes its query tower; msmarco-subset.yaml not).
ZERO_SHOT = ["trainer.train_steps=0", "trainer.recipe=null"]
# Both towers fine-tuned on sampled groups with the in-batch loss and BM25 hard negatives:
# msmarco-subset.yaml's training settings, and cranfield.yaml's before it froze documents.
IN_BATCH = [
    "trainer.train_steps=80",
    "trainer.recipe=null",
    "trainer.dual_encoder.hidden_dropout=null",
    "trainer.dual_encoder.attention_dropout=null",
    "trainer.recipe.type=in_batch",
    "trainer.batch_size=8",
    "trainer.learning_rate=2e-5",
    "trainer.encoder_learning_rate=2e-5",
    "trainer.warmup_steps=8",
    "trainer.end_learning_rate_fraction=0.0",
    "trainer.weight_decay=0.01",
    "trainer.clip_norm=1.0",
    "trainer.adam_epsilon=1e-6",
    "trainer.checkpoint_every=40",
    "trainer.keep_checkpoints=3",
    "trainer.validate_every=40",
    "datagen.sampling.mode=listwise",
    "datagen.sampling.negatives_per_positive=3",
    "datagen.sampling.samples_per_query=16",
]
# The query tower fine-tuned against frozen document vectors over whole candidate lists:
# cranfield.yaml's recipe (docs/trainer.md "Frozen documents"), for either collection.
FROZEN_DOCUMENTS = [
    "trainer.train_steps=120",
    "trainer.recipe.type=frozen_documents",
    "trainer.dual_encoder.hidden_dropout=0.0",
    "trainer.dual_encoder.attention_dropout=0.0",
    "trainer.loss=listwise_softmax",
    "trainer.batch_size=16",
    "trainer.learning_rate=5e-5",
    "trainer.encoder_learning_rate=5e-5",
    "trainer.warmup_steps=0",
    "trainer.end_learning_rate_fraction=1.0",
    "trainer.weight_decay=0.0",
    "trainer.clip_norm=0.0",
    "trainer.adam_epsilon=1e-7",
    "trainer.checkpoint_every=120",
    "trainer.keep_checkpoints=1",
    "trainer.validate_every=0",
    "datagen.sampling.mode=lists",
]
SYSTEMS = {
    "knrm": ("knrm", []),
    "de-zero-shot": (
        "dual",
        [*ZERO_SHOT, "datagen.hybrid.checkpoint_dir=null", "trainer.ranking.feedback.mode=none"],
    ),
    "de-feedback": (
        "dual",
        [
            *ZERO_SHOT,
            "datagen.hybrid.checkpoint_dir=null",
            "trainer.ranking.feedback.mode=tuned",
            "trainer.ranking.feedback.source=first_stage",
        ],
    ),
    "de-feedback-fused": (
        "dual",
        [
            *ZERO_SHOT,
            "datagen.hybrid.checkpoint_dir=null",
            "trainer.ranking.feedback.mode=tuned",
            "trainer.ranking.feedback.source=fused",
        ],
    ),
    "de-hybrid": (
        "dual",
        [*ZERO_SHOT, "datagen.hybrid.checkpoint_dir=${RANKPIPE_MINILM}"],
    ),
    "de-fine-tuned": ("dual", IN_BATCH),
    "de-frozen-documents": (
        "dual",
        [
            *FROZEN_DOCUMENTS,
            "datagen.hybrid.checkpoint_dir=null",
            "trainer.ranking.feedback.mode=tuned",
            "trainer.ranking.feedback.source=first_stage",
        ],
    ),
    "ce-fine-tuned": ("dual", CE_RECIPE),
}
MEASURES = ("ndcg_cut_10", "map", "mrr_cut_10", "recall_100")


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


def dev_over_full_judgments(
    evaluation: str, metrics: dict, pipeline_root: Path, split_seed: int
) -> float:
    """Mean nDCG@10 (the main metric) of every judged query fused at the alpha of the fold
    branch that validated on it, over the full qrels. Valid for a zero-shot recipe only: the
    reranker run then holds the one model's scores, the same in every branch."""
    from components.ranking_datagen.splits import fold_of
    from rankcore import folds
    from rankcore.fusion import fuse_run
    from rankcore.metrics import compute_metrics, read_qrels, read_run

    k = metrics["cross_validation"]["folds"]
    alphas = metrics["fusion"]["alphas"]
    qrels = read_qrels(os.path.join(latest(pipeline_root, "rankpipe.Qrels"), "qrels.txt"))
    reranker = read_run(os.path.join(evaluation, metrics["runs"]["reranker"]))
    first = read_run(os.path.join(evaluation, metrics["runs"]["first_stage"]))
    alpha_of_dev_fold = {folds.branch(f, k).dev: alphas[f] for f in range(k)}
    run = {}
    for qid in qrels:
        alpha = alpha_of_dev_fold[fold_of(qid, k, split_seed)]
        if qid in reranker:
            run.update(fuse_run({qid: reranker[qid]}, {qid: first[qid]}, alpha))
    main = metrics["main_metric"]
    per_query = compute_metrics(qrels, run, [main], relevance_level=metrics["relevance_level"])
    # Queries with no candidate score 0, as trec_eval -c counts them.
    return sum(per_query.get(q, {}).get(main, 0.0) for q in qrels) / len(qrels)


def rows_of(
    system: str, pipeline_root: Path, seconds: float, split_seed: int = 0
) -> tuple[list[dict], dict]:
    evaluation = latest(pipeline_root, "ModelEvaluation")
    with open(os.path.join(evaluation, "metrics.json")) as f:
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
        feedbacks = cv_fusion.get("feedbacks") or []
        if feedbacks:
            dev_row["fold_feedback"] = " ".join(
                feedback.describe(f) if feedback.is_on(f) else "off" for f in feedbacks
            )
        # With feedback the fold models differ (each its own setting): dev_full does not apply.
        if trained["steps"] == 0 and not any(feedback.is_on(f) for f in feedbacks):
            dev_row["dev_full"] = dev_over_full_judgments(
                evaluation, metrics, pipeline_root, split_seed
            )
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
            config = COLLECTIONS[collection][kind]
            seed = load_config(config, [*overrides, *folds]).datagen.split.seed
            rows, dev = rows_of(system, root, seconds, seed)
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
                    *(
                        ["fold_alphas", "fold_feedback", "fold_dev_fused_mean", "dev_full"]
                        if args.folds
                        else []
                    ),
                ],
            )
        )
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    print(f"\noutputs under {outputs}")


if __name__ == "__main__":
    main()
