"""Validation on the dev split with the evaluator's trec_eval-exact metrics (rankcore.metrics)."""

from __future__ import annotations

import logging
import os
import tempfile
from collections.abc import Callable
from typing import NamedTuple

import numpy as np
import tensorflow as tf

from rankcore import folds
from rankcore.metrics import aggregate, compute_metrics
from rankcore.metrics.readers import read_qrels
from trainer_module import inputs

TextKey = tuple[str, str]  # ("q", qid) or ("d", docid)
ScoreFn = Callable[[tf.Tensor, tf.Tensor], tf.Tensor]


class DevScores(NamedTuple):
    qrels: dict[str, dict[str, int]]  # from the examples' judged labels
    run: dict[str, dict[str, float]]  # the model's scores
    first_stage: dict[str, dict[str, float]]  # the examples' first-stage scores
    # Dual encoders (score_dev_embedded): each distinct text's token ids and float32 vector,
    # by ("q", qid) / ("d", docid): the fusion's feedback moves them (run_fn.choose_fusion).
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


EmbedFn = Callable[[tf.Tensor], tf.Tensor]  # right-padded ids [B, L] -> vectors [B, H]


class Candidates(NamedTuple):
    """Every candidate of eval-format groups (n = 1, trainer_module/inputs.py), in file order."""

    texts: dict[TextKey, list[int]]  # each distinct text's (truncated) token ids
    pairs: list[tuple[str, str]]  # (qid, docid) in file order: rank order within a query
    labels: dict[str, dict[str, float]]  # every candidate's label (unjudged: 0)
    qrels: dict[str, dict[str, int]]  # the judged candidates' labels
    first_stage: dict[str, dict[str, float]]


def read_candidates(
    file_patterns: list[str], batch_size: int, max_query_length: int, max_doc_length: int
) -> Candidates:
    out = Candidates({}, [], {}, {}, {})
    ds = inputs.make_eval_dataset(file_patterns, batch_size, max_query_length, max_doc_length)
    for batch in ds:
        qids = [q.decode() for q in batch["qid"].numpy()]
        docids = [d.decode() for d in batch["docid"].numpy()]
        queries, docs = batch["query"].numpy(), batch["doc"].numpy()
        labels, judged = batch["label"].numpy(), batch["judged"].numpy()
        first = batch["first_stage_score"].numpy()
        for i, (qid, docid) in enumerate(zip(qids, docids)):
            # A text recurs in many pairs (a query in each of its candidates, a document in
            # many queries' lists): its ids are the same each time, read once, [PAD] (0) out.
            for key, row in ((("q", qid), queries[i]), (("d", docid), docs[i])):
                if key not in out.texts:
                    out.texts[key] = row[row != 0].tolist()
            out.pairs.append((qid, docid))
            out.labels.setdefault(qid, {})[docid] = float(labels[i])
            out.first_stage.setdefault(qid, {})[docid] = float(first[i])
            if judged[i] == 1:
                out.qrels.setdefault(qid, {})[docid] = int(np.round(labels[i]))
    return out


def embed_texts(
    embed_fns: dict[str, EmbedFn],
    texts: dict[TextKey, list[int]],
    batch_size: int,
    doc_cache: dict[tuple[int, ...], np.ndarray] | None = None,
) -> dict[TextKey, np.ndarray]:
    """Each text's vector from its kind's function ("q" / "d"), in length-sorted batches of one
    kind (little padding). `doc_cache` (token ids -> vector), when given, is read and filled for
    documents: only valid while the document tower does not change (a recipe's frozen
    document tower, trainer_module/recipes/frozen_documents.py)."""
    out: dict[TextKey, np.ndarray] = {}
    for kind, embed_fn in embed_fns.items():
        keys = [k for k in texts if k[0] == kind]
        if kind == "d" and doc_cache is not None:
            for key in keys:
                cached = doc_cache.get(tuple(texts[key]))
                if cached is not None:
                    out[key] = cached
            keys = [k for k in keys if k not in out]
        keys.sort(key=lambda k: (len(texts[k]), k))
        for start in range(0, len(keys), batch_size):
            chunk = keys[start : start + batch_size]
            width = max(1, max(len(texts[k]) for k in chunk))
            ids = np.zeros([len(chunk), width], np.int64)
            for row, key in enumerate(chunk):
                ids[row, : len(texts[key])] = texts[key]
            for key, vector in zip(chunk, embed_fn(tf.constant(ids)).numpy()):
                out[key] = vector
                if kind == "d" and doc_cache is not None:
                    doc_cache[tuple(texts[key])] = vector
    return out


