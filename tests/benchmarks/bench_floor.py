"""`make bench-speed` (first part): the compute floor of `rankpipe run cranfield`, and the run's
ratio to it, per component, measured side by side in one run on this machine.

1. The run: `rankpipe run cranfield` as shipped (fresh outputs, no cache) as its own process:
   its wall time, each component's seconds (MLMD executions, all fold copies summed), the peak
   RSS of its largest process and the bytes its pipeline directory keeps.
2. The encoder work that run needed, read from its own artifacts:
   - corpus: every document through each frozen encoder once (the CorpusEncoder's vectors
     artifact keeps each document's ids per encoder);
   - training: each Trainer's steps x trainer.batch_size queries through the query tower,
     forward and backward (3x a forward pass), at the mean query of the collection;
   - Trainer dev scoring: each branch's dev queries through the query tower and the companion
     (documents come from the corpus vectors with frozen documents);
   - evaluator: every fold's test queries through its fold's query tower and the companion.
   FLOPs per text of n tokens ([CLS] and [SEP] included), per layer of width H and FFN width I:
   8nH^2 (Q, K, V, O) + 4nHI (FFN) + 4n^2H (scores and the weighted sum); embeddings, layer
   norms and pooling are left out (under 1%).
3. The plain loop: the same checkpoints (rankcore SentenceEncoder, the CorpusEncoder's encoder)
   over a sample of the same texts, sorted by length, in batches, after a warm-up call, in
   float32 and in bfloat16 (Keras mixed_bfloat16, as the pipeline runs it); training as a
   tf.function GradientTape step over the query tower (Adam), the Trainer's batch size.
4. floor(component) = its FLOPs / the plain loop's FLOP/s for that kind of work at the run's
   precision. Components that run no encoder (RankingDataGen, StatisticsGen, the Pusher...)
   have a floor of 0: all of their time is overhead against the floor.

Goals (issue 40): the whole run within 1.5x of its floor; each encoding pass within 1.3x of the
plain loop at the same precision. The machine is shared: compare the ratios of one run.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
import tf_keras as keras  # noqa: E402
from bench_common import (  # noqa: E402
    artifact_uris,
    execution_seconds,
    latest_uri,
    run_cranfield_pipeline,
    split_records,
)

from components.corpus_encoder.encode import encoder_name  # noqa: E402
from components.ranking_evaluator import eval_examples  # noqa: E402
from pipelines.config import load_config  # noqa: E402
from pipelines.runs import human_size, tree_bytes  # noqa: E402
from rankcore import corpus_vectors, folds  # noqa: E402
from rankcore.encoders import hf_checkpoint  # noqa: E402
from rankcore.encoders.sentence import SentenceEncoder, built_under  # noqa: E402
from trainer_module.config import TrainerConfig  # noqa: E402
from trainer_module.models import build_model  # noqa: E402
from trainer_module.pretrained import installed_minilm_dir, installed_mpnet_dir  # noqa: E402
from trainer_module.run_fn import read_vocab  # noqa: E402

PRECISIONS = ("float32", "mixed_bfloat16")
DOC_SAMPLE = 256  # documents per plain-loop measurement (a random sample, fixed seed)
TRAIN_STEPS = 12  # timed plain training steps, after two warm-up steps
# A CorpusEncoder progress line (components/corpus_encoder/encode.py Embed._progress).
_PROGRESS = re.compile(
    r"CorpusEncoder (\w+) \((.+?), max_length \d+\): (\d+) of (\d+) texts in this worker, "
    r"([\d.]+) texts/s"
)


def text_flops(n_ids: int, arch: hf_checkpoint.BertArchitecture) -> float:
    """A forward pass over one text of `n_ids` token ids (module docstring, 2.)."""
    n, h, i = n_ids + 2, arch.hidden_size, arch.intermediate_size
    return arch.num_layers * (8 * n * h * h + 4 * n * h * i + 4 * n * n * h)


def flops(texts: list[list[int]], arch: hf_checkpoint.BertArchitecture) -> float:
    return float(sum(text_flops(len(t), arch) for t in texts))


def encode_rate(checkpoint_dir: str, precision: str, texts: list[list[int]], batch: int) -> float:
    """FLOP/s of the plain loop: SentenceEncoder.embed over `texts` sorted by length."""
    encoder = built_under(precision, lambda: SentenceEncoder(checkpoint_dir))
    arch = hf_checkpoint.read_checkpoint(checkpoint_dir).arch
    ordered = sorted(texts, key=len)
    encoder.embed(ordered[-batch:], batch)  # warm-up (the longest batch)
    t0 = time.perf_counter()
    encoder.embed(ordered, batch)
    return flops(ordered, arch) / (time.perf_counter() - t0)


def train_rate(vocab: list[str], precision: str, queries: list[list[int]], batch: int) -> float:
    """FLOP/s of plain training steps of the query tower (3x the forward FLOPs): a random
    batch of `queries` per step, a softmax over the batch's other queries' fixed vectors."""
    cfg = TrainerConfig.from_dict(
        {
            "model": "dual_encoder",
            "dual_encoder": {"checkpoint_dir": installed_minilm_dir()},
            "recipe": {"type": "in_batch"},
        }
    )
    max_q = max(len(q) for q in queries)
    model = built_under(precision, lambda: build_model(cfg, len(vocab), max_q, max_q, vocab))
    optimizer = keras.optimizers.Adam(1e-5)
    spec = tf.TensorSpec([None, None], tf.int64)

    @tf.function(input_signature=[spec, tf.TensorSpec([None, None], tf.float32)])
    def step(ids, targets):
        with tf.GradientTape() as tape:
            q = tf.cast(model.own_query(ids, training=True), tf.float32)
            logits = tf.matmul(q, targets, transpose_b=True)
            labels = tf.range(tf.shape(ids)[0])
            loss = tf.reduce_mean(
                tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits)
            )
        variables = model.trainable_variables
        optimizer.apply_gradients(zip(tape.gradient(loss, variables), variables))
        return loss

    rng = random.Random(0)
    dim = model.arch.hidden_size

    def batch_of() -> tuple[tf.Tensor, tf.Tensor, float]:
        chosen = rng.sample(queries, batch)
        padded = np.zeros([batch, max(len(q) for q in chosen)], np.int64)
        for row, q in enumerate(chosen):
            padded[row, : len(q)] = q
        targets = tf.random.stateless_normal([batch, dim], [0, len(chosen[0])])
        return tf.constant(padded), targets, 3 * flops(chosen, model.arch)

    for _ in range(2):
        step(*batch_of()[:2])
    total, seconds = 0.0, 0.0
    for _ in range(TRAIN_STEPS):
        ids, targets, work = batch_of()
        t0 = time.perf_counter()
        step(ids, targets).numpy()
        seconds += time.perf_counter() - t0
        total += work
    return total / seconds


def split_queries(examples: str, split: str) -> dict[str, list[int]]:
    """qid -> query ids of one eval split of the Examples artifact."""
    queries: dict[str, list[int]] = {}
    for record in split_records(examples, split):
        qid, _, query, _ = eval_examples.example_pair(record)
        queries.setdefault(qid, list(query))
    return queries


def encoding_passes(root: Path) -> dict[str, float]:
    """The CorpusEncoder's last progress line per encoder in the run's log: texts/s."""
    rates: dict[str, float] = {}
    for log in sorted((root / "logs").glob("run-*.log")):
        for match in _PROGRESS.finditer(log.read_text(errors="replace")):
            rates[match.group(2)] = float(match.group(5))
    return rates


def run_work(root: Path, cfg) -> dict:
    """The encoder work of the run (module docstring, 2.), as text lists per kind."""
    examples = latest_uri(root, "Examples")
    k = cfg.evaluator.cross_validation.folds
    by_fold = {f: split_queries(examples, folds.split_name(f, folds.EVAL)) for f in range(k)}
    max_q = cfg.datagen.max_query_length
    fold_queries = {f: [q[:max_q] for q in qs.values()] for f, qs in by_fold.items()}
    every_query = [q for qs in fold_queries.values() for q in qs]
    vectors_uri = latest_uri(root, "rankpipe.CorpusVectors")
    meta = corpus_vectors.read_meta(vectors_uri)
    corpus = {
        e.checkpoint_dir: (
            e.precision,
            list(map(list, corpus_vectors.read_table(vectors_uri, e.key).ids)),
        )
        for e in meta.encoders
    }
    runs = []
    for uri in artifact_uris(root, "ModelRun"):
        for path in Path(uri).rglob("train_results.json"):
            runs.append(json.loads(path.read_text()))
    dev_folds = [folds.branch(f, k).dev for f in range(k)] + [cfg.datagen.split.dev_fold]
    dev_queries = [q for f in dev_folds for q in fold_queries[f]]
    steps = sum(r["steps"] for r in runs)
    precision = next(
        (line.split("`")[1] for line in runs[0]["recipe"] if line.startswith("precision `")),
        "float32",
    )
    return {
        "corpus": corpus,
        "queries": every_query,
        "dev_queries": dev_queries,
        "train_queries": steps * cfg.trainer.batch_size,
        "trainers": len(runs),
        "trainer_precision": precision,
        "vocab": read_vocab(latest_uri(root, "TransformGraph")),
    }


def plain_loops(work: dict, cfg) -> dict[tuple[str, str, str], float]:
    """(kind, checkpoint, precision) -> the plain loop's FLOP/s (module docstring, 3.)."""
    minilm, mpnet = installed_minilm_dir(), installed_mpnet_dir()
    rng = random.Random(0)
    sample = {
        d: rng.sample(texts, min(DOC_SAMPLE, len(texts)))
        for d, (_, texts) in work["corpus"].items()
    }
    batch = cfg.trainer.eval_batch_size
    print("plain loops (FLOP/s) ...", flush=True)
    rate: dict[tuple[str, str, str], float] = {}
    for precision in PRECISIONS:
        for d in (minilm, mpnet):
            rate[("docs", d, precision)] = encode_rate(d, precision, sample[d], batch)
            rate[("queries", d, precision)] = encode_rate(d, precision, work["queries"], batch)
        rate[("train", minilm, precision)] = train_rate(
            work["vocab"], precision, work["queries"], cfg.trainer.batch_size
        )
        for key, value in rate.items():
            if key[2] == precision:
                print(
                    f"  {key[0]:8s} {encoder_name(key[1]):28s} {precision:15s} "
                    f"{value / 1e9:6.1f} GFLOP/s",
                    flush=True,
                )
    return rate


