"""trec_eval's ranking of a run: the order it evaluates documents in, and the per-query inputs
our own measures (own.py) read.

trec_eval ignores the rank column of a run: form_res_rels.c orders a query's documents by score
descending, then docno descending, and codes each retrieved document's judgment as a res_rels
entry (RELVALUE_NONPOOL, RELVALUE_UNJUDGED).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass

Qrels = Mapping[str, Mapping[str, int]]
Run = Mapping[str, Mapping[str, float]]

NONPOOL = -1  # retrieved doc absent from the qrels (trec_eval RELVALUE_NONPOOL)
UNJUDGED = -2  # doc in the qrels with a negative judgment (RELVALUE_UNJUDGED)


def rank_documents(doc_scores: Mapping[str, float]) -> list[str]:
    """Docnos in trec_eval's rank order: score descending, then docno descending.

    This is form_res_rels.c's comparator (the rank column of a run is ignored).
    Python compares str by code point, which is the byte order strcmp sees in UTF-8.
    """
    return sorted(doc_scores, key=lambda d: (doc_scores[d], d), reverse=True)


def truncate_run(run: Run, max_docs: int) -> dict[str, dict[str, float]]:
    """Keep each query's top `max_docs` documents in trec_eval order (trec_eval -M)."""
    if max_docs < 1:
        raise ValueError(f"max_docs must be positive, got {max_docs}")
    out: dict[str, dict[str, float]] = {}
    for qid, docs in run.items():
        if len(docs) <= max_docs:
            out[qid] = dict(docs)
        else:
            out[qid] = {d: docs[d] for d in rank_documents(docs)[:max_docs]}
    return out


def ranked_rels(
    judged: Mapping[str, int], docs: Mapping[str, float], judged_docs_only: bool
) -> list[int]:
    """Relevance of each retrieved doc in rank order, coded as trec_eval's res_rels."""
    rels = []
    for docno in rank_documents(docs):
        rel = judged.get(docno)
        if rel is None:
            rel = NONPOOL
        elif rel < 0:
            rel = UNJUDGED
        rels.append(rel)
    if judged_docs_only:  # -J drops non-pool and unjudged docs, keeping the order
        rels = [r for r in rels if r >= 0]
    return rels


def num_rel(judged: Mapping[str, int], relevance_level: int) -> int:
    # form_res_rels.c: only judgments >= 0 form relevance levels.
    return sum(1 for r in judged.values() if r >= 0 and r >= relevance_level)


@dataclass
class QueryEval:
    """One query's inputs to a measure computed here (own.py): its judgments, the run's
    documents, trec_eval's options and pytrec_eval's row for the query (for measures derived
    from one it computes). `rels` is ranked on first use only."""

    judged: Mapping[str, int]
    docs: Mapping[str, float]
    relevance_level: int
    judged_docs_only: bool
    trec_row: Mapping[str, float]

    @functools.cached_property
    def rels(self) -> list[int]:
        return ranked_rels(self.judged, self.docs, self.judged_docs_only)

    @property
    def num_rel(self) -> int:
        return num_rel(self.judged, self.relevance_level)
