"""Benchmark: RankingDataGen end to end, Beam with 1 vs 2 workers vs a plain Python reference,
tokenizer throughput against HuggingFace `tokenizers`, and peak memory.

Run: .venv/bin/python tests/benchmarks/bench_datagen.py [--docs 200000] [--queries 200]
         [--repeats 1] [--skip-cranfield] [--skip-synthetic] [--workers 1,2]

Two collections, side by side: Cranfield from $RANKPIPE_SHARED_DATA (default
<repo>/../shared/data) with pipelines/configs/cranfield-knrm.yaml (it learns its own
8000-token vocabulary; cranfield.yaml needs the MiniLM checkpoint of `make pretrained`), and a
synthetic BEIR-layout collection of --docs passages generated in a temp dir (Zipf-distributed
vocabulary of 30k pseudo-words, 30-80 words a passage; --queries queries with 30 planted
judgments each) with the default datagen config (BM25 depth 100, 8000-token vocabulary,
pairwise x 64).

For each collection, each mode runs in its own fresh subprocess (same imports, same warm-up):
  beam-1w / beam-2w  the executor's Do() (what LocalDagRunner calls) on DirectRunner
                     multi_processing with 1 or 2 workers: both Beam passes, TFT, all outputs;
  reference          the same work in one plain Python process: the same readers, word counts
                     (same TF normalization), the same vocabulary learner, bm25s, splits,
                     sampling, the same tokenization graph run eagerly on batches, the same
                     example builder, seeded shuffle and gzip shards. No Beam, no tf.Transform.
Timed: Do() / the reference function (imports excluded). Peak RSS: the subprocess and all its
children (Beam's SDK workers), sampled every 50 ms. Then a tokenizer micro-benchmark on the
collection's texts with the vocabulary the run learned: FastWordpieceTokenizer as our graph
runs it (normalization + tokenization, tf.function, batches of 1024) vs HuggingFace tokenizers
(BertNormalizer + BertPreTokenizer + WordPiece on the same vocab), both single-threaded, and
the fraction of texts on which they give identical ids.
Goals: 2 workers >= 1.6x of 1 worker; beam-1w within 1.25x of the reference.
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
    (grade 2), 10 get one (grade 1), 10 random passages are judged 0."""
    import numpy as np

    rng = np.random.default_rng(seed)
    syllables = "ka lo mi re su ta ne vo pi da ru so fe li go ma ze tu ni bo ar el in on".split()
    words: set[str] = set()
    while len(words) < 30_000:
        n = int(rng.integers(1, 5))
        words.add("".join(syllables[i] for i in rng.integers(0, len(syllables), n)))
    vocab = np.array(sorted(words))
    weights = 1.0 / np.arange(1, len(vocab) + 1)  # Zipf: a few very common words
    weights /= weights.sum()
    lengths = rng.integers(30, 81, num_docs)
    flat = rng.choice(len(vocab), size=int(lengths.sum()), p=weights)
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    docs = [list(vocab[flat[offsets[i] : offsets[i + 1]]]) for i in range(num_docs)]
    queries, qrels = [], []
    for q in range(num_queries):
        terms = list(vocab[rng.integers(2_000, 20_000, 3)])  # mid-frequency words
        qid = f"Q{q}"
        queries.append((qid, " ".join(terms)))
        picked = rng.choice(num_docs, 30, replace=False)
        for rank, d in enumerate(picked):
            if rank < 10:
                docs[d][1:1] = terms
                grade = 2
            elif rank < 20:
                docs[d].insert(3, terms[rank % 3])
                grade = 1
            else:
                grade = 0
            qrels.append((qid, f"D{d}", grade))
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = {k: str(out_dir / n) for k, n in (("documents", "corpus.jsonl"),
             ("queries", "queries.jsonl"), ("qrels", "qrels.txt"))}  # fmt: skip
    with open(paths["documents"], "w") as f:
        for i, words_ in enumerate(docs):
            f.write(json.dumps({"_id": f"D{i}", "title": "", "text": " ".join(words_)}) + "\n")
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

    from components.ranking_datagen.executor import Executor

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
    run = candidates.bm25_run(
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
    groups, _ = sampling.make_groups(
        sampling.by_split(split_of, qrels), qrels, ranked, smp["mode"], smp["samples_per_query"],
        smp["negatives_per_positive"], smp["positive_threshold"], smp["seed"],
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


def child_main(args: argparse.Namespace) -> None:
    spec = json.loads(args.child)
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


def _tree_rss(proc: Any) -> int:
    import psutil

    total = 0
    try:
        for p in [proc, *proc.children(recursive=True)]:
            try:
                total += p.memory_info().rss
            except psutil.NoSuchProcess:
                pass
    except psutil.NoSuchProcess:
        pass
    return total


def run_child(spec: dict) -> dict:
    import psutil

    cmd = [sys.executable, __file__, "--child", json.dumps(spec)]
    load = os.getloadavg()[0]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    ps = psutil.Process(proc.pid)
    peak = [0]
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            peak[0] = max(peak[0], _tree_rss(ps))
            time.sleep(0.05)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    out, err = proc.communicate()
    done.set()
    sampler.join()
    lines = [ln for ln in out.splitlines() if ln.startswith("RESULT ")]
    if proc.returncode != 0 or not lines:
        sys.stderr.write(err[-5000:])
        raise RuntimeError(f"{spec} failed with exit code {proc.returncode}")
    result = json.loads(lines[-1][len("RESULT ") :])
    result["peak_rss_mb"] = peak[0] / 2**20
    # CPU of the child and every descendant it waited for (Beam's SDK workers), imports
    # included: with the wall time it shows how much of the machine the run got.
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    result["cpu_s"] = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    result["load_before"] = load
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--docs", type=int, default=200_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--modes", default=",".join(MODES))
    parser.add_argument("--skip-cranfield", action="store_true")
    parser.add_argument("--skip-synthetic", action="store_true")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child_main(args)
        return

    work = Path(tempfile.mkdtemp(prefix="bench-datagen-"))
    collections = []
    if not args.skip_cranfield:
        collections.append(("cranfield", None))
    if not args.skip_synthetic:
        t = time.perf_counter()
        data_dir = work / "synthetic"
        synthetic_collection(data_dir, args.docs, args.queries)
        print(f"generated {args.docs} synthetic passages in {time.perf_counter() - t:.0f}s")
        collections.append(("synthetic", str(data_dir)))
    modes = args.modes.split(",")
    rows: dict[tuple[str, str], list[dict]] = {}
    tok_rows = {}
    for name, data_dir in collections:
        vocab_copy = str(work / f"{name}-vocab.txt")
        for rep in range(args.repeats):
            for mode in modes:  # interleaved, so machine noise hits every mode alike
                spec = {"collection": name, "data_dir": data_dir, "mode": mode}
                if mode == "beam-1w" and rep == 0:
                    spec["keep_vocab"] = vocab_copy
                r = run_child(spec)
                rows.setdefault((name, mode), []).append(r)
                print(
                    f"{name} {mode} #{rep + 1}: {r['seconds']:.1f}s, cpu {r['cpu_s']:.0f}s, "
                    f"peak {r['peak_rss_mb']:.0f} MB, load before {r['load_before']:.1f}, "
                    f"{r.get('timings')}",
                    flush=True,
                )
        if os.path.exists(vocab_copy):
            spec = {"collection": name, "data_dir": data_dir, "mode": "tokenizers"}
            tok_rows[name] = run_child({**spec, "vocab": vocab_copy})
    print_tables(rows, tok_rows)
    shutil.rmtree(work, ignore_errors=True)


def print_tables(rows: dict[tuple[str, str], list[dict]], tok_rows: dict[str, dict]) -> None:
    print()
    print("| collection | docs | mode | wall s (best) | docs/s | examples | examples/s "
          "| CPU s | peak RSS MB | vs beam-1w |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|---|")
    for (name, mode), runs in rows.items():
        best = min(runs, key=lambda r: r["seconds"])
        base = rows.get((name, "beam-1w"))
        ratio = min(r["seconds"] for r in base) / best["seconds"] if base else float("nan")
        print(
            f"| {name} | {best['documents']} | {mode} | {best['seconds']:.1f} "
            f"| {best['documents'] / best['seconds']:.0f} | {best['examples']} "
            f"| {best['examples'] / best['seconds']:.0f} | {best['cpu_s']:.0f} "
            f"| {max(r['peak_rss_mb'] for r in runs):.0f} | {ratio:.2f}x |"
        )
    print()
    for name in sorted({n for n, _ in rows}):
        get = {m: min(r["seconds"] for r in rows[(name, m)]) for n, m in rows if n == name}
        if "beam-1w" in get and "beam-2w" in get:
            print(f"{name}: speed-up 2 workers vs 1: {get['beam-1w'] / get['beam-2w']:.2f}x "
                  "(goal >= 1.6x)")  # fmt: skip
        if "beam-1w" in get and "reference" in get:
            print(f"{name}: beam-1w / reference: {get['beam-1w'] / get['reference']:.2f}x "
                  "(goal <= 1.25x)")  # fmt: skip
    if tok_rows:
        print()
        print("| collection | texts | tokens | ours (FastWordpiece graph) tok/s | HF tokenizers "
              "tok/s | ours / HF | identical ids |")  # fmt: skip
        print("|---|---|---|---|---|---|---|")
        for name, t in tok_rows.items():
            print(
                f"| {name} | {t['texts']} | {t['tokens']} | {t['ours_tok_s']:.0f} "
                f"| {t['hf_tok_s']:.0f} | {t['ours_tok_s'] / t['hf_tok_s']:.2f} "
                f"| {t['agreement']:.1%} |"
            )


if __name__ == "__main__":
    main()
