"""The references the pipeline's sharded BM25 (components/ranking_datagen/candidates.py, run in
Beam by beam_transforms.ShardedBm25) is tested against; test code, not in the image.

`bm25_run`: bm25s over one in-memory index of the whole corpus, the scores the sharded BM25
must equal exactly (same float32 arithmetic, see candidates.Bm25Scorer). `sharded_bm25_run`:
the pipeline's sharded steps chained in one process. Used by test_candidates.py,
test_beam_transforms.py and the datagen benchmark's single-process reference
(tests/benchmarks/bench_datagen.py); imported as a top-level module (this directory is on
sys.path, as for datagen_testlib).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable

import numpy as np

from components.ranking_datagen.candidates import (
    EMPTY_STATISTICS,
    Bm25Scorer,
    TopCandidates,
    candidate_lists,
    index_shard,
    query_tokens,
    run_from_candidates,
    shard_statistics,
)

Documents = Iterable[tuple[str, str]]  # (docid, text)
Run = dict[str, dict[str, float]]  # qid -> {docid: score}


def bm25_run(
    documents: Documents,
    queries: dict[str, str],
    depth: int,
    k1: float,
    b: float,
    stemmer: str = "none",
) -> Run:
    """BM25 top-`depth` per query with bm25s (Lucene variant, English stopwords, PyStemmer's
    `stemmer` unless none), over one in-memory index of all `documents`: bm25s's own
    tokenize-with-stemmer, index and retrieve, as its README shows them.

    The reference for the sharded BM25 the pipeline runs (`sharded_bm25_run`, and the Beam
    steps in beam_transforms.py); tests and the datagen benchmark's single-process reference
    use it. Among documents tied at the cut bm25s keeps an arbitrary subset.
    """
    import bm25s
    import Stemmer

    stem = None if stemmer == "none" else Stemmer.Stemmer(stemmer)
    start = time.time()
    docids, texts = [], []
    for docid, text in documents:
        docids.append(docid)
        texts.append(text)
    retriever = bm25s.BM25(k1=k1, b=b, method="lucene")
    retriever.index(
        bm25s.tokenize(texts, stopwords="en", stemmer=stem, show_progress=False),
        show_progress=False,
    )
    qids = sorted(queries)
    k = min(depth, len(docids))
    results, scores = retriever.retrieve(
        bm25s.tokenize(
            [queries[q] for q in qids], stopwords="en", stemmer=stem, show_progress=False
        ),
        k=k,
        show_progress=False,
        n_threads=0,
    )
    run: Run = {}
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


def sharded_bm25_run(
    documents: Documents,
    queries: dict[str, str],
    depth: int,
    k1: float,
    b: float,
    shard_size: int,
    stemmer: str = "none",
) -> Run:
    """The sharded BM25 of the pipeline in one process, shards of `shard_size` documents in
    order: the same result as `bm25_run` (exact scores), with ties at the cut kept by docid
    descending. Returns qid -> {docid: score} for every query (empty when nothing matches)."""
    docs = list(documents)
    tokens = query_tokens(queries, stemmer)
    terms = {t for ts in tokens.values() for t in ts}
    shards = [
        index_shard(docs[i : i + shard_size], terms, stemmer)
        for i in range(0, len(docs), shard_size)
    ]
    stats = EMPTY_STATISTICS
    for shard in shards:
        stats = stats.merge(shard_statistics(shard))
    scorer = Bm25Scorer(tokens, stats, k1, b)
    merged = TopCandidates(depth)
    for shard in shards:
        merged.add(scorer.score(shard, depth))
    return run_from_candidates(candidate_lists(merged.result(), scorer.qids), queries)