def floor_parts(work: dict, rate: dict, arch: dict) -> dict[str, list[tuple[float, float]]]:
    """Component -> [(FLOPs, the plain loop's FLOP/s for them)] (module docstring, 2. and 4.)."""
    minilm, mpnet = installed_minilm_dir(), installed_mpnet_dir()
    p = work["trainer_precision"]
    mean_query = flops(work["queries"], arch[minilm]) / len(work["queries"])
    return {
        "CorpusEncoder": [
            (flops(texts, arch[d]), rate[("docs", d, prec)])
            for d, (prec, texts) in work["corpus"].items()
        ],
        "Trainer": [
            (3 * mean_query * work["train_queries"], rate[("train", minilm, p)]),
            *(
                (flops(work["dev_queries"], arch[d]), rate[("queries", d, p)])
                for d in (minilm, mpnet)
            ),
        ],
        "RankingEvaluator": [
            (flops(work["queries"], arch[d]), rate[("queries", d, p)]) for d in (minilm, mpnet)
        ],
    }


def report(
    wall: float,
    peak_rss: int,
    kept: int,
    root: Path,
    seconds: dict[str, list[float]],
    work: dict,
    rate: dict,
    arch: dict,
    in_run_rates: dict[str, float],
) -> dict:
    """Prints the run's table (each component's floor, seconds and ratio) and the encoding
    passes against the plain loop; returns the same figures (--json)."""
    parts_of = floor_parts(work, rate, arch)
    p = work["trainer_precision"]
    print()
    print(
        f"`rankpipe run cranfield` as shipped: {wall:.0f} s wall, peak RSS "
        f"{human_size(peak_rss)}, {human_size(kept)} kept under {root}; Trainer precision "
        f"{p}, corpus "
        + ", ".join(f"{encoder_name(d)} {prec}" for d, (prec, _) in work["corpus"].items())
    )
    print()
    print("| component | runs | GFLOP | floor s | pipeline s | ratio |")
    print("|---|---:|---:|---:|---:|---:|")
    total_floor = 0.0
    components = {}
    for name in sorted(seconds, key=lambda n: -sum(seconds[n])):
        spent = sum(seconds[name])
        parts = next((v for k, v in parts_of.items() if name.endswith(k)), [])
        gflop = sum(f for f, _ in parts) / 1e9
        floor_s = sum(f / r for f, r in parts)
        total_floor += floor_s
        ratio = f"{spent / floor_s:.2f}x" if floor_s else "(no encoder)"
        components[name] = {
            "runs": len(seconds[name]),
            "gflop": gflop,
            "floor_s": floor_s,
            "seconds": spent,
        }
        print(
            f"| {name} | {len(seconds[name])} | {gflop:.0f} | {floor_s:.1f} | {spent:.0f} | "
            f"{ratio} |"
        )
    print(
        f"| whole run (process wall) | | | {total_floor:.1f} | {wall:.0f} | "
        f"{wall / total_floor:.2f}x |"
    )
    print()
    print("encoding passes inside the CorpusEncoder (its log's texts/s) against the plain loop:")
    passes = {}
    for d, (prec, texts) in work["corpus"].items():
        plain = rate[("docs", d, prec)] / (flops(texts, arch[d]) / len(texts))
        inside = in_run_rates.get(d)
        passes[encoder_name(d)] = {
            "precision": prec,
            "plain_texts_per_s": plain,
            "run_texts_per_s": inside,
        }
        note = f"{plain / inside:.2f}x" if inside else "(no progress line found)"
        print(
            f"  {encoder_name(d)}: plain loop {plain:.1f} texts/s, in the run "
            f"{inside or float('nan'):.1f} texts/s: {note}"
        )
    return {
        "wall_s": wall,
        "peak_rss_bytes": peak_rss,
        "kept_bytes": kept,
        "trainer_precision": p,
        "components": components,
        "floor_s": total_floor,
        "ratio": wall / total_floor,
        "encoding_passes": passes,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--outputs", help="RANKPIPE_OUTPUTS for the run (default: a temp dir)")
    parser.add_argument("--keep", action="store_true", help="keep the run's outputs")
    parser.add_argument(
        "--reuse", action="store_true", help="measure the run already under --outputs again"
    )
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    outputs = Path(args.outputs or tempfile.mkdtemp(prefix="bench-floor-"))
    cfg = load_config("cranfield")

    record = outputs / "bench_floor_run.json"  # the run's own figures, for --reuse
    if args.reuse:
        root = outputs / "pipelines" / "bench-floor"
        wall, peak_rss, kept = json.loads(record.read_text())
    else:
        t0 = time.perf_counter()
        root = run_cranfield_pipeline(outputs, "bench-floor", [], "cranfield")
        wall = time.perf_counter() - t0
        peak_rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
        kept = tree_bytes(str(root)) or 0
        record.write_text(json.dumps([wall, peak_rss, kept]))
    seconds = execution_seconds(root)
    work = run_work(root, cfg)
    in_run_rates = encoding_passes(root)

    minilm, mpnet = installed_minilm_dir(), installed_mpnet_dir()
    arch = {d: hf_checkpoint.read_checkpoint(d).arch for d in (minilm, mpnet)}
    rate = plain_loops(work, cfg)
    figures = report(wall, peak_rss, kept, root, seconds, work, rate, arch, in_run_rates)
    if args.json:
        args.json.write_text(json.dumps(figures, indent=1))
    if not (args.keep or args.outputs):
        shutil.rmtree(outputs, ignore_errors=True)


if __name__ == "__main__":
    main()
