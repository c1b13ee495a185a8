"""Validation on the dev split with the evaluator's trec_eval-exact metric code."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import tensorflow as tf

from components.ranking_evaluator import trec_eval
from trainer_module import inputs

ScoreFn = Callable[[tf.Tensor, tf.Tensor], tf.Tensor]


def score_dev(
    score_fn: ScoreFn,
    file_patterns: list[str],
    batch_size: int,
    max_query_length: int,
    max_doc_length: int,
) -> tuple[dict[str, dict[str, int]], dict[str, dict[str, float]]]:
    """Scores every dev candidate. Returns (qrels from judged labels, run from model scores)."""
    qrels: dict[str, dict[str, int]] = {}
    run: dict[str, dict[str, float]] = {}
    ds = inputs.make_eval_dataset(file_patterns, batch_size, max_query_length, max_doc_length)
    for batch in ds:
        scores = score_fn(batch["query"], batch["doc"]).numpy()
        qids = [q.decode() for q in batch["qid"].numpy()]
        docids = [d.decode() for d in batch["docid"].numpy()]
        labels = batch["label"].numpy()
        judged = batch["judged"].numpy()
        for qid, docid, score, label, j in zip(qids, docids, scores, labels, judged):
            run.setdefault(qid, {})[docid] = float(score)
            if j == 1:
                qrels.setdefault(qid, {})[docid] = int(np.round(label))
    return qrels, run


def validation_metric(
    qrels: dict[str, dict[str, int]],
    run: dict[str, dict[str, float]],
    measure: str,
    relevance_level: int = 1,
) -> float:
    """trec_eval's "all" value of `measure` (mean over the judged queries in the run), via the
    evaluator's own metric code so validation and evaluation agree."""
    per_query = trec_eval.compute_metrics(qrels, run, [measure], relevance_level=relevance_level)
    if not per_query:
        return 0.0  # no judged query was scored
    return float(trec_eval.aggregate(per_query)[measure])
