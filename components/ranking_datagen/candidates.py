"""First-stage candidates: from a given TREC run, or BM25 over the collection.

BM25 (Lucene variant, English stopwords, bm25s's tokenizer, optionally a Snowball stemmer:
`datagen.bm25.stemmer`) runs sharded in the collection pass, so that no process holds more
than one shard of documents:

  1. `index_shard`: a shard (a reader batch of documents) -> its `ShardIndex`: docids,
     lengths and the term frequencies of the query terms only (bm25s's tokenizer);
  2. `ShardStatistics` summed over all shards (a Beam combine): document count, total length
     and the document frequencies of the query terms -- all BM25 needs globally, and small;
  3. `Bm25Scorer`: each shard scored with the global statistics, all queries at once ->
     per query its top `depth` in that shard, as flat rows (`ShardTop`);
  4. `TopCandidates`: per query the top `depth` across shards, ordered as `rank_run` ranks
     (score descending, then docid descending), so the result does not depend on how shards
     were formed or merged.

beam_transforms.ShardedBm25 runs these steps in the pipeline. The tests' reference
(tests/components/ranking_datagen/bm25_reference.py) chains them in one process
(`sharded_bm25_run`) and runs bm25s over one in-memory index of the whole corpus (`bm25_run`),
which the sharded scores equal exactly (same float32 arithmetic, see `Bm25Scorer`).
"""

from __future__ import annotations

import math
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


# ------------------------------------------------------------------------------------------
# Sharded BM25 with global statistics
# ------------------------------------------------------------------------------------------

# bm25s computes the Lucene tf component as `tf / (k1 * (1 - b + b * l_d / l_avg) + tf)`
# with `tf` a float32 array and the rest a float64 scalar: NumPy 1.x does that sum in float32
# (value-based casting), NumPy 2 in float64. The dtype the installed NumPy picks, for the
# same arithmetic here.
_TFC_DTYPE = (np.zeros(1, np.float32) + np.float64(1.0)).dtype


# `datagen.bm25.stemmer`: PyStemmer's Snowball algorithms by name, or none (the default: the
# runs of before). "porter" is what Lucene's EnglishAnalyzer (Anserini's BM25, BEIR's standard
# first stage) does: its PorterStemFilter is Martin Porter's original algorithm, which
# Snowball's "porter" implements; Snowball's "english" (Porter2) stems differently
# ("generalization" -> "general", not "gener"; "news" stays) and is there to compare (within
# noise of porter on every shipped collection's dev queries: docs/datagen.md "Stemmer").
# EnglishAnalyzer's other steps need no option: its stopwords are bm25s's "en" list (the same
# 33 words), and the "'s" its EnglishPossessiveFilter removes is a one-letter token that
# bm25s's `\w\w+` drops anyway.
STEMMERS = ("none", "porter", "english")


def _stemmer(name: str):
    """The PyStemmer stemmer `name` (one of STEMMERS; None for none), made per call: a
    Stemmer object is not safe to share between threads, and one costs microseconds."""
    if name not in STEMMERS:
        raise ValueError(f"datagen.bm25.stemmer: {name!r} is not one of {', '.join(STEMMERS)}")
    if name == "none":
        return None
    import Stemmer  # PyStemmer

    return Stemmer.Stemmer(name)


def tokenize_for_bm25(texts: list[str], stemmer: str = "none") -> list[list[str]]:
    """bm25s's own tokenizer as a bm25s index of the corpus uses it (lowercase,
    `\\b\\w\\w+\\b`, English stopwords, then the `stemmer` on each remaining word), as token
    strings: each word is stemmed alone, so a text's tokens do not depend on the other texts
    (nor on the shard it is in)."""
    import bm25s

    if not texts:
        return []
    return bm25s.tokenize(
        texts, stopwords="en", stemmer=_stemmer(stemmer), show_progress=False, return_ids=False
    )


def query_tokens(queries: dict[str, str], stemmer: str = "none") -> dict[str, list[str]]:
    """qid -> its tokens in order, repeats kept (bm25s scores a repeated term once per copy);
    `stemmer` must be the one the documents are indexed with (index_shard)."""
    qids = sorted(queries)
    return dict(zip(qids, tokenize_for_bm25([queries[q] for q in qids], stemmer)))


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


