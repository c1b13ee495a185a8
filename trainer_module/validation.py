"""Validation on the dev split with the evaluator's trec_eval-exact metrics (rankcore.metrics)."""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import numpy as np
import tensorflow as tf

from rankcore.metrics import aggregate, compute_metrics
from trainer_module import inputs

ScoreFn = Callable[[tf.Tensor, tf.Tensor], tf.Tensor]


class DevScores(NamedTuple):
    qrels: dict[str, dict[str, int]]  # from the examples' judged labels
    run: dict[str, dict[str, float]]  # the model's scores
    first_stage: dict[str, dict[str, float]]  # the examples' first-stage scores
    # Dual encoders (score_dev_embedded): each distinct text's token ids and float32 vector,
    # by ("q", qid) / ("d", docid); run_fn writes them for the evaluator (rankcore/embeddings).
    vectors: dict[tuple[str, str], tuple[list[int], np.ndarray]] | None = None


def score_dev(
    score_fn: ScoreFn,
    file_patterns: list[str],
    batch_size: int,
    max_query_length: int,
    max_doc_length: int,
) -> DevScores:
    """Scores every dev candidate."""
    out = DevScores({}, {}, {})
    ds = inputs.make_eval_dataset(file_patterns, batch_size, max_query_length, max_doc_length)
    for batch in ds:
        scores = score_fn(batch["query"], batch["doc"]).numpy()
        qids = [q.decode() for q in batch["qid"].numpy()]
        docids = [d.decode() for d in batch["docid"].numpy()]
        labels = batch["label"].numpy()
        judged = batch["judged"].numpy()
        first = batch["first_stage_score"].numpy()
        for qid, docid, score, label, j, f in zip(qids, docids, scores, labels, judged, first):
            out.run.setdefault(qid, {})[docid] = float(score)
            out.first_stage.setdefault(qid, {})[docid] = float(f)
            if j == 1:
                out.qrels.setdefault(qid, {})[docid] = int(np.round(label))
    return out


def score_dev_embedded(
    embed_fn: Callable[[tf.Tensor], tf.Tensor],
    file_patterns: list[str],
    batch_size: int,
    max_query_length: int,
    max_doc_length: int,
) -> DevScores:
    """score_dev for dual encoders: each distinct query and document is embedded once (in
    length-sorted batches, so little padding), and a pair's score is the dot product of the
    L2-normalised embeddings, i.e. the model's cosine. Dev candidates share documents across
    queries, so this does several times less work than scoring every pair. The vectors are kept
    in `vectors` (float32, as the model computes them)."""
    out = DevScores({}, {}, {}, {})
    texts: dict[tuple[str, str], list[int]] = {}
    pairs: list[tuple[str, str]] = []
    ds = inputs.make_eval_dataset(file_patterns, batch_size, max_query_length, max_doc_length)
    for batch in ds:
        qids = [q.decode() for q in batch["qid"].numpy()]
        docids = [d.decode() for d in batch["docid"].numpy()]
        queries, docs = batch["query"].numpy(), batch["doc"].numpy()
        labels, judged = batch["label"].numpy(), batch["judged"].numpy()
        first = batch["first_stage_score"].numpy()
        for i, (qid, docid) in enumerate(zip(qids, docids)):
            texts[("q", qid)] = [int(t) for t in queries[i] if t]
            texts[("d", docid)] = [int(t) for t in docs[i] if t]
            pairs.append((qid, docid))
            out.first_stage.setdefault(qid, {})[docid] = float(first[i])
            if judged[i] == 1:
                out.qrels.setdefault(qid, {})[docid] = int(np.round(labels[i]))
    keys = sorted(texts, key=lambda k: (len(texts[k]), k))
    for start in range(0, len(keys), batch_size):
        chunk = keys[start : start + batch_size]
        width = max(1, max(len(texts[k]) for k in chunk))
        ids = np.zeros([len(chunk), width], np.int64)
        for row, key in enumerate(chunk):
            ids[row, : len(texts[key])] = texts[key]
        for key, vector in zip(chunk, embed_fn(tf.constant(ids)).numpy()):
            out.vectors[key] = (texts[key], vector)
    for qid, docid in pairs:
        query, doc = out.vectors[("q", qid)][1], out.vectors[("d", docid)][1]
        out.run.setdefault(qid, {})[docid] = float(
            query.astype(np.float64) @ doc.astype(np.float64)
        )
    return out


def validation_metric(
    qrels: dict[str, dict[str, int]],
    run: dict[str, dict[str, float]],
    measure: str,
    relevance_level: int = 1,
) -> float:
    """trec_eval's "all" value of `measure` (mean over the judged queries in the run), via the
    evaluator's own metric code so validation and evaluation agree."""
    per_query = compute_metrics(qrels, run, [measure], relevance_level=relevance_level)
    if not per_query:
        return 0.0  # no judged query was scored
    return float(aggregate(per_query)[measure])
