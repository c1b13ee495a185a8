"""`make bench-speed`: is `rankpipe run cranfield` as fast as a script? (issue 16)

Side by side in one run, on Cranfield with the real all-MiniLM-L6-v2 checkpoint (`make
pretrained`), zero-shot dual encoder + BM25 fusion (pipelines/configs/cranfield.yaml):

  (d) pipeline   the whole `rankpipe run cranfield` (LocalDagRunner, fresh outputs: no cache),
                 with each component's seconds from its MLMD execution;
  (a) floor      a split's distinct query and document token ids (what the evaluator / the
                 Trainer score) encoded once with the same TF encoder (DualEncoder.embed,
                 tf.function), in a plain loop over length-sorted batches, after one warm-up
                 call: the test split for (b), the dev split for (c);
  (b) evaluator  the RankingEvaluator's scoring pass (components/ranking_evaluator/scoring.py
                 score_split, with the pipeline's Beam settings) on the pipeline's model;
  (c) validation the Trainer's dev scoring (validation.score_dev_embedded, what
                 Controller.score_dev runs for a dual encoder: each distinct dev text once) plus
                 the alpha grid (fusion.tune_alpha), in this process; (c') the same inside the
                 pipeline run, from the Trainer's own timings (TrainResult.seconds);
  (e) script     the whole job as a plain script with the same TF encoder: bm25s top-100
                 (k1 0.9, b 0.4), every distinct query/document encoded once, min-max fusion
                 with alpha tuned on the dev queries, nDCG@10 on the test queries via
                 pytrec_eval (the pipeline's dev/test query split, so the queries are the same).

Goals (issue 16): (b) and (c) within 1.3x of (a) on the same split, (d) within 2x of (e).
The machine is shared and timings are noisy: compare the ratios of one run. `--per-pair` also
times the evaluator scoring every pair (the old path; slow).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import apache_beam as beam  # noqa: E402
import bm25s  # noqa: E402
import numpy as np  # noqa: E402
import pytrec_eval  # noqa: E402
import tensorflow as tf  # noqa: E402
import tensorflow_text  # noqa: E402, F401  (the TransformGraph's tokenizer ops)
import tensorflow_transform as tft  # noqa: E402
from apache_beam.options.pipeline_options import PipelineOptions  # noqa: E402
from bench_common import readonly_store, run_cranfield_pipeline  # noqa: E402

from components.ranking_datagen import readers  # noqa: E402
from components.ranking_evaluator import scoring  # noqa: E402
from pipelines.config import BeamConfig  # noqa: E402
from rankcore import fusion  # noqa: E402
from trainer_module import validation  # noqa: E402
from trainer_module.config import TrainerConfig  # noqa: E402
from trainer_module.models import build_model  # noqa: E402
from trainer_module.pretrained import installed_minilm_dir  # noqa: E402
from trainer_module.run_fn import read_vocab  # noqa: E402

MAX_Q, MAX_D = 32, 192  # cranfield.yaml datagen.max_query_length / max_doc_length
BATCH = 128  # cranfield.yaml trainer.eval_batch_size
DEPTH, K1, B = 100, 0.9, 0.4  # cranfield.yaml datagen
DATA = Path(os.environ.get("RANKPIPE_SHARED_DATA", Path(__file__).parents[3] / "shared" / "data"))


def latest_uri(root: Path, type_name: str) -> str:
    return max(readonly_store(root).get_artifacts_by_type(type_name), key=lambda a: a.id).uri


def component_seconds(root: Path) -> dict[str, float]:
    """Each execution's seconds (MLMD create -> last update), by component class name."""
    store = readonly_store(root)
    types = {t.id: t.name.rsplit(".", 1)[-1] for t in store.get_execution_types()}
    return {
        types[e.type_id]: (e.last_update_time_since_epoch - e.create_time_since_epoch) / 1000
        for e in store.get_executions()
    }


def split_records(examples: str, split: str) -> list[bytes]:
    files = tf.io.gfile.glob(os.path.join(examples, f"Split-{split}", "*"))
    return [r.numpy() for r in tf.data.TFRecordDataset(files, compression_type="GZIP")]


def encoder_config() -> TrainerConfig:
    return TrainerConfig.from_dict(
        {
            "model": "dual_encoder",
            "dual_encoder": {"checkpoint_dir": installed_minilm_dir()},
            "loss": "in_batch_softmax",
            "train_steps": 0,
        }
    )


def encode_once(embed, texts: list[list[int]]) -> np.ndarray:
    """The plain loop: length-sorted batches of right-padded ids -> vectors (input order)."""
    order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
    out = np.zeros([len(texts), 384], np.float32)
    for start in range(0, len(order), BATCH):
        chunk = order[start : start + BATCH]
        ids = np.zeros([len(chunk), max(1, max(len(texts[i]) for i in chunk))], np.int64)
        for row, i in enumerate(chunk):
            ids[row, : len(texts[i])] = texts[i]
        out[chunk] = embed(tf.constant(ids)).numpy()
    return out


