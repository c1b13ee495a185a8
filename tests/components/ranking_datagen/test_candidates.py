"""Unit tests of components.ranking_datagen.candidates (no Beam): trec_eval ranking, bm25s, and
the sharded BM25 against bm25s over one index on Cranfield and the MS MARCO DL19 subset (the
references: bm25_reference.py), with and without a stemmer (datagen.bm25.stemmer)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from bm25_reference import bm25_run, sharded_bm25_run
from datagen_testlib import load_collection

from components.ranking_datagen.candidates import (
    STEMMERS,
    ShardTop,
    TopCandidates,
    query_tokens,
    rank_run,
)
from components.ranking_datagen.config import DatagenConfig
from components.ranking_datagen.readers import TrecRun
from rankcore import config_loader


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


# ------------------------------------------------------------------------------------------
# Sharded BM25 (global statistics) against bm25s over one index: the reference
# ------------------------------------------------------------------------------------------

DEPTH = 100


@pytest.fixture(scope="module", params=["cranfield", "msmarco-dl19-subset"])
def collection(request: pytest.FixtureRequest, shared_data: Path):
    return load_collection(shared_data, request.param)


def test_sharded_bm25_equals_bm25s_over_one_index(collection) -> None:
    docs, queries = collection
    reference = bm25_run(docs, queries, DEPTH, 0.9, 0.4)
    sharded = sharded_bm25_run(docs, queries, DEPTH, 0.9, 0.4, shard_size=300)
    assert sorted(sharded) == sorted(reference) == sorted(queries)
    # Every score of a document both return is the same float (bm25s's float32 arithmetic).
    common = [(q, d) for q in queries for d in reference[q].keys() & sharded[q].keys()]
    assert len(common) > 0.9 * sum(len(v) for v in reference.values())
    assert max(abs(reference[q][d] - sharded[q][d]) for q, d in common) == 0.0
    # The top-100 sets differ only where bm25s cut among documents tied at the 100th score
    # (it keeps an arbitrary subset of them; the sharded run keeps them by docid descending,
    # trec_eval's order): resolved ties, they are the same ranked lists, scores included.
    for q in queries:
        if reference[q].keys() != sharded[q].keys():
            cut = min(sharded[q].values())
            assert len(sharded[q]) == len(reference[q]) == DEPTH
            assert {
                reference[q].get(d, sharded[q].get(d))
                for d in reference[q].keys() ^ sharded[q].keys()
            } == {cut}
    everything = bm25_run(docs, queries, len(docs), 0.9, 0.4)  # no cut: no tie to break
    assert rank_run(sharded, DEPTH) == rank_run(everything, DEPTH)


def test_shard_size_does_not_change_the_run(collection) -> None:
    docs, queries = collection
    if len(docs) > 2000:  # size-1 shards on 5,000 passages: slow and no more telling
        docs = docs[:2000]
    runs = [
        sharded_bm25_run(docs, queries, DEPTH, 0.9, 0.4, shard_size)
        for shard_size in (1, 37, 1024, len(docs) + 1)
    ]
    assert all(run == runs[0] for run in runs[1:])
    assert rank_run(runs[0], DEPTH) == rank_run(bm25_run(docs, queries, len(docs), 0.9, 0.4), DEPTH)


def test_sharded_bm25_edge_cases() -> None:
    docs = [*DOCS, ("e", ""), ("f", "wing wing wing")]  # an empty document counts in N and l_avg
    queries = {
        "rep": "wing wing flutter",  # a repeated query token counts once per copy
        "unk": "zebra wing",  # a token no document has adds nothing
        "none": "zebra",
        "stop": "the of a",  # stopwords only: no token at all
    }
    reference = bm25_run(docs, queries, 10, 0.9, 0.4)
    for shard_size in (1, 2, 10):
        assert sharded_bm25_run(docs, queries, 10, 0.9, 0.4, shard_size) == {
            q: dict(sorted(v.items(), key=lambda kv: (kv[1], kv[0]), reverse=True))
            for q, v in reference.items()
        }
    assert reference["none"] == reference["stop"] == {}
    assert sharded_bm25_run([], queries, 10, 0.9, 0.4, 5) == {q: {} for q in queries}


# ------------------------------------------------------------------------------------------
# The stemmer (datagen.bm25.stemmer): PyStemmer inside bm25s's tokenizer
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("stemmer", ["porter", "english"])
def test_stemmed_sharded_bm25_equals_bm25s_with_the_same_stemmer(
    stemmer: str, shared_data: Path
) -> None:
    """On Cranfield: the pipeline's sharded BM25 with the stemmer against bm25s's own
    tokenize(stemmer=Stemmer.Stemmer(name)) + BM25(method="lucene").index + retrieve over one
    index (bm25_reference.bm25_run), every score to 1e-6 (in fact the same floats), and the
    same ranked lists with ties resolved."""
    docs, queries = load_collection(shared_data, "cranfield")
    sharded = sharded_bm25_run(docs, queries, DEPTH, 0.9, 0.4, 300, stemmer=stemmer)
    everything = bm25_run(docs, queries, len(docs), 0.9, 0.4, stemmer=stemmer)
    assert sorted(sharded) == sorted(everything) == sorted(queries)
    pairs = [(q, d) for q in queries for d in sharded[q]]
    assert all(d in everything[q] for q, d in pairs)
    assert max(abs(sharded[q][d] - everything[q][d]) for q, d in pairs) <= 1e-6
    assert rank_run(sharded, DEPTH) == rank_run(everything, DEPTH)
    # The stemmer changes the run: a test that passes without it proves nothing.
    plain = sharded_bm25_run(docs, queries, DEPTH, 0.9, 0.4, 300)
    changed = sum(plain[q] != sharded[q] for q in queries)
    assert changed > 0.5 * len(queries)


def test_the_stemmer_reaches_queries_and_every_shard() -> None:
    """A query "flows" finds a document that says only "flow" (and "Flutter" one that says
    "fluttering") with the stemmer on both sides, in whichever shard the document is; without
    the stemmer nothing matches. Dropping it from the queries or from index_shard fails here."""
    docs = [
        ("a", "laminar flow over a flat plate"),
        ("b", "panel fluttering at supersonic speed"),
        ("c", "noise of jet exhaust"),
    ]
    queries = {"q": "flows", "r": "Flutter"}
    assert query_tokens(queries, "porter") == {"q": ["flow"], "r": ["flutter"]}
    assert query_tokens(queries) == {"q": ["flows"], "r": ["flutter"]}
    reference = bm25_run(docs, queries, 10, 0.9, 0.4, stemmer="porter")
    assert set(reference["q"]) == {"a"} and set(reference["r"]) == {"b"}
    for shard_size in (1, 2, 10):
        assert sharded_bm25_run(docs, queries, 10, 0.9, 0.4, shard_size, "porter") == reference
        plain = sharded_bm25_run(docs, queries, 10, 0.9, 0.4, shard_size)
        assert plain == {"q": {}, "r": {}}


def test_a_text_is_stemmed_alike_in_any_company() -> None:
    """A text's tokens do not depend on the other texts tokenized with it (bm25s stems the
    vocabulary of the call): a document tokenizes the same in any shard."""
    from components.ranking_datagen.candidates import tokenize_for_bm25

    text = "Flows of heated gases; the generalization of flutter analyses"
    alone = tokenize_for_bm25([text], "porter")[0]
    assert alone == ["flow", "heat", "gase", "gener", "flutter", "analys"]
    for company in (["flow", "gas heat"], ["generalization generalizations", "analyses"]):
        assert tokenize_for_bm25([*company, text], "porter")[-1] == alone


def test_stemmer_config_rejects_an_unknown_name_with_a_suggestion() -> None:
    assert DatagenConfig().bm25.stemmer in STEMMERS
    with pytest.raises(config_loader.ConfigError) as error:
        config_loader.build(DatagenConfig, {"bm25": {"stemmer": "portr"}}, "my.yaml", "datagen.")
    message = str(error.value)
    assert "datagen.bm25.stemmer" in message and "did you mean porter" in message
    assert "my.yaml" in message


def _rows(rows: list[tuple[int, float, str]]) -> ShardTop:
    return ShardTop(
        np.array([q for q, _, _ in rows], np.int32),
        np.array([s for _, s, _ in rows], np.float32),
        np.array([d for _, _, d in rows]),
    )


def _merged(parts: list[ShardTop], depth: int) -> list[tuple[int, float, str]]:
    top = TopCandidates(depth)
    for part in parts:
        top.add(part)
    result = top.result()
    return list(zip(result.query.tolist(), result.score.tolist(), result.docid.tolist()))


def test_top_candidates_orders_like_rank_run_and_keeps_a_docid_once() -> None:
    a = _rows([(0, 3.0, "d1"), (0, 2.0, "d5"), (0, 2.0, "d2"), (1, 1.0, "x")])
    b = _rows([(0, 2.0, "d3"), (0, 2.5, "d1"), (0, 1.0, "d9")])
    merged = _merged([a, b], depth=4)
    assert merged == [(0, 3.0, "d1"), (0, 2.0, "d5"), (0, 2.0, "d3"), (0, 2.0, "d2"), (1, 1.0, "x")]
    assert _merged([b, a], depth=4) == merged
    # Associative: merging partial merges gives the same top.
    assert (
        _merged([TopCandidates(4).add(a).result(), TopCandidates(4).add(b).result()], 4) == merged
    )


def test_top_candidates_equals_sorting_everything() -> None:
    """Thousands of parts, so that rows are dropped below a query's depth-th score and the
    kept rows are pruned many times: the same top as sorting every row at once."""
    rng = np.random.default_rng(0)
    parts, everything = [], []
    for _ in range(2000):
        rows = [
            (int(q), float(np.float32(s)), f"d{d}")
            for q, s, d in zip(
                rng.integers(0, 30, 20), rng.integers(1, 40, 20) / 4, rng.integers(0, 500, 20)
            )
        ]
        parts.append(_rows(rows))
        everything += rows
    depth = 7
    best: dict[tuple[int, str], float] = {}
    for q, s, d in everything:
        best[(q, d)] = max(s, best.get((q, d), s))
    expected = []
    for q in sorted({q for q, _ in best}):
        ranked = sorted(((s, d) for (q_, d), s in best.items() if q_ == q), reverse=True)
        expected += [(q, s, d) for s, d in ranked[:depth]]
    assert _merged(parts, depth) == expected
    assert _merged(parts[::-1], depth) == expected