def index_shard(
    documents: Iterable[tuple[str, str]], terms: set[str], stemmer: str = "none"
) -> ShardIndex:
    """(docid, text) pairs -> their ShardIndex over the query `terms` (tokenized with the
    `stemmer` the query terms were: query_tokens)."""
    docids, texts = [], []
    for docid, text in documents:
        docids.append(docid)
        texts.append(text)
    tokens = tokenize_for_bm25(texts, stemmer)
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


class ShardTop(NamedTuple):
    """Candidates as flat arrays, one row each: query index (into the scorer's sorted qids),
    score, docid. What a scored shard emits and what the merge keeps (cheap to pickle)."""

    query: np.ndarray  # int32
    score: np.ndarray  # float32
    docid: np.ndarray  # str (numpy unicode)


def candidate_lists(top: ShardTop, qids: list[str]) -> dict[str, list[tuple[float, str]]]:
    """Rows -> qid -> [(score, docid)] in rank order, for the queries with any row; `qids` are
    the scorer's (the sorted qids of its queries)."""
    out: dict[str, list[tuple[float, str]]] = {}
    for q, score, docid in zip(top.query.tolist(), top.score.tolist(), top.docid.tolist()):
        out.setdefault(qids[q], []).append((score, docid))
    return out


def _empty_top() -> ShardTop:
    return ShardTop(np.zeros(0, np.int32), np.zeros(0, np.float32), np.zeros(0, "U1"))


def _best_per_query(top: ShardTop, depth: int) -> ShardTop:
    """Per query the first `depth` rows by score descending, then docid descending (the order
    rank_run ranks in), each docid once (its best score); rows sorted by query, then that
    order. Vectorized: a merge sees millions of rows on a large collection."""
    if len(top.query) == 0:
        return top
    names, name_rank = np.unique(top.docid, return_inverse=True)
    order = np.lexsort((-name_rank, -top.score, top.query))
    query, rank = top.query[order], name_rank[order]
    # A docid twice for one query (a duplicate across files) keeps its first (best) row.
    pair = query.astype(np.int64) * len(names) + rank
    _, first = np.unique(pair, return_index=True)
    order = order[np.sort(first)]
    query = top.query[order]
    starts = np.flatnonzero(np.r_[True, query[1:] != query[:-1]])
    position = np.arange(len(query)) - np.repeat(starts, np.diff(np.r_[starts, len(query)]))
    keep = order[position < depth]
    return ShardTop(top.query[keep], top.score[keep], top.docid[keep])