def floor(embed, records: list[bytes]) -> tuple[float, int]:
    """(a): the split's distinct texts, truncated as the model truncates, encoded once."""
    texts: dict[tuple[str, str], list[int]] = {}
    for record in records:
        qid, docid, query, doc = scoring.example_pair(record)
        texts[("q", qid)] = list(query[:MAX_Q])
        texts[("d", docid)] = list(doc[:MAX_D])
    t0 = time.perf_counter()
    encode_once(embed, list(texts.values()))
    return time.perf_counter() - t0, len(texts)


def embed_fn(model):
    """model.embed as one tf.function (Controller._embed_fn's), traced before any timing."""
    spec = tf.TensorSpec([None, None], tf.int64)
    embed = tf.function(lambda x: model.embed(x, training=False), input_signature=[spec])
    embed(tf.ones([2, 3], tf.int64))
    return embed


def beam_pipeline() -> beam.Pipeline:
    return beam.Pipeline(options=PipelineOptions(BeamConfig().pipeline_args()))


def script(
    model, transform_graph: str, dev_qids: set[str], test_qids: set[str]
) -> tuple[float, float, float, int]:
    """(e): the whole job as a plain script; returns (seconds, alpha, test nDCG@10, texts
    encoded). Every text is encoded once: a document retrieved for dev and test queries too."""
    t0 = time.perf_counter()
    docs = dict(
        readers.get_reader("documents", "cranfield", allow_empty_text=True).read(
            str(DATA / "cranfield" / "cran.all.1400")
        )
    )
    queries = dict(
        readers.get_reader("queries", "cranfield").read(str(DATA / "cranfield" / "cran.qry"))
    )
    qrels: dict[str, dict[str, int]] = {}
    for qid, docid, rel in readers.get_reader("qrels", "cranfield").read(
        str(DATA / "cranfield" / "cranqrel")
    ):
        qrels.setdefault(qid, {})[docid] = int(rel)
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
    layer = tft.TFTransformOutput(transform_graph).transform_features_layer()
    wanted = sorted({d for q in qids for d in bm25[q]})
    texts = [queries[q] for q in qids] + [docs[d] for d in wanted]
    sparse = layer({"text": tf.constant(texts)})["token_ids"]
    ids = tf.RaggedTensor.from_sparse(sparse).to_list()
    ids = [row[:MAX_Q] for row in ids[: len(qids)]] + [row[:MAX_D] for row in ids[len(qids) :]]
    vectors = encode_once(embed_fn(model), ids).astype(np.float64)
    qv = dict(zip(qids, vectors[: len(qids)]))
    dv = dict(zip(wanted, vectors[len(qids) :]))
    dense = {q: {d: float(qv[q] @ dv[d]) for d in bm25[q]} for q in qids}

    def ndcg10(run: dict, on: set[str]) -> float:
        judged = {q: qrels[q] for q in on if q in qrels}
        evaluator = pytrec_eval.RelevanceEvaluator(judged, {"ndcg_cut_10"})
        per_query = evaluator.evaluate({q: run[q] for q in judged if q in run})
        return float(
            np.mean([per_query.get(q, {"ndcg_cut_10": 0.0})["ndcg_cut_10"] for q in judged])
        )

    grid = {a: ndcg10(fusion.fuse_run(dense, bm25, a), dev_qids) for a in fusion.ALPHA_GRID}
    alpha = max(grid.items(), key=lambda kv: (kv[1], kv[0]))[0]
    test = ndcg10(fusion.fuse_run(dense, bm25, alpha), test_qids)
    return time.perf_counter() - t0, alpha, test, len(texts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--outputs", help="RANKPIPE_OUTPUTS for the pipeline run (default: temp)")
    parser.add_argument("--per-pair", action="store_true", help="also time per-pair scoring")
    parser.add_argument("--repeats", type=int, default=2, help="of (a), (b), (c), (e): best of")
    args = parser.parse_args()
    outputs = Path(args.outputs or tempfile.mkdtemp(prefix="bench-speed-"))

    t0 = time.perf_counter()
    root = run_cranfield_pipeline(outputs, "bench-speed", [], config="cranfield")
    pipeline_s = time.perf_counter() - t0
    components = component_seconds(root)
    with open(os.path.join(latest_uri(root, "ModelEvaluation"), "metrics.json")) as f:
        metrics = json.load(f)
    with open(os.path.join(latest_uri(root, "ModelRun"), "train_results.json")) as f:
        trained = json.load(f)
    examples = latest_uri(root, "Examples")
    transform_graph = latest_uri(root, "TransformGraph")
    model_dir = os.path.join(latest_uri(root, "Model"), "Format-Serving")

    vocab = read_vocab(transform_graph)
    model = build_model(encoder_config(), len(vocab), MAX_Q, MAX_D, vocab)
    embed = embed_fn(model)
    test_records = split_records(examples, "test")
    dev_records = split_records(examples, "dev")
    dev_qids = {scoring.example_key(r)[0] for r in dev_records}
    test_qids = {scoring.example_key(r)[0] for r in test_records}
    test_uri = os.path.join(examples, "Split-test")

    def evaluator(embed_texts: bool = True) -> float:
        t0 = time.perf_counter()
        scoring.score_split(
            beam_pipeline,
            test_uri,
            {"candidate": model_dir},
            256,
            os.path.join(tempfile.mkdtemp(prefix="bench-speed-scores-"), "part"),
            embed=embed_texts,
        )
        return time.perf_counter() - t0

    def trainer_validation() -> float:
        t0 = time.perf_counter()
        dev = validation.score_dev_embedded(
            embed, [os.path.join(examples, "Split-dev", "*")], BATCH, MAX_Q, MAX_D
        )
        fusion.tune_alpha(
            dev.run,
            dev.first_stage,
            lambda run: validation.validation_metric(dev.qrels, run, "ndcg_cut_10"),
        )
        return time.perf_counter() - t0

    # Each measurement `repeats` times, interleaved, best of them: the machine is shared.
    times: dict[str, list[float]] = {k: [] for k in ("a", "a_dev", "b", "c", "e", "b0")}
    for _ in range(args.repeats):
        floor_s, n_texts = floor(embed, test_records)
        times["a"].append(floor_s)
        times["b"].append(evaluator())
        dev_floor_s, dev_texts = floor(embed, dev_records)
        times["a_dev"].append(dev_floor_s)
        times["c"].append(trainer_validation())
        script_s, script_alpha, script_ndcg, script_texts = script(
            model, transform_graph, dev_qids, test_qids
        )
        times["e"].append(script_s)
        if args.per_pair:
            times["b0"].append(evaluator(embed_texts=False))
    best = {k: min(v) for k, v in times.items() if v}
    floor_s, evaluator_s, dev_floor_s = best["a"], best["b"], best["a_dev"]
    validation_s, script_s, per_pair_s = best["c"], best["e"], best.get("b0")

    trainer_s = trained.get("seconds", {})
    in_pipeline_s = trainer_s.get("dev_scoring", float("nan")) + trainer_s.get("fusion", 0.0)
    rows = [
        ("(a) floor: encode the test split's distinct texts once", floor_s, f"{n_texts} texts"),
        (
            "(b) RankingEvaluator scoring pass (test)",
            evaluator_s,
            f"{evaluator_s / floor_s:.2f}x (a)",
        ),
        (
            "(b') the same inside the pipeline run",
            metrics["scoring_seconds"],
            f"{metrics['scoring_seconds'] / floor_s:.2f}x (a)",
        ),
        (
            "(a-dev) floor: encode the dev split's distinct texts once",
            dev_floor_s,
            f"{dev_texts} texts",
        ),
        (
            "(c) Trainer validation + alpha grid (dev)",
            validation_s,
            f"{validation_s / dev_floor_s:.2f}x (a-dev)",
        ),
        (
            "(c') the same inside the pipeline run",
            in_pipeline_s,
            f"{in_pipeline_s / dev_floor_s:.2f}x (a-dev)",
        ),
        ("(d) `rankpipe run cranfield`", pipeline_s, f"{pipeline_s / script_s:.2f}x (e)"),
        (
            "(e) plain script (bm25s, encode once, fusion, pytrec_eval)",
            script_s,
            f"{script_texts} texts; alpha {script_alpha:.2f}, test nDCG@10 {script_ndcg:.4f}",
        ),
    ]
    if args.per_pair:
        rows.insert(2, ("(b0) evaluator scoring every pair (old)", per_pair_s, ""))
    print()
    print(f"best of {args.repeats} for (a), (b), (c), (e); one run for (b'), (c'), (d)")
    print("| | seconds | |")
    print("|---|---:|---|")
    for name, seconds, note in rows:
        print(f"| {name} | {seconds:.1f} | {note} |")
    print()
    agg = metrics["aggregate"]
    alpha = (metrics.get("fusion") or {}).get("alpha")
    print(
        f"pipeline: test nDCG@10 {agg['candidate']['ndcg_cut_10']:.4f} at alpha {alpha} "
        f"(first stage {agg['first_stage']['ndcg_cut_10']:.4f}); components: "
        + ", ".join(f"{k} {v:.0f}s" for k, v in sorted(components.items()))
        + "; Trainer: "
        + ", ".join(f"{k} {v:.1f}s" for k, v in trainer_s.items())
    )


if __name__ == "__main__":
    main()
