"""Hybrid candidates: a sentence encoder's dense top-k over the whole corpus, joined to the first
stage's top-k.

BM25 misses relevant documents that share no term with the query; a dual encoder finds some of
them, and a reranker can only rank what it is given. So with `datagen.hybrid.checkpoint_dir`
set, the collection pass (dense_retrieval.py) takes every document's vector from that
checkpoint's encoder as it is (rankcore/encoders/sentence.py: all-MiniLM-L6-v2 the way
sentence-transformers runs it, the same embedding the Trainer's zero-shot dual encoder
computes), embedded there or read from the corpus vectors (below), scores it against every
query, and
keeps per query the `depth` best (`DenseScorer` per shard, merged by the same
candidates.TopCandidates as BM25's shards). `join_candidates` then appends to each query's
first-stage candidates the dense ones it lacks.

Fusion runs over that union. A candidate the first stage did not return gets the first stage's
minimum for that query (the issue's rule), taken one float32 step below it (`below`): min-max
fusion sees the same 0 either way, and trec_eval, which orders by score, puts every added
candidate after all of the first stage's, so the first stage's own ranking is what it was
(measures over the whole list, MAP or recall@1000, also count the added tail). The reranker's
side needs no such rule: it scores every candidate of the union.

With a `corpus_vectors` input (the CorpusEncoder's artifact, rankcore/corpus_vectors.py: every
document embedded once by the encoder `corpus_encoder_spec` names), a document's vector is the
stored one instead of embedded again: `DenseScorer.score` takes each document's stored (ids,
vector), and uses the vector only when the ids are the ones `encoder_ids` computes for the text
here, so a document the artifact lacks or holds with other ids (another text under the same
docid, another tokenization) is embedded as without the artifact, never scored from a wrong
vector. Queries are always embedded: few and short.

Exact inner-product search (a matrix product per shard) instead of an ANN index (ScaNN,
FAISS): on the CPU workers this runs on, embedding the corpus costs far more than the exact
search (MiniLM-L6 on 2 cores: Cranfield's 1,400 abstracts at 254 tokens in about 45 s, the MS
MARCO subset's 5,000 passages at 128 in about 68 s), so an index would save nothing.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np
import tensorflow as tf

from components.ranking_datagen import tokenization
from components.ranking_datagen.candidates import ShardTop
from rankcore import corpus_vectors
from rankcore.corpus_vectors import EncoderSpec
from rankcore.encoders import hf_checkpoint
from rankcore.encoders.sentence import SentenceEncoder

# The first stage's score of a query with no first-stage candidate at all (BM25 matched no term).
NO_FIRST_STAGE_SCORE = 0.0


def encoder_wordpiece(encoder: SentenceEncoder, checkpoint_dir: str) -> np.ndarray:
    """The FastWordpiece model of a sentence encoder's WordPiece vocabulary (vocab.txt, or its
    BERT part for MPNet after <s>, <pad>, </s>, <unk>), checked so that an error names the line
    of the checkpoint's vocab.txt. With `encoder_ids`, the one tokenization of texts for an
    encoder checkpoint: dense retrieval and the CorpusEncoder must agree on it, or every stored
    vector is a miss."""
    return tokenization.wordpiece_model_of(
        tokenization.check_vocab(
            encoder.vocab,
            os.path.join(checkpoint_dir, hf_checkpoint.VOCAB_FILE),
            first_line=1 + encoder.vocab_offset,
        )
    )


def encoder_ids(
    texts: Sequence[str], model: np.ndarray, lowercase: bool, max_length: int
) -> list[list[int]]:
    """Texts -> the encoder's WordPiece ids (`model` from encoder_wordpiece), cut to
    `max_length`: tokenization.tokenize, the examples' "text -> token ids", so a dense score is
    the zero-shot dual encoder's score of the same (query, document) example. An empty text
    gives [] (embedded as `[CLS] [SEP]`; the examples hold [UNK] there)."""
    if not texts:
        return []
    ids = tokenization.tokenize(tf.constant(list(texts)), model, lowercase)
    return [row[:max_length] for row in ids.to_list()]


def corpus_encoder_spec(checkpoint_dir: str, max_doc_length: int) -> EncoderSpec:
    """The encoder whose corpus vectors dense retrieval reads: `datagen.hybrid.checkpoint_dir`
    at the examples' document cut `datagen.max_doc_length`, float32 (the CorpusEncoder's
    entry for hybrid retrieval must be this spec, or its key differs)."""
    return EncoderSpec(checkpoint_dir, max_doc_length, corpus_vectors.FLOAT32)


def stored_vectors_pattern(uri: str, checkpoint_dir: str, max_doc_length: int) -> str:
    """The shards (a glob) of the hybrid encoder's vectors in the corpus-vectors artifact at
    `uri`. Raises when the artifact holds no vectors of that encoder: the pipeline wires the
    artifact of a CorpusEncoder that was given another checkpoint or cut."""
    spec = corpus_encoder_spec(checkpoint_dir, max_doc_length)
    key = spec.key()
    known = corpus_vectors.read_meta(uri).by_key()
    if key not in known:
        have = ", ".join(
            f"{k} ({e.checkpoint_dir}, max_length {e.max_length}, {e.precision})"
            for k, e in sorted(known.items())
        )
        raise ValueError(
            f"{os.path.join(uri, corpus_vectors.META_FILE)}: no vectors of the hybrid encoder "
            f"{key} (datagen.hybrid.checkpoint_dir {checkpoint_dir}, datagen.max_doc_length "
            f"{max_doc_length}, {spec.precision}); it has {have or 'none'}. The CorpusEncoder "
            "wired to RankingDataGen must encode that spec (dense.corpus_encoder_spec)"
        )
    return corpus_vectors.shard_pattern(uri, key)


class Stored(NamedTuple):
    """A document's entry in the corpus vectors: the cut ids it was encoded from, its vector."""

    ids: tuple[int, ...]
    vector: np.ndarray


