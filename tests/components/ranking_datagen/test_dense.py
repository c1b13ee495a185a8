"""Hybrid candidates (components/ranking_datagen/dense.py): the dense top-k of a sentence
encoder over the whole corpus, joined to the first stage's candidates."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import numpy as np
import pytest
from datagen_testlib import Tiny, feature, run_executor, tiny_configs

from components.ranking_datagen import candidates, dense
from components.ranking_datagen.tokenization import RESERVED_TOKENS

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "trainer_module"))
import bert_testdata  # noqa: E402  (a tiny BERT checkpoint written from scratch)


@pytest.fixture(scope="module")
def mpnet_checkpoint(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, list[str], dict]:
    """A tiny random MPNet checkpoint (all-mpnet-base-v2's vocab.txt layout: <s> <pad> </s>
    <unk>, the WordPiece vocabulary, <mask>) with every word of the Tiny collection."""
    tiny = Tiny.make()
    texts = [*tiny.docs.values(), *tiny.queries.values()]
    words = sorted({w for t in texts for w in re.findall(r"\w+|[^\w\s]", t.lower())})
    directory = str(tmp_path_factory.mktemp("mpnet"))
    wordpieces = RESERVED_TOKENS + words
    tensors = bert_testdata.write_mpnet_checkpoint(directory, wordpieces)
    return directory, wordpieces, tensors


def test_an_mpnet_checkpoint_scores_as_transformers_would(mpnet_checkpoint) -> None:
    """Hybrid candidates from an MPNet encoder: texts are tokenized with the WordPiece part of
    its vocab.txt, and each dense score is the cosine of transformers' MPNet vectors (numpy)."""
    directory, wordpieces, tensors = mpnet_checkpoint
    tiny = Tiny.make()
    scorer = dense.DenseScorer(directory, True, tiny.queries, 8, 24, batch_size=4)
    top = _exact_top(scorer, tiny.docs, 3)

    def vector(text: str, cut: int) -> np.ndarray:
        ids = [wordpieces.index(w) + 4 for w in re.findall(r"\w+|[^\w\s]", text.lower())]
        config = bert_testdata.TINY_MPNET_CONFIG
        return bert_testdata.reference_mpnet_embedding(tensors, config, ids[:cut])

    for qid, rows in top.items():
        q = vector(tiny.queries[qid], 8)
        for score, docid in rows:
            assert score == pytest.approx(float(q @ vector(tiny.docs[docid], 24)), abs=2e-5)


def _exact_top(scorer: dense.DenseScorer, docs: dict[str, str], depth: int) -> dict:
    """Per query the `depth` best of ALL documents scored at once, in trec_eval order."""
    docids = sorted(docs)
    full = scorer.score(docids, [docs[d] for d in docids], len(docids))
    out: dict[str, list] = {}
    for q, s, d in zip(full.query.tolist(), full.score.tolist(), full.docid.tolist()):
        out.setdefault(scorer.qids[q], []).append((s, d))
    return {q: sorted(rows, reverse=True)[:depth] for q, rows in out.items()}


def test_shards_merged_equal_one_exact_search(checkpoint: str) -> None:
    tiny = Tiny.make()
    scorer = dense.DenseScorer(checkpoint, True, tiny.queries, 8, 24, batch_size=4)
    docids = sorted(tiny.docs)
    merged = candidates.TopCandidates(3)
    for start in range(0, len(docids), 5):  # shards of 5, 5, 5, 3 documents
        shard = docids[start : start + 5]
        merged.add(scorer.score(shard, [tiny.docs[d] for d in shard], 3))
    got = candidates.candidate_lists(merged.result(), scorer.qids)
    expected = _exact_top(scorer, tiny.docs, 3)
    assert got.keys() == expected.keys() == set(tiny.queries)
    for qid in got:
        assert [d for _, d in got[qid]] == [d for _, d in expected[qid]]
        np.testing.assert_allclose(
            [s for s, _ in got[qid]], [s for s, _ in expected[qid]], rtol=1e-6
        )
    # Cosine similarities of unit vectors, not all alike (a constant encoder would pass above).
    scores = [s for rows in got.values() for s, _ in rows]
    assert all(-1.0 <= s <= 1.0 + 1e-6 for s in scores) and np.std(scores) > 1e-3


def test_a_shard_keeps_every_document_tied_with_its_kth(checkpoint: str) -> None:
    """Ties at the cut are the merge's to break (docid descending, as trec_eval ranks), not
    the shard's: three copies of one text all leave a shard asked for its best one."""
    tiny = Tiny.make()
    scorer = dense.DenseScorer(checkpoint, True, {"q1": tiny.queries["q1"]}, 8, 24, 4)
    text = tiny.docs["d1"]
    top = scorer.score(["d1", "d2", "d3", "d4"], [text, text, tiny.docs["d9"], text], 1)
    assert sorted(top.docid.tolist()) == ["d1", "d2", "d4"]
    merged = candidates.TopCandidates(1)
    merged.add(top)
    assert [d for _, d in candidates.candidate_lists(merged.result(), ["q1"])["q1"]] == ["d4"]


