"""First-stage candidates: from a given TREC run, or BM25 over the collection.

BM25 (Lucene variant, English stopwords, bm25s's tokenizer) runs sharded in the collection
pass, so that no process holds more than one shard of documents:

  1. `index_shard`: a shard (a reader batch of documents) -> its `ShardIndex`: docids,
     lengths and the term frequencies of the query terms only (bm25s's tokenizer);
  2. `ShardStatistics` summed over all shards (a Beam combine): document count, total length
     and the document frequencies of the query terms -- all BM25 needs globally, and small;
  3. `score_shard`: each shard scored with the global statistics -> per query its top `depth`
     (score, docid) in that shard;
  4. `merge_candidates`: per query the top `depth` across shards, ordered as `rank_run` ranks
     (score descending, then docid descending), so the result does not depend on how shards
     were formed or merged.

`sharded_bm25_run` chains these in one process (for tests and scripts); `bm25_run`, bm25s over
one in-memory index of the whole corpus, is the reference the sharded scores equal exactly
(same float32 arithmetic, see `score_shard`).
"""

from __future__ import annotations

import logging
import math
import time
from collections import Counter
from collections.abc import Iterable
from typing import NamedTuple

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
    """BM25 top-`depth` per query with bm25s (Lucene variant, English stopwords), over one
    in-memory index of all `documents`.

    The reference for the sharded BM25 the pipeline runs (`sharded_bm25_run`, and the Beam
    steps in beam_transforms.py); tests and the datagen benchmark's single-process reference
    use it. Among documents tied at the cut bm25s keeps an arbitrary subset.
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


# ------------------------------------------------------------------------------------------
# Sharded BM25 with global statistics
# ------------------------------------------------------------------------------------------

# bm25s computes the Lucene tf component as `tf / (k1 * (1 - b + b * l_d / l_avg) + tf)`
# with `tf` a float32 array and the rest a float64 scalar: NumPy 1.x does that sum in float32
# (value-based casting), NumPy 2 in float64. The dtype the installed NumPy picks, for the
# same arithmetic here.
_TFC_DTYPE = (np.zeros(1, np.float32) + np.float64(1.0)).dtype


def tokenize_for_bm25(texts: list[str]) -> list[list[str]]:
    """bm25s's own tokenizer as `bm25_run` uses it (lowercase, `\\b\\w\\w+\\b`, English
    stopwords), as token strings: a text's tokens do not depend on the other texts."""
    import bm25s

    if not texts:
        return []
    return bm25s.tokenize(texts, stopwords="en", show_progress=False, return_ids=False)


def query_tokens(queries: dict[str, str]) -> dict[str, list[str]]:
    """qid -> its tokens in order, repeats kept (bm25s scores a repeated term once per copy)."""
    qids = sorted(queries)
    return dict(zip(qids, tokenize_for_bm25([queries[q] for q in qids])))


class ShardIndex(NamedTuple):
    """One shard's documents reduced to what BM25 needs: no text, only the query terms.

    The postings of `terms[i]` are `positions[offsets[i]:offsets[i + 1]]` (indexes into
    `docids`) with term frequencies `tfs[...]` (flat arrays: cheap to pickle between steps).
    """

    docids: list[str]
    lengths: np.ndarray  # int64, tokens per document (after stopwords)
    terms: list[str]
    offsets: np.ndarray  # int64, len(terms) + 1
    positions: np.ndarray  # int32
    tfs: np.ndarray  # float32


class ShardStatistics(NamedTuple):
    """Corpus statistics, summed over shards: all that BM25 needs globally."""

    num_docs: int
    total_length: int
    doc_freqs: dict[str, int]  # query terms only

    def merge(self, other: ShardStatistics) -> ShardStatistics:
        doc_freqs = Counter(self.doc_freqs)
        doc_freqs.update(other.doc_freqs)
        return ShardStatistics(
            self.num_docs + other.num_docs,
            self.total_length + other.total_length,
            dict(doc_freqs),
        )


EMPTY_STATISTICS = ShardStatistics(0, 0, {})


def index_shard(documents: Iterable[tuple[str, str]], terms: set[str]) -> ShardIndex:
    """(docid, text) pairs -> their ShardIndex over the query `terms`."""
    docids, texts = [], []
    for docid, text in documents:
        docids.append(docid)
        texts.append(text)
    tokens = tokenize_for_bm25(texts)
    postings: dict[str, list[tuple[int, int]]] = {}
    for i, doc_tokens in enumerate(tokens):
        counts = Counter(doc_tokens)
        for term in counts.keys() & terms:
            postings.setdefault(term, []).append((i, counts[term]))
    sorted_terms = sorted(postings)
    offsets = np.zeros(len(sorted_terms) + 1, np.int64)
    np.cumsum([len(postings[t]) for t in sorted_terms], out=offsets[1:])
    flat = [p for t in sorted_terms for p in postings[t]]
    return ShardIndex(
        docids=docids,
        lengths=np.array([len(t) for t in tokens], np.int64),
        terms=sorted_terms,
        offsets=offsets,
        positions=np.array([p[0] for p in flat], np.int32),
        tfs=np.array([p[1] for p in flat], np.float32),
    )


