"""The plain script `make bench-speed` holds `rankpipe run cranfield` against (issue 16): what
a user would write instead of the pipeline, run as its own process, as a user runs a script.

From the Cranfield files to the test figure, with the same TensorFlow encoder as the pipeline
(trainer_module's DualEncoder from the all-MiniLM-L6-v2 checkpoint) and the same tokenizer
(the pipeline's TransformGraph): parse the files (a few lines of Python, as a user would write;
bench_speed.py checks the texts equal our readers'), bm25s top-100 (k1 0.9, b 0.4), every
distinct query and candidate document encoded once in length-sorted batches, min-max fusion
with alpha tuned on the dev queries, nDCG@10 on the test queries with pytrec_eval. It imports
nothing the job does not need (no Beam, no TFX).

    speed_script.py JOB.json      (from bench_speed.py) -> one JSON line on stdout

JOB.json: {"data": Cranfield dir, "transform_graph": dir, "dev_qids": [...], "test_qids": [...],
"max_query_length": int, "max_doc_length": int} (cranfield.yaml's, from bench_speed.py).
The line: alpha, test nDCG@10, texts encoded, a digest of the parsed collection, and the
seconds of the work after imports and of the model load.
"""

from __future__ import annotations

import time

START = time.perf_counter()

import hashlib  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import re  # noqa: E402
import sys  # noqa: E402

import bm25s  # noqa: E402
import numpy as np  # noqa: E402
import pytrec_eval  # noqa: E402
import tensorflow as tf  # noqa: E402
import tensorflow_text  # noqa: E402, F401  (the tokenizer graph's ops)
import tensorflow_transform as tft  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from rankcore import fusion  # noqa: E402
from trainer_module.config import TrainerConfig  # noqa: E402
from trainer_module.models import build_model  # noqa: E402
from trainer_module.pretrained import installed_minilm_dir  # noqa: E402

BATCH, DEPTH, K1, B = 128, 100, 0.9, 0.4  # as cranfield.yaml


def smart(path: str) -> list[dict[str, str]]:
    """SMART blocks (.I id, then .T/.A/.B/.W sections; a repeated marker appends)."""
    blocks: list[dict[str, str]] = []
    section = None
    with open(path, encoding="utf-8") as f:
        for line in f:
            m = re.match(r"^\.([A-Z])(?:\s+(.*?))?\s*$", line)
            if m and m.group(1) == "I":
                blocks.append({"I": m.group(2)})
                section = None
            elif m:
                section = m.group(1)
                blocks[-1].setdefault(section, "")
                blocks[-1][section] += " " + (m.group(2) or "")
            elif section:
                blocks[-1][section] += " " + line
    return [{k: " ".join(v.split()) for k, v in b.items()} for b in blocks]


def read_cranfield(data: str) -> tuple[dict, dict, dict]:
    docs = {
        b["I"]: " ".join(t for t in (b.get("T"), b.get("W")) if t)
        for b in smart(os.path.join(data, "cran.all.1400"))
    }
    # Queries are numbered by position (cranqrel's numbering), not by their .I ids.
    queries = {
        str(i): b.get("W", "") for i, b in enumerate(smart(os.path.join(data, "cran.qry")), 1)
    }
    qrels: dict[str, dict[str, int]] = {}
    with open(os.path.join(data, "cranqrel")) as f:
        for line in f:
            if line.strip():
                qid, docid, code = line.split()
                qrels.setdefault(qid, {})[docid] = 5 - int(code) if 1 <= int(code) <= 5 else 0
    return docs, queries, qrels


def collection_digest(docs: dict, queries: dict, qrels: dict) -> str:
    return hashlib.sha256(json.dumps([docs, queries, qrels], sort_keys=True).encode()).hexdigest()


def encode_once(embed, texts: list[list[int]]) -> np.ndarray:
    """Length-sorted batches of right-padded ids -> vectors, in input order."""
    order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
    out = np.zeros([len(texts), 384], np.float32)
    for start in range(0, len(order), BATCH):
        chunk = order[start : start + BATCH]
        ids = np.zeros([len(chunk), max(1, max(len(texts[i]) for i in chunk))], np.int64)
        for row, i in enumerate(chunk):
            ids[row, : len(texts[i])] = texts[i]
        out[chunk] = embed(tf.constant(ids)).numpy()
    return out