def test_join_appends_the_missing_dense_candidates_below_the_first_stage() -> None:
    ranked = {
        "q1": [("d3", 7.5, 1), ("d1", 2.0, 2)],
        "q2": [],  # no first-stage candidate at all
        "q3": [("d9", 1.0, 1)],
    }
    lists = {"q1": [(0.9, "d1"), (0.8, "d7"), (0.7, "d5")], "q2": [(0.4, "d2")]}
    joined, added = dense.join_candidates(ranked, lists)
    below = dense.below(2.0)
    assert np.float32(below) < np.float32(2.0) and below < 2.0  # below in the examples too
    # The first stage's own candidates first and unchanged; then the added ones, tied just below
    # its minimum and ordered as trec_eval orders ties (docid descending).
    assert joined["q1"] == [("d3", 7.5, 1), ("d1", 2.0, 2), ("d7", below, 3), ("d5", below, 4)]
    assert joined["q2"] == [("d2", dense.NO_FIRST_STAGE_SCORE, 1)]
    assert joined["q3"] == ranked["q3"]
    assert added == 3
    assert (
        candidates.rank_run({q: {d: s for d, s, _ in docs} for q, docs in joined.items()}, 10)
        == joined
    )  # trec_eval's order is the ranks written


def test_candidate_recall_counts_judged_relevant_pairs() -> None:
    ranked = {"q1": [("d1", 3.0, 1), ("d2", 2.0, 2)], "q2": [("d4", 1.0, 1)]}
    qrels = {"q1": {"d1": 2, "d2": 0, "d3": 1}, "q2": {"d4": 1}}
    assert dense.candidate_recall(ranked, qrels) == {
        "relevant_judged": 3,
        "relevant_in_candidates": 2,
    }


def test_datagen_with_hybrid_candidates(tmp_path: Path, checkpoint: str) -> None:
    """The run and the examples hold BM25's top 3 as without hybrid, plus each query's dense
    top 3 that BM25 missed; the summary counts them."""
    tiny = Tiny.make()
    paths = tiny.write_tsv(tmp_path / "data")
    bm25_only = run_executor(tmp_path / "bm25", *tiny_configs(paths, candidates_depth=3))
    hybrid = {"checkpoint_dir": checkpoint, "depth": 3, "batch_size": 4}
    out = run_executor(tmp_path / "hybrid", *tiny_configs(paths, candidates_depth=3, hybrid=hybrid))
    scorer = dense.DenseScorer(checkpoint, True, tiny.queries, 8, 24, batch_size=4)
    dense_top = _exact_top(scorer, tiny.docs, 3)

    def by_query(lines: list[list[str]]) -> dict[str, list[tuple[str, float]]]:
        out: dict[str, list] = {}
        for qid, _, docid, rank, score, _ in lines:
            out.setdefault(qid, []).append((docid, float(score), int(rank)))
        return out

    first, union = by_query(bm25_only.run_lines()), by_query(out.run_lines())
    added = 0
    for qid in tiny.queries:
        n = len(first[qid])
        assert union[qid][:n] == first[qid]  # BM25's ranking unchanged
        extra = [d for d, _, _ in union[qid][n:]]
        missed = {d for _, d in dense_top[qid]} - {d for d, _, _ in first[qid]}
        assert set(extra) == missed and len(extra) == len(missed)
        low = min(s for _, s, _ in first[qid])
        assert all(s < low for _, s, _ in union[qid][n:])
        added += len(extra)
    assert added > 0  # the test collection exercises the union
    summary = out.summary["hybrid"]
    assert summary["candidates_added"] == added and summary["dense_depth"] == 3
    assert summary["relevant_in_union"] >= summary["relevant_in_first_stage"]
    # The eval splits rank the union: a dev query has an example for each of its candidates,
    # and an added one's float32 first-stage score stays below every first-stage candidate's.
    dev: dict[str, dict[str, float]] = {}
    for example in out.examples("dev"):
        (qid,), (docid,) = feature(example, "qid"), feature(example, "docids")
        dev.setdefault(qid, {})[docid] = feature(example, "first_stage_scores")[0]
    assert dev and all(docs.keys() == {d for d, _, _ in union[qid]} for qid, docs in dev.items())
    for qid, docs in dev.items():
        n = len(first[qid])
        kept = [docs[d] for d, _, _ in union[qid][:n]]
        assert all(docs[d] < min(kept) for d, _, _ in union[qid][n:])


def test_hybrid_gives_a_query_bm25_missed_its_dense_candidates(
    tmp_path: Path, checkpoint: str
) -> None:
    """A judged test query whose words no document has gets no BM25 candidate; with hybrid
    retrieval it gets its dense top k, so it is ranked like any other and none is recorded
    without candidates (planner.split_queries)."""
    from test_planner import NO_MATCH, split_queries, tiny_with_unmatched_query

    tiny = tiny_with_unmatched_query()
    paths = tiny.write_tsv(tmp_path / "data")
    hybrid = {"checkpoint_dir": checkpoint, "depth": 3, "batch_size": 4}
    out = run_executor(tmp_path / "hybrid", *tiny_configs(paths, candidates_depth=3, hybrid=hybrid))
    qid = NO_MATCH[0]
    ranked = [(docid, float(score)) for q, _, docid, _, score, _ in out.run_lines() if q == qid]
    assert len(ranked) == 3 and all(s == dense.NO_FIRST_STAGE_SCORE for _, s in ranked)
    assert {
        feature(e, "docids")[0] for e in out.examples("test") if feature(e, "qid") == [qid]
    } == {docid for docid, _ in ranked}
    assert all(not entry["without_candidates"] for entry in split_queries(out).values())
    assert out.summary["judged_queries_without_candidates_per_split"]["test"] == 0
