"""Unit tests of components.ranking_datagen.candidates (no Beam)."""

from __future__ import annotations

from pathlib import Path

from components.ranking_datagen.candidates import bm25_run, rank_run
from components.ranking_datagen.readers import TrecRun


def test_rank_run_orders_like_trec_eval() -> None:
    run = {"q": {"d1": 2.0, "d3": 5.0, "d2": 5.0, "d10": 5.0, "d0": 1.0}}
    ranked = rank_run(run, depth=10)
    # Score descending, ties by docno descending (string order: "d3" > "d2" > "d10").
    assert ranked["q"] == [
        ("d3", 5.0, 1),
        ("d2", 5.0, 2),
        ("d10", 5.0, 3),
        ("d1", 2.0, 4),
        ("d0", 1.0, 5),
    ]
    assert rank_run(run, depth=2)["q"] == [("d3", 5.0, 1), ("d2", 5.0, 2)]


def test_rank_run_on_trec_eval_test_run(shared_data: Path) -> None:
    # results.test has its rank column out of order; trec_eval ignores it.
    entries = list(TrecRun().read(str(shared_data / "trec_eval" / "results.test")))
    run: dict[str, dict[str, float]] = {}
    for e in entries:
        run.setdefault(e.qid, {})[e.docid] = e.score
    ranked = rank_run(run, depth=1000)
    assert sorted(ranked) == ["301", "302", "303"]
    for rows in ranked.values():
        assert len(rows) == 500
        assert [r[2] for r in rows] == list(range(1, 501))
        for (d1, s1, _), (d2, s2, _) in zip(rows, rows[1:]):
            assert s1 > s2 or (s1 == s2 and d1 > d2)
    in_file_order = [e.docid for e in entries if e.qid == "301"]
    assert [r[0] for r in ranked["301"]] != in_file_order  # the file's own order differs


DOCS = [
    ("a", "the wing flutter of a swept wing"),
    ("b", "heat transfer through a laminar boundary layer"),
    ("c", "flutter of panels in supersonic flow"),
    ("d", "noise of jet exhaust"),
]


def test_bm25_run_scores_matching_documents_only() -> None:
    run = bm25_run(DOCS, {"q1": "wing flutter", "q2": "laminar heat", "q3": "zebra"}, 10, 0.9, 0.4)
    assert set(run) == {"q1", "q2", "q3"}
    ranked = rank_run(run, 10)
    assert [d for d, _, _ in ranked["q1"]] == ["a", "c"]  # "a" has both terms
    assert [d for d, _, _ in ranked["q2"]] == ["b"]
    assert run["q3"] == {}  # no term matches: zero-score padding is dropped
    assert all(s > 0 for docs in run.values() for s in docs.values())


def test_bm25_run_depth_and_determinism() -> None:
    queries = {"q": "wing flutter heat noise jet laminar"}
    full = bm25_run(DOCS, queries, 10, 0.9, 0.4)
    assert len(full["q"]) == 4
    top2 = bm25_run(DOCS, queries, 2, 0.9, 0.4)
    assert len(top2["q"]) == 2
    assert [d for d, _, _ in rank_run(full, 2)["q"]] == [d for d, _, _ in rank_run(top2, 2)["q"]]
    assert bm25_run(DOCS, queries, 10, 0.9, 0.4) == full