def shard_statistics(shard: ShardIndex) -> ShardStatistics:
    return ShardStatistics(
        num_docs=len(shard.docids),
        total_length=int(shard.lengths.sum()),
        doc_freqs={
            t: int(shard.offsets[i + 1] - shard.offsets[i]) for i, t in enumerate(shard.terms)
        },
    )


def _top(scored: list[tuple[float, str]], depth: int) -> list[tuple[float, str]]:
    """The top `depth` by (score, docid) descending, each docid once (its best score)."""
    out, seen = [], set()
    for score, docid in sorted(scored, reverse=True):
        if docid not in seen:
            seen.add(docid)
            out.append((score, docid))
            if len(out) == depth:
                break
    return out


def score_shard(
    shard: ShardIndex,
    queries: dict[str, list[str]],
    stats: ShardStatistics,
    depth: int,
    k1: float,
    b: float,
) -> dict[str, list[tuple[float, str]]]:
    """qid -> the top `depth` (score, docid) of this shard with score > 0, scored with the
    global `stats`; queries with no match are left out.

    Hand-written rather than bm25s: bm25s indexes one in-memory corpus and computes its
    statistics from it; it cannot score a shard with statistics of the whole collection. The
    arithmetic is bm25s 0.3.16's ("lucene" method, dtype float32), step for step, so that the
    scores are the same floats: idf = log(1 + (N - df + 0.5) / (df + 0.5)) in float64 stored as
    float32; l_avg = total length / N in float64; each (document, term) score
    float32(idf * tf / (k1 * (1 - b + b * l_d / l_avg) + tf)) (see _TFC_DTYPE); a query's
    score summed in float32 over its tokens in order, a repeated token once per copy, tokens
    absent from the corpus skipped.
    """
    n = stats.num_docs
    if not shard.docids or n == 0:
        return {}
    l_avg = np.float64(stats.total_length) / n
    contributions: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    for i, term in enumerate(shard.terms):
        df = stats.doc_freqs[term]
        idf = np.float32(math.log(1 + (n - df + 0.5) / (df + 0.5)))
        start, end = shard.offsets[i], shard.offsets[i + 1]
        positions, tf = shard.positions[start:end], shard.tfs[start:end]
        l_d = shard.lengths[positions]
        norm = (k1 * ((1 - b) + b * l_d / l_avg)).astype(_TFC_DTYPE)
        contributions[term] = (positions, (idf * (tf / (norm + tf))).astype(np.float32))
    out: dict[str, list[tuple[float, str]]] = {}
    for qid, tokens in queries.items():
        scores = None
        for token in tokens:
            hit = contributions.get(token)
            if hit is None:
                continue
            if scores is None:
                scores = np.zeros(len(shard.docids), np.float32)
            scores[hit[0]] += hit[1]
        if scores is None:
            continue
        matched = np.flatnonzero(scores > 0)
        if len(matched) > depth:
            # Everything at or above the depth-th score (ties at the cut included), then exact.
            cut = np.partition(scores[matched], len(matched) - depth)[len(matched) - depth]
            matched = matched[scores[matched] >= cut]
        out[qid] = _top([(float(scores[j]), shard.docids[j]) for j in matched], depth)
    return out


def merge_candidates(
    candidate_lists: Iterable[list[tuple[float, str]]], depth: int
) -> list[tuple[float, str]]:
    """Per-shard top lists of one query -> the top `depth` across them, by (score, docid)
    descending; a docid in two shards (a duplicate across files) keeps its best score.
    Associative and independent of the order of the lists."""
    return _top([c for candidates in candidate_lists for c in candidates], depth)


def sharded_bm25_run(
    documents: Iterable[tuple[str, str]],
    queries: dict[str, str],
    depth: int,
    k1: float,
    b: float,
    shard_size: int,
) -> dict[str, dict[str, float]]:
    """The sharded BM25 of the pipeline in one process, shards of `shard_size` documents in
    order: the same result as `bm25_run` (exact scores), with ties at the cut kept by docid
    descending. Returns qid -> {docid: score} for every query (empty when nothing matches)."""
    docs = list(documents)
    tokens = query_tokens(queries)
    terms = {t for ts in tokens.values() for t in ts}
    shards = [index_shard(docs[i : i + shard_size], terms) for i in range(0, len(docs), shard_size)]
    stats = EMPTY_STATISTICS
    for shard in shards:
        stats = stats.merge(shard_statistics(shard))
    per_query: dict[str, list[list[tuple[float, str]]]] = {}
    for shard in shards:
        for qid, candidates in score_shard(shard, tokens, stats, depth, k1, b).items():
            per_query.setdefault(qid, []).append(candidates)
    return run_from_candidates(
        {qid: merge_candidates(lists, depth) for qid, lists in per_query.items()}, queries
    )


def run_from_candidates(
    merged: dict[str, list[tuple[float, str]]], queries: Iterable[str]
) -> dict[str, dict[str, float]]:
    """qid -> {docid: score} for every qid in `queries` (sorted), as `bm25_run` returns it."""
    return {qid: {docid: score for score, docid in merged.get(qid, [])} for qid in sorted(queries)}
