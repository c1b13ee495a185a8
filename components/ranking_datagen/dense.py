"""Hybrid candidates (issue 17): a sentence encoder's dense top-k over the whole corpus, joined
to the first stage's top-k.

BM25 misses relevant documents that share no term with the query; a dual encoder finds some of
them, and a reranker can only rank what it is given. So with `datagen.hybrid.checkpoint_dir`
set, the collection pass embeds every document with that checkpoint's encoder as it is
(rankcore/encoders/sentence.py: all-MiniLM-L6-v2 the way sentence-transformers runs it, the same
embedding the Trainer's zero-shot dual encoder computes), scores it against every query, and
keeps per query the `depth` best (`DenseScorer` per shard, merged by the same
candidates.TopCandidates as BM25's shards). `join_candidates` then appends to each query's
first-stage candidates the dense ones it lacks.

Fusion runs over that union. A candidate the first stage did not return gets the first stage's
minimum for that query (the issue's rule), taken one float32 step below it (`below`): min-max
fusion sees the same 0 either way, and trec_eval, which orders by score, puts every added
candidate after all of the first stage's, so the first stage's own ranking is what it was
(measures over the whole list, MAP or recall@1000, also count the added tail). The reranker's
side needs no such rule: it scores every candidate of the union.

Exact inner-product search (a matrix product per shard) instead of an ANN index (ScaNN,
FAISS): on the CPU workers this runs on, embedding the corpus costs far more than the exact
search (MiniLM-L6 on 2 cores: Cranfield's 1,400 abstracts at 254 tokens in about 45 s, the MS
MARCO subset's 5,000 passages at 128 in about 68 s), so an index would save nothing.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import numpy as np
import tensorflow as tf

from components.ranking_datagen import tokenization
from components.ranking_datagen.candidates import ShardTop
from rankcore.encoders import hf_checkpoint
from rankcore.encoders.sentence import SentenceEncoder

# The first stage's score of a query with no first-stage candidate at all (BM25 matched no term).
NO_FIRST_STAGE_SCORE = 0.0


class DenseScorer:
    """The checkpoint's encoder with every query embedded once; `score` gives a shard's dense top
    `depth` per query as ShardTop rows (query index into the sorted qids)."""

    def __init__(
        self,
        checkpoint_dir: str,
        lowercase: bool,
        queries: dict[str, str],
        max_query_length: int,
        max_doc_length: int,
        batch_size: int,
    ):
        self._encoder = SentenceEncoder(checkpoint_dir)
        # The encoder's WordPiece vocabulary: vocab.txt, or its BERT part for MPNet (after
        # <s>, <pad>, </s>, <unk>: errors then name the line in vocab.txt).
        self._model = tokenization.wordpiece_model_of(
            tokenization.check_vocab(
                self._encoder.vocab,
                os.path.join(checkpoint_dir, hf_checkpoint.VOCAB_FILE),
                first_line=1 + self._encoder.vocab_offset,
            )
        )
        self._lowercase = lowercase
        self._max_doc_length = max_doc_length
        self._batch_size = batch_size
        self.qids = sorted(queries)
        # Cut as the examples cut them, so a dense score is the zero-shot dual encoder's score
        # of the same (query, document) example.
        self._queries = self._embed([queries[q] for q in self.qids], max_query_length)

    def _embed(self, texts: Sequence[str], max_length: int) -> np.ndarray:
        if not texts:
            return self._encoder.embed([])
        ids = tokenization.tokenize(tf.constant(list(texts)), self._model, self._lowercase)
        return self._encoder.embed(
            [row[:max_length] for row in ids.to_list()], batch_size=self._batch_size
        )

    def score(self, docids: Sequence[str], texts: Sequence[str], depth: int) -> ShardTop:
        """One shard of documents -> per query its `depth` best documents of the shard."""
        if not docids or not self.qids:
            return ShardTop(np.zeros(0, np.int32), np.zeros(0, np.float32), np.zeros(0, "U1"))
        scores = self._queries @ self._embed(texts, self._max_doc_length).T  # [queries, docs]
        # Per query every document scoring at least its k-th best score: the k best and any
        # tied with the k-th, so the merge (which orders by score, then docid, as trec_eval
        # ranks) keeps the same documents however the corpus was cut into shards.
        k = min(depth, scores.shape[1])
        kth = np.partition(scores, scores.shape[1] - k, axis=1)[:, scores.shape[1] - k]
        query, doc = np.nonzero(scores >= kth[:, None])
        return ShardTop(
            query.astype(np.int32), scores[query, doc].astype(np.float32), np.asarray(docids)[doc]
        )


def below(score: float) -> float:
    """The float32 just below `score`: examples store first-stage scores as float32, so a step
    in float64 would round back onto `score` there and tie with the lowest candidate."""
    return float(np.nextafter(np.float32(score), np.float32(-np.inf)))


def join_candidates(
    ranked: dict[str, list[tuple[str, float, int]]],
    dense: dict[str, list[tuple[float, str]]],
) -> tuple[dict[str, list[tuple[str, float, int]]], int]:
    """The first stage's ranked candidates (qid -> [(docid, score, rank)]) with each query's
    dense candidates it lacks appended, scored one float32 step below the query's lowest
    first-stage score and ordered as trec_eval orders equal scores (docid descending). Returns
    (the union, how many candidates were added). Queries without dense candidates keep theirs."""
    joined: dict[str, list[tuple[str, float, int]]] = {}
    added = 0
    for qid in sorted(set(ranked) | set(dense)):
        first = ranked.get(qid, [])
        have = {docid for docid, _, _ in first}
        extra = sorted(
            {docid for _, docid in dense.get(qid, []) if docid not in have}, reverse=True
        )
        low = min((score for _, score, _ in first), default=None)
        score = NO_FIRST_STAGE_SCORE if low is None else below(low)
        joined[qid] = first + [(d, score, len(first) + i + 1) for i, d in enumerate(extra)]
        added += len(extra)
    return joined, added


def candidate_recall(
    ranked: dict[str, list[tuple[str, float, int]]], qrels: dict[str, dict[str, int]]
) -> dict[str, int]:
    """How many judged relevant (grade > 0) (query, document) pairs the candidates hold."""
    relevant = {(q, d) for q, docs in qrels.items() for d, grade in docs.items() if grade > 0}
    found = sum(1 for q, docs in ranked.items() for d, _, _ in docs if (q, d) in relevant)
    return {"relevant_judged": len(relevant), "relevant_in_candidates": found}


def hybrid_candidates(
    ranked: dict[str, list[tuple[str, float, int]]],
    dense: dict[str, list[tuple[float, str]]],
    qrels: dict[str, dict[str, int]],
    depth: int,
) -> tuple[dict[str, list[tuple[str, float, int]]], dict[str, int]]:
    """`join_candidates`, and the summary's `hybrid` entry: what the union added."""
    before = candidate_recall(ranked, qrels)
    joined, added = join_candidates(ranked, dense)
    after = candidate_recall(joined, qrels)
    return joined, {
        "dense_depth": depth,
        "candidates_added": added,
        "relevant_judged": after["relevant_judged"],
        "relevant_in_first_stage": before["relevant_in_candidates"],
        "relevant_in_union": after["relevant_in_candidates"],
    }