class DocumentVectors(NamedTuple):
    vectors: np.ndarray  # [documents, dim] float32
    stored: int  # how many came from the corpus vectors (the rest were embedded)


def _no_rows() -> ShardTop:
    return ShardTop(np.zeros(0, np.int32), np.zeros(0, np.float32), np.zeros(0, "U1"))


class DenseScorer:
    """The checkpoint's encoder with every query embedded once; `score` gives a shard's dense top
    `depth` per query as ShardTop rows (query index into the sorted qids), from the documents'
    stored vectors where given (`document_vectors`)."""

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
        self._model = encoder_wordpiece(self._encoder, checkpoint_dir)
        self._lowercase = lowercase
        self._max_doc_length = max_doc_length
        self._batch_size = batch_size
        self.qids = sorted(queries)
        # Cut as the examples cut them, so a dense score is the zero-shot dual encoder's score
        # of the same (query, document) example.
        self._queries = self._embed([queries[q] for q in self.qids], max_query_length)

    def _embed(self, texts: Sequence[str], max_length: int) -> np.ndarray:
        ids = encoder_ids(texts, self._model, self._lowercase, max_length)
        return self._encoder.embed(ids, batch_size=self._batch_size)

    def document_vectors(
        self, texts: Sequence[str], stored: Sequence[Stored | None] | None = None
    ) -> DocumentVectors:
        """The documents' vectors: per document its `stored` vector where the stored ids are
        the ids encoder_ids gives its text (a miss otherwise, or with no entry), the misses
        embedded in one batch run."""
        if stored is None:
            return DocumentVectors(self._embed(texts, self._max_doc_length), 0)
        ids = encoder_ids(texts, self._model, self._lowercase, self._max_doc_length)
        found = {
            row: entry.vector
            for row, (entry, cut) in enumerate(zip(stored, ids))
            if entry is not None and tuple(entry.ids) == tuple(cut)
        }
        misses = [row for row in range(len(ids)) if row not in found]
        vectors = np.zeros([len(ids), self._queries.shape[1]], np.float32)
        if found:
            vectors[list(found)] = np.stack(list(found.values()))
        if misses:
            embedded = self._encoder.embed([ids[r] for r in misses], batch_size=self._batch_size)
            vectors[misses] = embedded
        return DocumentVectors(vectors, len(found))

    def score(
        self,
        docids: Sequence[str],
        texts: Sequence[str],
        depth: int,
        stored: Sequence[Stored | None] | None = None,
    ) -> ShardTop:
        """One shard of documents -> per query its `depth` best documents of the shard. With
        `stored` (per document its corpus-vectors entry or None), the vectors come from there
        where they may (`document_vectors`)."""
        if not docids or not self.qids:
            return _no_rows()
        return self.top(docids, self.document_vectors(texts, stored).vectors, depth)

    def top(self, docids: Sequence[str], vectors: np.ndarray, depth: int) -> ShardTop:
        """A shard's documents and their vectors -> per query its `depth` best of them."""
        if not len(docids) or not self.qids:
            return _no_rows()
        scores = self._queries @ vectors.T  # [queries, docs]
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