class Bm25Scorer:
    """Scores shards with the global statistics, all queries at once.

    Hand-written rather than bm25s: bm25s indexes one in-memory corpus and computes its
    statistics from it; it cannot score a shard with statistics of the whole collection. The
    arithmetic is bm25s 0.3.16's ("lucene" method, dtype float32), so that the scores are the
    same floats: idf = log(1 + (N - df + 0.5) / (df + 0.5)) in float64 stored as float32;
    l_avg = total length / N in float64; each (document, term) score
    float32(idf * tf / (k1 * (1 - b + b * l_d / l_avg) + tf)) (see _TFC_DTYPE); a query's
    score summed in float32 over its tokens in order, a repeated token once per copy, tokens
    absent from the corpus skipped. Each step is one NumPy operation over all postings and
    (query, document) pairs of the shard: a loop per query and shard costs queries x shards,
    which on millions of documents is hours.
    """

    def __init__(self, queries: dict[str, list[str]], stats: ShardStatistics, k1: float, b: float):
        self.qids = sorted(queries)
        self._n = stats.num_docs
        self._k1, self._b = k1, b
        self._l_avg = np.float64(stats.total_length) / self._n if self._n else np.float64(0)
        terms = sorted({t for tokens in queries.values() for t in tokens if t in stats.doc_freqs})
        self._term_id = {t: i for i, t in enumerate(terms)}
        n = self._n
        self._idf = np.array(
            [
                np.float32(math.log(1 + (n - df + 0.5) / (df + 0.5)))
                for df in (stats.doc_freqs[t] for t in terms)
            ],
            np.float32,
        )
        # Every (query, token) with the token in the corpus, by position in the query first:
        # the sums below then add each query's tokens in order.
        by_position: list[tuple[int, int, int]] = []
        for q, qid in enumerate(self.qids):
            for j, token in enumerate(queries[qid]):
                if token in self._term_id:
                    by_position.append((j, q, self._term_id[token]))
        by_position.sort()
        self._token_query = np.array([q for _, q, _ in by_position], np.int64)
        self._token_term = np.array([t for _, _, t in by_position], np.int64)

    def score(self, shard: ShardIndex, depth: int) -> ShardTop:
        """The shard's top `depth` per query (documents with score > 0), as rows."""
        if not shard.docids or self._n == 0 or not len(self._token_term):
            return _empty_top()
        term_ids = np.array([self._term_id[t] for t in shard.terms], np.int64)
        slot = np.full(len(self._idf), -1, np.int64)  # term id -> its index in the shard
        slot[term_ids] = np.arange(len(term_ids))
        # Per posting: float32(idf * tf / (k1 * (1 - b + b * l_d / l_avg) + tf)).
        term_of_posting = np.repeat(term_ids, np.diff(shard.offsets))
        l_d = shard.lengths[shard.positions]
        norm = (self._k1 * ((1 - self._b) + self._b * l_d / self._l_avg)).astype(_TFC_DTYPE)
        tf = shard.tfs
        contribution = (self._idf[term_of_posting] * (tf / (norm + tf))).astype(np.float32)
        # (query, document) pairs: each query token's postings in this shard.
        present = slot[self._token_term] >= 0
        token_query = self._token_query[present]
        token_slot = slot[self._token_term[present]]
        starts = shard.offsets[token_slot]
        counts = shard.offsets[token_slot + 1] - starts
        posting = np.arange(counts.sum()) + np.repeat(starts - (np.cumsum(counts) - counts), counts)
        ndocs = len(shard.docids)
        pair = np.repeat(token_query, counts) * ndocs + shard.positions[posting]
        pairs, which = np.unique(pair, return_inverse=True)
        scores = np.zeros(len(pairs), np.float32)
        # Unbuffered and in array order: each pair's float32 sum takes the tokens in order.
        np.add.at(scores, which, contribution[posting])
        matched = scores > 0
        docids = np.array(shard.docids)
        top = ShardTop(
            (pairs[matched] // ndocs).astype(np.int32),
            scores[matched],
            docids[pairs[matched] % ndocs],
        )
        return _best_per_query(top, depth)


class TopCandidates:
    """Merges ShardTop rows into the top `depth` per query (score descending, then docid
    descending; a docid found in two shards counts once, with its best score). Associative
    and independent of the order of the parts. Rows below a query's current depth-th score
    are dropped as they arrive, and the kept rows are pruned whenever they outgrow
    queries x depth, so memory stays about queries x depth rows."""

    def __init__(self, depth: int):
        self._depth = depth
        self._parts: list[ShardTop] = []
        self._rows = 0
        self._kept = _empty_top()
        # Per query index, its depth-th score in `_kept` (-inf while it has fewer rows).
        self._floor = np.zeros(0, np.float32)

    def add(self, top: ShardTop) -> TopCandidates:
        if len(self._floor) and len(top.query):
            floor = self._floor
            if top.query.max() >= len(floor):
                floor = np.pad(
                    floor, (0, top.query.max() + 1 - len(floor)), constant_values=-np.inf
                )
            keep = top.score >= floor[top.query]
            top = ShardTop(top.query[keep], top.score[keep], top.docid[keep])
        if len(top.query):
            self._parts.append(top)
            self._rows += len(top.query)
            if self._rows > 2 * max(len(self._kept.query), self._depth * 64):
                self._prune()
        return self

    def _prune(self) -> None:
        parts = [self._kept, *self._parts]
        fields = (np.concatenate([p[i] for p in parts]) for i in range(len(ShardTop._fields)))
        self._kept = _best_per_query(ShardTop(*fields), self._depth)
        self._parts, self._rows = [], 0
        query = self._kept.query
        if not len(query):
            return
        ends = np.flatnonzero(np.r_[query[1:] != query[:-1], True])
        starts = np.r_[0, ends[:-1] + 1]
        full = ends - starts + 1 == self._depth
        self._floor = np.full(int(query.max()) + 1, -np.inf, np.float32)
        self._floor[query[ends[full]]] = self._kept.score[ends[full]]

    def result(self) -> ShardTop:
        self._prune()
        return self._kept


def run_from_candidates(
    merged: dict[str, list[tuple[float, str]]], queries: Iterable[str]
) -> dict[str, dict[str, float]]:
    """qid -> {docid: score} for every qid in `queries` (sorted), as bm25s's single index
    gives it (the tests' `bm25_run`)."""
    return {qid: {docid: score for score, docid in merged.get(qid, [])} for qid in sorted(queries)}
