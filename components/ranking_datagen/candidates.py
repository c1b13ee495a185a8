"""First-stage candidates: from a given TREC run, or BM25 over the collection (bm25s)."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable

import numpy as np


def rank_run(
    run: dict[str, dict[str, float]], depth: int
) -> dict[str, list[tuple[str, float, int]]]:
    """Orders each query's documents as trec_eval does and keeps the top `depth`.

    trec_eval ignores the rank column: score descending, then docno descending.
    Returns qid -> [(docid, score, rank)] with ranks 1..n.
    """
    ranked = {}
    for qid, docs in run.items():
        order = sorted(docs.items(), key=lambda kv: (kv[1], kv[0]), reverse=True)[:depth]
        ranked[qid] = [(docid, score, i + 1) for i, (docid, score) in enumerate(order)]
    return ranked


def bm25_run(
    documents: Iterable[tuple[str, str]],
    queries: dict[str, str],
    depth: int,
    k1: float,
    b: float,
) -> dict[str, dict[str, float]]:
    """BM25 top-`depth` per query with bm25s (Lucene variant, English stopwords).

    Runs in one process: bm25s keeps its sparse index in memory, which fits collections up to a
    few million passages; beyond that, feed a first-stage run from a search engine instead.
    """
    import bm25s

    start = time.time()
    docids, texts = [], []
    for docid, text in documents:
        docids.append(docid)
        texts.append(text)
    retriever = bm25s.BM25(k1=k1, b=b, method="lucene")
    retriever.index(bm25s.tokenize(texts, stopwords="en", show_progress=False), show_progress=False)
    qids = sorted(queries)
    k = min(depth, len(docids))
    results, scores = retriever.retrieve(
        bm25s.tokenize([queries[q] for q in qids], stopwords="en", show_progress=False),
        k=k,
        show_progress=False,
        n_threads=0,
    )
    run: dict[str, dict[str, float]] = {}
    for qid, idx_row, score_row in zip(qids, results, scores):
        # bm25s returns zero-score padding when fewer than k documents match: drop it.
        run[qid] = {
            docids[i]: float(s) for i, s in zip(np.asarray(idx_row), np.asarray(score_row)) if s > 0
        }
    logging.info(
        "BM25 retrieved top-%d for %d queries over %d documents in %.1fs",
        k,
        len(qids),
        len(docids),
        time.time() - start,
    )
    return run
