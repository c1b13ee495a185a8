"""Benchmark: RankingDataGen end to end at 250k, 1M and 4M passages, Beam with 1 vs 2 workers
vs a plain Python reference, peak memory per process, and tokenizer throughput against
HuggingFace `tokenizers` (docs/datagen.md, "Performance").

Run: .venv/bin/python tests/benchmarks/bench_datagen.py [--docs 250000,1000000,4000000]
         [--queries-per-1000-docs 1] [--repeats 1] [--modes beam-1w,beam-2w,reference]
         [--skip-cranfield] [--skip-synthetic] [--runner-probe]

Collections: Cranfield from $RANKPIPE_SHARED_DATA (default <repo>/../shared/data) with
pipelines/configs/cranfield-knrm.yaml (it learns its own 8000-token vocabulary; cranfield.yaml
needs the MiniLM checkpoint of `make pretrained`), and synthetic BEIR-layout collections of
each --docs size generated in a temp dir (Zipf-distributed vocabulary of 30k pseudo-words,
30-80 words a passage; --queries-per-1000-docs queries per 1,000 passages, each with 30
planted judgments) with the default datagen config (BM25 depth 100, 8000-token vocabulary,
pairwise x 64).

For each collection, each mode runs in its own fresh subprocess (same imports, same warm-up):
  beam-1w / beam-2w  the executor's Do() (what LocalDagRunner calls) on DirectRunner
                     multi_processing with 1 or 2 workers: both Beam passes, TFT, all outputs;
  reference          the same work in one plain Python process: the same readers, word counts
                     (same TF normalization), the same vocabulary learner, bm25s, splits,
                     sampling, the same tokenization graph run eagerly on batches, the same
                     example builder, seeded shuffle and gzip shards. No Beam, no tf.Transform.
Beam modes run with the in-process switch for small inputs off (RANKPIPE_IN_PROCESS_BELOW_MB=0).
Collections of 1M passages or more run once whatever --repeats says.
Timed: Do() / the reference function (imports excluded). Peak RSS, sampled every 50 ms: of
the whole tree, of the subprocess (the driver, on the DirectRunner also the runner) and of the
largest of its children (Beam's SDK workers). Then a tokenizer micro-benchmark on Cranfield's
and the smallest synthetic collection's texts with the vocabulary the run learned:
FastWordpieceTokenizer as our graph runs it (normalization + tokenization, tf.function,
batches of 1024) vs HuggingFace tokenizers (BertNormalizer + BertPreTokenizer + WordPiece on
the same vocab), both single-threaded, and the fraction of texts with identical ids.
Goals (issue 18): 2 workers >= 1.6x of 1 worker; beam-1w within 1.25x of the reference; from
1M to 4M passages time <= 4.5x and peak RSS per worker <= 1.2x.
--runner-probe measures only the runner: a pipeline that holds nothing, with and without a
Reshuffle, at each --docs size (its worker's memory is the DirectRunner's own).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO_ROOT))
sys.path.insert(0, str(REPO_ROOT / "tests" / "components" / "ranking_datagen"))
SHARED = Path(os.environ.get("RANKPIPE_SHARED_DATA", REPO_ROOT.parent / "shared" / "data"))
MODES = ("beam-1w", "beam-2w", "reference")


# ------------------------------------------------------------------------------------------
# Synthetic collection
# ------------------------------------------------------------------------------------------


def synthetic_collection(out_dir: Path, num_docs: int, num_queries: int, seed: int = 0) -> dict:
    """BEIR corpus/queries + TREC qrels. Per query: 3 topic words; 10 passages get all of them
    (grade 2), 10 get one (grade 1), 10 random passages are judged 0.

    Written in chunks of 100,000 passages, so that 4M passages take a few hundred MB here
    rather than the whole corpus as Python strings."""
    import numpy as np

    rng = np.random.default_rng(seed)
    syllables = "ka lo mi re su ta ne vo pi da ru so fe li go ma ze tu ni bo ar el in on".split()
    words: set[str] = set()
    while len(words) < 30_000:
        n = int(rng.integers(1, 5))
        words.add("".join(syllables[i] for i in rng.integers(0, len(syllables), n)))
    vocab = sorted(words)
    cumulative = np.cumsum(1.0 / np.arange(1, len(vocab) + 1))  # Zipf: a few very common words
    cumulative /= cumulative[-1]
    lengths = rng.integers(30, 81, num_docs)
    # The planted judgments first (a few per query), applied as their passages are written.
    queries, qrels = [], []
    planted: dict[int, list[tuple[int, list[str]]]] = {}
    for q in range(num_queries):
        terms = [vocab[i] for i in rng.integers(2_000, 20_000, 3)]  # mid-frequency words
        qid = f"Q{q}"
        queries.append((qid, " ".join(terms)))
        for rank, d in enumerate(rng.choice(num_docs, 30, replace=False).tolist()):
            if rank < 10:
                planted.setdefault(d, []).append((1, terms))
                grade = 2
            elif rank < 20:
                planted.setdefault(d, []).append((3, [terms[rank % 3]]))
                grade = 1
            else:
                grade = 0
            qrels.append((qid, f"D{d}", grade))
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = {k: str(out_dir / n) for k, n in (("documents", "corpus.jsonl"),
             ("queries", "queries.jsonl"), ("qrels", "qrels.txt"))}  # fmt: skip
    with open(paths["documents"], "w") as f:
        for first in range(0, num_docs, 100_000):
            chunk = lengths[first : first + 100_000]
            flat = np.searchsorted(cumulative, rng.random(int(chunk.sum())), side="right")
            flat = np.minimum(flat, len(vocab) - 1)
            offsets = np.concatenate([[0], np.cumsum(chunk)]).tolist()
            ids = flat.tolist()
            lines = []
            for i in range(len(chunk)):
                doc = [vocab[w] for w in ids[offsets[i] : offsets[i + 1]]]
                for position, terms in planted.get(first + i, ()):
                    doc[position:position] = terms
                lines.append(
                    json.dumps({"_id": f"D{first + i}", "title": "", "text": " ".join(doc)})
                )
            f.write("\n".join(lines) + "\n")
    with open(paths["queries"], "w") as f:
        f.writelines(json.dumps({"_id": q, "text": t}) + "\n" for q, t in queries)
    with open(paths["qrels"], "w") as f:
        f.writelines(f"{q} 0 {d} {g}\n" for q, d, g in qrels)
    return paths


def collection_configs(name: str, data_dir: str | None) -> tuple[dict, dict]:
    from components.ranking_datagen.config import CollectionConfig, DatagenConfig
    from pipelines.config import load_config

    if name == "cranfield":
        os.environ.setdefault("RANKPIPE_SHARED_DATA", str(SHARED))
        config = load_config("cranfield-knrm")
        return dataclasses.asdict(config.collection), dataclasses.asdict(config.datagen)
    paths = {k: os.path.join(data_dir, n) for k, n in (("documents", "corpus.jsonl"),
             ("queries", "queries.jsonl"), ("qrels", "qrels.txt"))}  # fmt: skip
    collection = CollectionConfig(
        name="synthetic", documents_format="beir_corpus", queries_format="beir_queries", **paths
    )
    return dataclasses.asdict(collection), dataclasses.asdict(DatagenConfig())


# ------------------------------------------------------------------------------------------
# The measured runs (each in a child process)
# ------------------------------------------------------------------------------------------


def run_beam(collection: dict, datagen: dict, workers: int, out_dir: Path) -> dict:
    from datagen_testlib import make_output_dict  # tests/components/ranking_datagen

    from components import beam_mode
    from components.ranking_datagen.executor import Executor

    # The mode asked for, whatever the input's size (small inputs would otherwise run in
    # process: components/beam_mode.py).
    os.environ[beam_mode.THRESHOLD_ENV] = "0"
    output_dict = make_output_dict(out_dir)
    args = ["--direct_running_mode=multi_processing", f"--direct_num_workers={workers}"]
    context = Executor.Context(beam_pipeline_args=args, tmp_dir=str(out_dir / "tmp"), unique_id="1")
    props = {"collection": json.dumps(collection), "datagen": json.dumps(datagen)}
    start = time.perf_counter()
    Executor(context).Do({}, output_dict, props)
    seconds = time.perf_counter() - start
    summary = json.loads((out_dir / "summary" / "summary.json").read_text())
    return {
        "seconds": seconds,
        "documents": summary["documents"],
        "examples": sum(summary["examples_per_split"].values()),
        "timings": summary.get("timings", {}),
        "vocab": str(out_dir / "vocabulary" / "vocab.txt"),
    }


def run_reference(collection: dict, datagen: dict, out_dir: Path) -> dict:
    """RankingDataGen's work in one plain Python process (see the module docstring)."""
    import numpy as np
    import tensorflow as tf
    from bm25_reference import bm25_run  # tests/components/ranking_datagen

    from components.ranking_datagen import (
        beam_transforms,
        candidates,
        outputs,
        readers,
        sampling,
        splits,
        tokenization,
    )
    from components.ranking_datagen import collection as collection_io

    start = time.perf_counter()
    timings = {}
    doc_reader = readers.get_reader(
        "documents", collection["documents_format"],
        allow_empty_text=collection["allow_empty_documents"],
    )  # fmt: skip
    docs: dict[str, str] = {}
    for path in collection_io.expand_paths(collection["documents"]):
        for d in doc_reader.read(path):
            docs[d.docid] = d.text
    report = collection_io.BadRecordReport("fail")
    queries = collection_io.read_queries(
        collection["queries"], collection["queries_format"], report
    )
    qrels = collection_io.read_qrels(collection["qrels"], collection["qrels_format"], report).qrels
    timings["read"] = time.perf_counter() - start

    t = time.perf_counter()
    vocab_cfg = datagen["vocab"]
    counts: Counter[bytes] = Counter()
    texts = list(docs.values()) + [queries[q] for q in sorted(queries)]
    for i in range(0, len(texts), 2048):
        normalized = tokenization.normalize(
            tf.constant(texts[i : i + 2048]), vocab_cfg["lowercase"]
        )
        counts.update(tokenization.split_words(normalized).flat_values.numpy().tolist())
    vocab = tokenization.learn_wordpiece_vocab(
        [(w.decode("utf-8", "replace"), c) for w, c in counts.items()], vocab_cfg["size"]
    )
    (out_dir / "vocabulary").mkdir(parents=True)
    vocab_path = str(out_dir / "vocabulary" / "vocab.txt")
    Path(vocab_path).write_text("".join(v + "\n" for v in vocab))
    timings["vocabulary"] = time.perf_counter() - t

    t = time.perf_counter()
    bm25 = datagen["bm25"]
    run = bm25_run(
        sorted(docs.items()), queries, datagen["candidates_depth"], bm25["k1"], bm25["b"]
    )
    ranked = candidates.rank_run(run, datagen["candidates_depth"])
    timings["bm25"] = time.perf_counter() - t

    t = time.perf_counter()
    s = datagen["split"]
    split_of = {
        q: splits.kfold_split(q, s["num_folds"], s["dev_fold"], s["test_fold"], s["seed"])
        for q in qrels
    }
    smp = datagen["sampling"]
    threshold = sampling.resolve_positive_threshold(
        smp["positive_threshold"], sampling.train_grades(split_of, qrels)
    )
    groups, _ = sampling.make_groups(
        sampling.by_split(split_of, qrels), qrels, ranked, smp["mode"], smp["samples_per_query"],
        smp["negatives_per_positive"], threshold, smp["seed"],
    )  # fmt: skip
    keys = sorted({"d:" + d for g in groups for d in g.docids} | {"q:" + g.qid for g in groups})
    fn = tf.function(tokenization.make_preprocessing_fn(vocab_path, vocab_cfg["lowercase"]))
    tokens: dict[str, np.ndarray] = {}
    for i in range(0, len(keys), 2048):
        batch = keys[i : i + 2048]
        raw = [docs[k[2:]] if k[0] == "d" else queries[k[2:]] for k in batch]
        ragged = tf.RaggedTensor.from_sparse(fn({"text": tf.constant(raw)})["token_ids"])
        values, splits_ = ragged.values.numpy(), ragged.row_splits.numpy()
        for j, key in enumerate(batch):
            tokens[key] = values[splits_[j] : splits_[j + 1]]
    timings["tokenize"] = time.perf_counter() - t

    t = time.perf_counter()
    builder = beam_transforms.BuildExample(
        datagen["max_query_length"], datagen["max_doc_length"], tokenization.unk_id(vocab)
    )
    per_split = Counter(g.split for g in groups)
    num_shards = {sp: datagen["num_shards"] or max(1, -(-per_split[sp] // 20_000)) for sp in
                  splits.SPLITS}  # fmt: skip
    shards: dict[tuple[str, int], list] = {}
    for g in groups:
        parts = [(-1, tokens["q:" + g.qid])] + [
            (i, tokens["d:" + d]) for i, d in enumerate(g.docids)
        ]
        for split, key, serialized in builder.process((g.key, {"group": [g], "tokens": parts})):
            order = beam_transforms.shuffle_key(datagen["shuffle_seed"], key)
            shard = int.from_bytes(order[:8], "big") % num_shards[split]
            shards.setdefault((split, shard), []).append((order, serialized))
    examples_dir = str(out_dir / "examples")
    for (split, shard), rows in shards.items():
        path = os.path.join(
            outputs.split_dir(examples_dir, split), outputs.shard_name(shard, num_shards[split])
        )
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with tf.io.TFRecordWriter(path, options="GZIP") as writer:
            for _, serialized in sorted(rows):
                writer.write(serialized)
    outputs.complete_shards(examples_dir, num_shards)
    timings["examples"] = time.perf_counter() - t
    return {
        "seconds": time.perf_counter() - start,
        "documents": len(docs),
        "examples": len(groups),
        "timings": {k: round(v, 1) for k, v in timings.items()},
    }


def tokenizer_bench(texts: list[str], vocab_path: str) -> dict:
    """Tokens/s of our graph (FastWordpieceTokenizer + normalization) vs HF tokenizers."""
    os.environ["TOKENIZERS_PARALLELISM"] = "false"
    import tensorflow as tf
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers

    from components.ranking_datagen import tokenization

    tf.config.threading.set_intra_op_parallelism_threads(1)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    fn = tf.function(tokenization.make_preprocessing_fn(vocab_path))
    batches = [texts[i : i + 1024] for i in range(0, len(texts), 1024)]

    def ours() -> list[list[int]]:
        out = []
        for batch in batches:
            ragged = tf.RaggedTensor.from_sparse(fn({"text": tf.constant(batch)})["token_ids"])
            out.extend(ragged.to_list())
        return out

    vocab = {t: i for i, t in enumerate(Path(vocab_path).read_text().splitlines())}
    hf = Tokenizer(models.WordPiece(vocab=vocab, unk_token="[UNK]", max_input_chars_per_word=100))
    hf.normalizer = normalizers.BertNormalizer(
        clean_text=True, handle_chinese_chars=True, strip_accents=True, lowercase=True
    )
    hf.pre_tokenizer = pre_tokenizers.BertPreTokenizer()

    def theirs() -> list[list[int]]:
        out = []
        for batch in batches:
            out.extend(e.ids for e in hf.encode_batch(batch, add_special_tokens=False))
        return out

    ours()  # trace the tf.function
    results = {}
    for name, fn_ in (("ours", ours), ("hf", theirs), ("ours2", ours), ("hf2", theirs)):
        t = time.perf_counter()
        ids = fn_()
        results.setdefault(name[:4].rstrip("2"), []).append((time.perf_counter() - t, ids))
    (t_ours, ids_ours) = min(results["ours"], key=lambda r: r[0])
    (t_hf, ids_hf) = min(results["hf"], key=lambda r: r[0])
    n_tokens = sum(len(x) for x in ids_ours)
    return {
        "texts": len(texts),
        "tokens": n_tokens,
        "ours_tok_s": n_tokens / t_ours,
        "hf_tok_s": sum(len(x) for x in ids_hf) / t_hf,
        "agreement": sum(a == b for a, b in zip(ids_ours, ids_hf)) / len(texts),
    }


def _probe_batches(total: int):
    text = "lorem ipsum dolor " * 20
    for start in range(0, total, 1024):
        yield [(f"D{i}", text, 0, i) for i in range(start, min(total, start + 1024))]


def runner_probe(num_docs: int, shuffle: bool) -> dict:
    """A pipeline that holds nothing, on the runner RankingDataGen is measured on: batches of
    documents -> (Reshuffle) -> len -> sum. Its SDK worker's peak RSS is the runner's own
    memory per worker for that many documents crossing a shuffle."""
    import apache_beam as beam
    from apache_beam.options.pipeline_options import PipelineOptions

    args = ["--direct_running_mode=multi_processing", "--direct_num_workers=1"]
    start = time.perf_counter()
    with beam.Pipeline(options=PipelineOptions(args)) as p:
        batches = p | beam.Create([num_docs]) | beam.FlatMap(_probe_batches)
        if shuffle:
            batches = batches | beam.Reshuffle()
        _ = batches | beam.Map(len) | beam.CombineGlobally(sum)
    return {"seconds": time.perf_counter() - start, "documents": num_docs, "examples": 0}


def child_main(args: argparse.Namespace) -> None:
    spec = json.loads(args.child)
    if spec["mode"].startswith("probe"):
        result = runner_probe(spec["docs"], spec["mode"] == "probe-shuffle")
        print("RESULT " + json.dumps(result), flush=True)
        return
    collection, datagen = collection_configs(spec["collection"], spec.get("data_dir"))
    out_dir = Path(tempfile.mkdtemp(prefix=f"bench-{spec['mode']}-"))
    try:
        result = _child_run(spec, collection, datagen, out_dir)
    finally:
        shutil.rmtree(out_dir, ignore_errors=True)
    print("RESULT " + json.dumps(result), flush=True)


def _child_run(spec: dict, collection: dict, datagen: dict, out_dir: Path) -> dict:
    if spec["mode"] == "reference":
        result = run_reference(collection, datagen, out_dir)
    elif spec["mode"] == "tokenizers":
        from components.ranking_datagen import readers

        reader = readers.get_reader(
            "documents", collection["documents_format"], allow_empty_text=True
        )
        texts = [d.text for d in reader.read(collection["documents"]) if d.text]
        texts = (texts * (20_000 // len(texts) + 1))[:20_000]
        result = tokenizer_bench(texts, spec["vocab"])
    else:
        result = run_beam(collection, datagen, int(spec["mode"][5:-1]), out_dir)
        if spec.get("keep_vocab"):
            Path(spec["keep_vocab"]).write_text(Path(result["vocab"]).read_text())
    return result


# ------------------------------------------------------------------------------------------
# Parent: runs the children, samples their memory, prints the tables
# ------------------------------------------------------------------------------------------


def _sample_rss(proc: Any, peaks: dict[int, int]) -> None:
    """Each process's RSS now into `peaks` (pid -> the highest seen): the child that runs the
    measured code and every descendant (Beam's SDK workers)."""
    import psutil

    try:
        family = [proc, *proc.children(recursive=True)]
    except psutil.NoSuchProcess:
        return
    total = 0
    for p in family:
        try:
            rss = p.memory_info().rss
        except psutil.NoSuchProcess:
            continue
        peaks[p.pid] = max(peaks.get(p.pid, 0), rss)
        total += rss
    peaks[0] = max(peaks.get(0, 0), total)  # pid 0: the whole tree at one moment


def run_child(spec: dict) -> dict:
    """Runs one measured mode in a fresh subprocess. Peak RSS is sampled every 50 ms: of the
    whole process tree (`peak_rss_mb`), of the child itself (`driver_rss_mb`: the runner, which
    on the DirectRunner also holds the data between stages) and of the largest of its
    descendants (`worker_rss_mb`: Beam's SDK worker processes; 0 for the reference). A run that
    fails (e.g. killed for memory) comes back with `error` set instead of raising."""
    import psutil

    cmd = [sys.executable, __file__, "--child", json.dumps(spec)]
    load = os.getloadavg()[0]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    ps = psutil.Process(proc.pid)
    peaks: dict[int, int] = {}
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            _sample_rss(ps, peaks)
            time.sleep(0.05)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    out, err = proc.communicate()
    done.set()
    sampler.join()
    lines = [ln for ln in out.splitlines() if ln.startswith("RESULT ")]
    if proc.returncode != 0 or not lines:
        sys.stderr.write(err[-3000:])
        result: dict[str, Any] = {"error": f"exit code {proc.returncode}"}
    else:
        result = json.loads(lines[-1][len("RESULT ") :])
    workers = [rss for pid, rss in peaks.items() if pid not in (0, proc.pid)]
    result["peak_rss_mb"] = peaks.get(0, 0) / 2**20
    result["driver_rss_mb"] = peaks.get(proc.pid, 0) / 2**20
    result["worker_rss_mb"] = max(workers, default=0) / 2**20
    result["processes"] = len(workers) + 1
    # CPU of the child and every descendant it waited for (Beam's SDK workers), imports
    # included: with the wall time it shows how much of the machine the run got.
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    result["cpu_s"] = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    result["load_before"] = load
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--docs", default="250000,1000000,4000000",
        help="synthetic collection sizes, comma-separated",
    )  # fmt: skip
    parser.add_argument(
        "--queries-per-1000-docs", type=float, default=1.0,
        help="queries (30 judgments each) per 1,000 synthetic passages",
    )  # fmt: skip
    parser.add_argument(
        "--repeats", type=int, default=1,
        help="runs per mode, best kept; collections of 1M passages or more run once",
    )  # fmt: skip
    parser.add_argument("--modes", default=",".join(MODES))
    parser.add_argument("--skip-cranfield", action="store_true")
    parser.add_argument("--skip-synthetic", action="store_true")
    parser.add_argument(
        "--runner-probe", action="store_true",
        help="only the runner's own memory per worker: a pipeline that holds nothing, at each "
        "--docs size, with and without a Reshuffle",
    )  # fmt: skip
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child_main(args)
        return
    if args.runner_probe:
        for num_docs in [int(n) for n in args.docs.split(",")]:
            for mode in ("probe-shuffle", "probe-fused"):
                r = run_child({"mode": mode, "docs": num_docs})
                print(f"{mode} {num_docs} documents: {r.get('seconds', float('nan')):.1f}s, "
                      f"largest worker {r['worker_rss_mb']:.0f} MB, driver "
                      f"{r['driver_rss_mb']:.0f} MB {r.get('error', '')}", flush=True)  # fmt: skip
        return

    started = time.perf_counter()
    sizes = [int(n) for n in args.docs.split(",")]
    work = Path(tempfile.mkdtemp(prefix="bench-datagen-"))
    collections: list[tuple[str, int | None]] = []
    if not args.skip_cranfield:
        collections.append(("cranfield", None))
    if not args.skip_synthetic:
        collections += [("synthetic", n) for n in sizes]
    modes = args.modes.split(",")
    rows: dict[tuple[str, str], list[dict]] = {}
    tok_rows = {}
    for name, num_docs in collections:
        data_dir = None
        label = name
        if num_docs is not None:
            t = time.perf_counter()
            data_dir = str(work / f"synthetic-{num_docs}")
            num_queries = max(1, round(num_docs * args.queries_per_1000_docs / 1000))
            synthetic_collection(Path(data_dir), num_docs, num_queries)
            label = f"synthetic-{num_docs}"
            print(f"generated {num_docs} synthetic passages, {num_queries} queries in "
                  f"{time.perf_counter() - t:.0f}s", flush=True)  # fmt: skip
        vocab_copy = str(work / f"{label}-vocab.txt")
        repeats = 1 if (num_docs or 0) >= 1_000_000 else args.repeats
        # The tokenizer comparison on Cranfield and the smallest synthetic collection only.
        with_tokenizers = num_docs is None or num_docs == min(sizes)
        for rep in range(repeats):
            for mode in modes:  # interleaved, so machine noise hits every mode alike
                spec = {"collection": name, "data_dir": data_dir, "mode": mode}
                if mode == "beam-1w" and rep == 0 and with_tokenizers:
                    spec["keep_vocab"] = vocab_copy
                r = run_child(spec)
                rows.setdefault((label, mode), []).append(r)
                print(
                    f"{label} {mode} #{rep + 1}: {r.get('seconds', float('nan')):.1f}s, "
                    f"cpu {r['cpu_s']:.0f}s, peak {r['peak_rss_mb']:.0f} MB (driver "
                    f"{r['driver_rss_mb']:.0f}, largest worker {r['worker_rss_mb']:.0f}), "
                    f"load before {r['load_before']:.1f}, {r.get('error') or r.get('timings')}",
                    flush=True,
                )
        if os.path.exists(vocab_copy):
            spec = {"collection": name, "data_dir": data_dir, "mode": "tokenizers"}
            tok_rows[label] = run_child({**spec, "vocab": vocab_copy})
        if data_dir:
            shutil.rmtree(data_dir, ignore_errors=True)
    print_tables(rows, tok_rows)
    print(f"\nbench-datagen took {time.perf_counter() - started:.0f}s")
    shutil.rmtree(work, ignore_errors=True)


def _best(runs: list[dict]) -> dict | None:
    ok = [r for r in runs if "error" not in r]
    return min(ok, key=lambda r: r["seconds"]) if ok else None


def print_tables(rows: dict[tuple[str, str], list[dict]], tok_rows: dict[str, dict]) -> None:
    print()
    print("| collection | docs | mode | wall s (best) | docs/s | examples | examples/s | CPU s "
          "| peak RSS MB (all) | driver MB | largest worker MB | vs beam-1w |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    best = {key: _best(runs) for key, runs in rows.items()}
    for (name, mode), runs in rows.items():
        b = best[(name, mode)]
        if b is None:
            print(f"| {name} | | {mode} | failed: {runs[-1]['error']} | | | | | "
                  f"{runs[-1]['peak_rss_mb']:.0f} | | | |")  # fmt: skip
            continue
        base = best.get((name, "beam-1w"))
        ratio = base["seconds"] / b["seconds"] if base else float("nan")
        print(
            f"| {name} | {b['documents']} | {mode} | {b['seconds']:.1f} "
            f"| {b['documents'] / b['seconds']:.0f} | {b['examples']} "
            f"| {b['examples'] / b['seconds']:.0f} | {b['cpu_s']:.0f} "
            f"| {max(r['peak_rss_mb'] for r in runs):.0f} "
            f"| {max(r['driver_rss_mb'] for r in runs):.0f} "
            f"| {max(r['worker_rss_mb'] for r in runs):.0f} | {ratio:.2f}x |"
        )
    print()
    for name in dict.fromkeys(n for n, _ in rows):
        secs = {m: b["seconds"] for (n, m), b in best.items() if n == name and b}
        if "beam-1w" in secs and "beam-2w" in secs:
            print(f"{name}: speed-up 2 workers vs 1: {secs['beam-1w'] / secs['beam-2w']:.2f}x "
                  "(goal >= 1.6x)")  # fmt: skip
        if "beam-1w" in secs and "reference" in secs:
            print(f"{name}: beam-1w / reference: {secs['beam-1w'] / secs['reference']:.2f}x "
                  "(goal <= 1.25x)")  # fmt: skip
    sizes = sorted({b["documents"]: n for (n, _), b in best.items()
                    if b and n.startswith("synthetic")}.items())  # fmt: skip
    for (small_docs, small), (large_docs, large) in zip(sizes, sizes[1:]):
        for mode in ("beam-1w", "beam-2w", "reference"):
            a, z = best.get((small, mode)), best.get((large, mode))
            if not a or not z:
                continue
            print(
                f"{small} -> {large} ({large_docs / small_docs:.0f}x docs), {mode}: time "
                f"{z['seconds'] / a['seconds']:.2f}x (goal <= 4.5x for 4x), largest worker RSS "
                f"{_worker(z, mode) / max(_worker(a, mode), 1):.2f}x, driver RSS "
                f"{z['driver_rss_mb'] / max(a['driver_rss_mb'], 1):.2f}x (goal <= 1.2x per worker)"
            )
    if tok_rows:
        print()
        print("| collection | texts | tokens | ours (FastWordpiece graph) tok/s | HF tokenizers "
              "tok/s | ours / HF | identical ids |")  # fmt: skip
        print("|---|---|---|---|---|---|---|")
        for name, t in tok_rows.items():
            if "error" in t:
                print(f"| {name} | failed: {t['error']} | | | | | |")
                continue
            print(
                f"| {name} | {t['texts']} | {t['tokens']} | {t['ours_tok_s']:.0f} "
                f"| {t['hf_tok_s']:.0f} | {t['ours_tok_s'] / t['hf_tok_s']:.2f} "
                f"| {t['agreement']:.1%} |"
            )


def _worker(result: dict, mode: str) -> float:
    """The per-process memory that must stay flat: the largest SDK worker, or the one
    process of the reference."""
    return result["driver_rss_mb"] if mode == "reference" else result["worker_rss_mb"]


if __name__ == "__main__":
    main()