def score_dev_embedded(
    embed_fns: dict[str, EmbedFn],
    file_patterns: list[str],
    batch_size: int,
    max_query_length: int,
    max_doc_length: int,
    doc_cache: dict[tuple[int, ...], np.ndarray] | None = None,
) -> DevScores:
    """score_dev for dual encoders: each distinct query and document is embedded once (queries
    by embed_fns["q"], documents by embed_fns["d"], in length-sorted batches, so little
    padding), and a pair's score is the dot product of the L2-normalised embeddings, i.e. the
    model's cosine. Dev candidates share documents across queries, so this does several times
    less work than scoring every pair. The vectors are kept in `vectors` (float32, as the
    model computes them)."""
    cands = read_candidates(file_patterns, batch_size, max_query_length, max_doc_length)
    vectors = embed_texts(embed_fns, cands.texts, batch_size, doc_cache)
    out = DevScores(cands.qrels, {}, cands.first_stage, {})
    for key in sorted(vectors, key=lambda k: (len(cands.texts[k]), k)):
        out.vectors[key] = (cands.texts[key], vectors[key])
    out.run.update(dot_run(vectors, cands.pairs))
    return out


def dot_run(
    vectors: dict[TextKey, np.ndarray], pairs: list[tuple[str, str]]
) -> dict[str, dict[str, float]]:
    """{qid: {docid: score}} of `pairs` (qid, docid), a pair's score the dot product of its
    query's and document's vectors in float64 (the model's cosine for L2-normalised ones)."""
    run: dict[str, dict[str, float]] = {}
    for qid, docid in pairs:
        query, doc = vectors[("q", qid)], vectors[("d", docid)]
        run.setdefault(qid, {})[docid] = float(query.astype(np.float64) @ doc.astype(np.float64))
    return run


def split_judgments(
    qrels_uri: str | None, dev_splits: list[str] | None
) -> dict[str, dict[str, int]] | None:
    """Every judgment of the dev splits' queries, from the per-split files of RankingDataGen's
    qrels artifact (rankcore/folds.py split_qrels_file; no other split's file is opened), so
    the dev metric counts what the evaluator counts: a relevant document the candidates miss
    still counts in the ideal ranking, and a judged query without candidates scores 0. The
    examples alone hold the judged candidates only: on NFCorpus BM25 scored 0.57 nDCG@10 over
    them and 0.28 over every judgment. None without the artifact or its per-split files (one
    written before them): the dev metric then reads the examples' judged candidates."""
    if not qrels_uri or not dev_splits:
        return None
    judged: dict[str, dict[str, int]] = {}
    for split in dev_splits:
        path = os.path.join(qrels_uri, folds.split_qrels_file(split))
        if not tf.io.gfile.exists(path):
            logging.warning(
                "%s is missing (qrels written before per-split judgments): the dev metric "
                "counts the examples' judged candidates only",
                path,
            )
            return None
        if "://" not in path:
            judged.update(read_qrels(path))
            continue
        with tempfile.TemporaryDirectory() as tmp:  # read_qrels opens local files only
            local = os.path.join(tmp, os.path.basename(path))
            tf.io.gfile.copy(path, local)
            judged.update(read_qrels(local))
    return judged


def validation_metric(
    qrels: dict[str, dict[str, int]],
    run: dict[str, dict[str, float]],
    measure: str,
    relevance_level: int = 1,
) -> float:
    """trec_eval's "all" value of `measure` (mean over the judged queries, a query the run lacks
    counted as trec_eval -c counts it), via the evaluator's own metric code so validation and
    evaluation agree."""
    per_query = compute_metrics(
        qrels, run, [measure], relevance_level=relevance_level, complete=True
    )
    if not per_query:
        return 0.0  # no judged query was scored
    return float(aggregate(per_query)[measure])