def load_encoder(transform_graph: str, max_q: int, max_d: int):
    """The checkpoint as the pipeline's dual encoder (one tower: queries and documents go
    through the same encoder), its `embed_doc` as one tf.function."""
    output = tft.TFTransformOutput(transform_graph)
    with open(output.vocabulary_file_by_name("wordpiece")) as f:
        vocab = [line.rstrip("\n") for line in f]
    config = TrainerConfig.from_dict(
        {
            "model": "dual_encoder",
            "dual_encoder": {"checkpoint_dir": installed_minilm_dir()},
            "recipe": {"type": "in_batch"},
            "train_steps": 0,
        }
    )
    model = build_model(config, len(vocab), max_q, max_d, vocab)
    spec = tf.TensorSpec([None, None], tf.int64)
    embed = tf.function(lambda x: model.embed_doc(x, training=False), input_signature=[spec])
    return embed, output.transform_features_layer()


def run(job: dict, embed=None, layer=None) -> dict:
    """The job; `embed`/`layer` given: reuse a loaded encoder (bench_speed's in-process run)."""
    t0 = time.perf_counter()
    max_q, max_d = job["max_query_length"], job["max_doc_length"]
    if embed is None:
        embed, layer = load_encoder(job["transform_graph"], max_q, max_d)
    load_s = time.perf_counter() - t0
    docs, queries, qrels = read_cranfield(job["data"])
    dev_qids, test_qids = set(job["dev_qids"]), set(job["test_qids"])
    docids = list(docs)
    retriever = bm25s.BM25(k1=K1, b=B)
    retriever.index(
        bm25s.tokenize([docs[d] for d in docids], stopwords="en", show_progress=False),
        show_progress=False,
    )
    qids = sorted(dev_qids | test_qids, key=int)
    hits, scores = retriever.retrieve(
        bm25s.tokenize([queries[q] for q in qids], stopwords="en", show_progress=False),
        k=DEPTH,
        show_progress=False,
    )
    bm25 = {
        q: {docids[i]: float(s) for i, s in zip(row, srow) if s > 0}
        for q, row, srow in zip(qids, hits, scores)
    }
    wanted = sorted({d for q in qids for d in bm25[q]})
    texts = [queries[q] for q in qids] + [docs[d] for d in wanted]
    ids = tf.RaggedTensor.from_sparse(layer({"text": tf.constant(texts)})["token_ids"]).to_list()
    ids = [row[:max_q] for row in ids[: len(qids)]] + [row[:max_d] for row in ids[len(qids) :]]
    vectors = encode_once(embed, ids).astype(np.float64)
    qv, dv = dict(zip(qids, vectors[: len(qids)])), dict(zip(wanted, vectors[len(qids) :]))
    dense = {q: {d: float(qv[q] @ dv[d]) for d in bm25[q]} for q in qids}

    def ndcg10(ranking: dict, on: set[str]) -> float:
        judged = {q: qrels[q] for q in sorted(on) if q in qrels}  # a fixed order to sum in
        per_query = pytrec_eval.RelevanceEvaluator(judged, {"ndcg_cut_10"}).evaluate(
            {q: ranking[q] for q in judged if q in ranking}
        )
        return float(
            np.mean([per_query.get(q, {"ndcg_cut_10": 0.0})["ndcg_cut_10"] for q in judged])
        )

    grid = {a: ndcg10(fusion.fuse_run(dense, bm25, a), dev_qids) for a in fusion.ALPHA_GRID}
    alpha = max(grid.items(), key=lambda kv: (kv[1], kv[0]))[0]
    return {
        "alpha": alpha,
        "ndcg_cut_10": ndcg10(fusion.fuse_run(dense, bm25, alpha), test_qids),
        "texts": len(texts),
        "collection": collection_digest(docs, queries, qrels),
        "load_seconds": load_s,
        "work_seconds": time.perf_counter() - t0 - load_s,
        "import_seconds": None,
    }


if __name__ == "__main__":
    imported = time.perf_counter() - START
    with open(sys.argv[1]) as f:
        result = run(json.load(f))
    result["import_seconds"] = imported
    print(json.dumps(result))
