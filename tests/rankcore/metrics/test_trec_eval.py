"""rankcore.metrics: readers, ranking, measures and aggregation against trec_eval v10.

Expected values come from trec_eval v10's reference outputs in shared/data/trec_eval
(out.test, out.test.a) or from the straightforward re-implementations below.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import pytrec_eval

from rankcore.metrics import (
    MIN_GEO_MEAN,
    MalformedLineError,
    aggregate,
    compute_metrics,
    mean_metrics,
    normalize_measures,
    rank_documents,
    read_qrels,
    read_run,
    read_run_with_runid,
    read_runid,
    relstrings,
    resolve_measures,
    truncate_run,
)
from rankcore.metrics.own import _lround

# --------------------------------------------------------------------------- helpers


@pytest.fixture(scope="module")
def ref(shared_data: Path) -> Path:
    return shared_data / "trec_eval"


@pytest.fixture(scope="module")
def test_data(ref: Path) -> tuple[dict, dict]:
    return read_qrels(ref / "qrels.test"), read_run(ref / "results.test")


def reference_all_values(path: Path) -> dict[str, str]:
    """measure -> printed value of the 'all' lines of a trec_eval output file."""
    out = {}
    for line in path.read_text().splitlines():
        name, qid, value = line.split("\t")
        assert qid == "all"
        out[name.strip()] = value
    return out


def printed(name: str, value: float | str) -> str:
    if isinstance(value, str):
        return value
    if name.startswith("num_"):
        return str(int(value))
    return f"{value:6.4f}"


def hand_ranking(docs: dict[str, float]) -> list[str]:
    # Independent of rank_documents: stable sorts, docno descending then score descending.
    by_docno = sorted(docs, reverse=True)
    return sorted(by_docno, key=lambda d: -docs[d])


def hand_measures(judged: dict[str, int], docs: dict[str, float], level: int = 1) -> dict:
    """Textbook definitions of a few measures on trec_eval's ranking."""
    ranked = hand_ranking(docs)
    rel = [judged.get(d, -1) >= level for d in ranked]
    num_rel = sum(1 for g in judged.values() if g >= level)
    hits, ap = 0, 0.0
    for i, r in enumerate(rel, start=1):
        if r:
            hits += 1
            ap += hits / i
    first = next((i for i, r in enumerate(rel, start=1) if r), None)
    gains = [max(judged.get(d, 0), 0) for d in ranked]
    ideal = sorted((g for g in judged.values() if g > 0), reverse=True)

    def ndcg(k: int) -> float:
        dcg = sum(g / math.log2(i + 2) for i, g in enumerate(gains[:k]))
        idcg = sum(g / math.log2(i + 2) for i, g in enumerate(ideal[:k]))
        return dcg / idcg if idcg else 0.0

    out = {
        "num_ret": len(ranked),
        "num_rel": num_rel,
        "num_rel_ret": sum(rel),
        "map": ap / num_rel if num_rel else 0.0,
        "recip_rank": 1 / first if first else 0.0,
        "Rprec": sum(rel[:num_rel]) / num_rel if num_rel else 0.0,
        "ndcg_cut_10": ndcg(10),
        "ndcg_cut_15": ndcg(15),
        "ndcg": ndcg(len(ranked)),
    }
    for k in (5, 7, 10, 20, 100):
        out[f"P_{k}"] = sum(rel[:k]) / k
        out[f"recall_{k}"] = sum(rel[:k]) / num_rel if num_rel else 0.0
    for k in (5, 10):
        out[f"mrr_cut_{k}"] = 1 / first if first and first <= k else 0.0
    # Interpolated precision, v10 style: need round-half-up(r * R) relevant docs.
    prec = [sum(rel[: i + 1]) / (i + 1) for i in range(len(rel))]
    count = [sum(rel[: i + 1]) for i in range(len(rel))]
    for pct in (0.0, 0.1, 0.3, 0.6, 0.9, 1.0):
        need = math.floor(pct * num_rel + 0.5)
        ok = [p for p, c in zip(prec, count, strict=True) if c >= need]
        out[f"iprec_at_recall_{pct:3.2f}"] = max(ok) if need <= sum(rel) and ok else 0.0
    return out


def write(tmp_path: Path, name: str, text: str | bytes) -> Path:
    path = tmp_path / name
    path.write_bytes(text.encode() if isinstance(text, str) else text)
    return path


# --------------------------------------------------------------------------- readers


def test_read_qrels_reference(ref: Path) -> None:
    qrels = read_qrels(ref / "qrels.test")
    assert sorted(qrels) == ["301", "302", "303"]
    assert sum(map(len, qrels.values())) == 3681  # every line of the file
    assert sum(1 for j in qrels.values() for r in j.values() if r >= 1) == 561  # num_rel, out.test
    assert qrels["301"]["CR93E-1282"] == 1
    assert qrels["301"]["CR93E-10279"] == 0


def test_read_qrels_with_comments(ref: Path) -> None:
    with_comments = read_qrels(ref / "qrels.test.with-comments")
    plain = read_qrels(ref / "qrels.test")
    # Only '#' at the start of a line starts a comment: "CR#93E-1860" is a docno there.
    assert with_comments["301"].pop("CR#93E-1860") == plain["301"].pop("CR93E-1860") == 0
    assert with_comments == plain


def test_read_run_reference(ref: Path) -> None:
    run, runid = read_run_with_runid(ref / "results.test")
    assert runid == "STANDARD" == read_runid(ref / "results.test")
    assert {q: len(d) for q, d in run.items()} == {"301": 500, "302": 500, "303": 500}
    assert run["301"]["FR940202-2-00150"] == 2.129133


def test_read_run_ignores_trailing_columns(ref: Path) -> None:
    run, runid = read_run_with_runid(ref / "results.trunc")
    assert runid == "STANDARD"
    assert sorted(run) == ["301", "303"]
    assert sum(map(len, run.values())) == 584  # all lines, incl. those with trailing text
    assert run["301"]["FBIS3-27619"] == 2.138276  # "STANDARD more junk at"


def test_run_comments_blank_lines_and_last_runid(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "r",
        "# header\n1 Q0 a 1 2.0 first\n\n   # indented comment\n1 Q0 b 2 1.0 last\n",
    )
    assert read_run(path) == {"1": {"a": 2.0, "b": 1.0}}
    assert read_runid(path) == "last"  # trec_eval keeps the runid of the last line


@pytest.mark.parametrize(
    ("text", "line", "problem"),
    [
        ("1 0 a 1\n1 0 b\n", 2, "expected 4 fields 'qid iter docno rel', got 3"),
        ("1 0 a 1\n1 0 b 1 extra\n", 2, "expected 4 fields 'qid iter docno rel', got 5"),
        ("# c\n1 0 a 1\n1 0 b yes\n", 3, "relevance 'yes' is not an integer"),
        ("1 0 a 1\n1 0 b 0.5\n", 2, "relevance '0.5' is not an integer"),
        ("1 0 a 1\n2 0 a 1\n1 0 a 0\n", 3,
         "duplicate judgment of 'a' for query '1' (first at line 1)"),
    ],
)  # fmt: skip
def test_malformed_qrels(tmp_path: Path, text: str, line: int, problem: str) -> None:
    path = write(tmp_path, "qrels", text)
    with pytest.raises(MalformedLineError) as info:
        read_qrels(path)
    assert str(info.value) == f"{path}:{line}: {problem}"
    assert (info.value.path, info.value.line_no, info.value.problem) == (str(path), line, problem)
    assert isinstance(info.value, ValueError)


@pytest.mark.parametrize(
    ("text", "line", "problem"),
    [
        ("1 Q0 a 1 1.0 r\n1 Q0 b 2 0.5\n", 2,
         "expected 6 fields 'qid iter docno rank score runid', got 5"),
        ("\n# c\n1 Q0 a 1 high r\n", 3, "score 'high' is not a number"),
        ("1 Q0 a 1 nan r\n", 1, "score is NaN"),
        ("1 Q0 a 1 1.0 r\n1 Q0 a 2 0.5 r\n", 2,
         "document 'a' retrieved twice for query '1' (first at line 1)"),
        (b"1 Q0 a 1 1.0 r\n1 Q0 \xff 2 0.5 r\n", 2, "not valid UTF-8 (invalid start byte)"),
    ],
)  # fmt: skip
def test_malformed_run(tmp_path: Path, text: str | bytes, line: int, problem: str) -> None:
    path = write(tmp_path, "run", text)
    with pytest.raises(MalformedLineError) as info:
        read_run(path)
    assert str(info.value) == f"{path}:{line}: {problem}"


# --------------------------------------------------------------------------- ranking


def test_rank_documents_breaks_ties_by_docno_descending() -> None:
    docs = {"d1": 1.0, "d3": 1.0, "d2": 1.0, "x": 5.0, "a": -1.0, "d10": 1.0}
    assert rank_documents(docs) == ["x", "d3", "d2", "d10", "d1", "a"]


def test_rank_column_is_ignored(ref: Path) -> None:
    run = read_run(ref / "results.test")
    ranked = rank_documents(run["301"])
    assert ranked == hand_ranking(run["301"])
    assert run["301"][ranked[0]] == max(run["301"].values())


def test_truncate_run_keeps_trec_eval_top() -> None:
    run = {"q": {"a": 1.0, "b": 1.0, "c": 2.0, "d": 0.5}, "r": {"x": 1.0}}
    assert truncate_run(run, 2) == {"q": {"c": 2.0, "b": 1.0}, "r": {"x": 1.0}}
    with pytest.raises(ValueError):
        truncate_run(run, 0)


# --------------------------------------------------------------------------- measure names


def test_resolve_measures_order_and_names() -> None:
    names = [m.name for m in resolve_measures(["ndcg_cut.5,10", "mrr_cut_10", "P_20", "map"])]
    assert names == ["map", "mrr_cut_10", "P_20", "ndcg_cut_5", "ndcg_cut_10"]
    official = [m.name for m in resolve_measures(["official"])]
    assert official[:5] == ["runid", "num_q", "num_ret", "num_rel", "num_rel_ret"]
    assert official[10:12] == ["iprec_at_recall_0.00", "iprec_at_recall_0.10"]
    assert official[-1] == "P_1000"
    info = {m.name: m for m in resolve_measures(["all_trec"])}
    assert info["num_ret"].integer and not info["map"].integer
    assert not info["gm_map"].per_query and info["gm_map"].summary
    assert info["relstring"].per_query and not info["relstring"].summary


def test_cutoffs_configurable_and_merged() -> None:
    assert normalize_measures(["P_7", "P.5,10", "ndcg_cut_15"]) == ["P.5,7,10", "ndcg_cut.15"]
    # trec_eval -m semantics: the first parameters given for a family win.
    assert normalize_measures(["P.5", "P.10"], first_params_win=True) == ["P.5"]
    # A bare family asks for trec_eval's default cut-offs as well.
    names = [m.name for m in resolve_measures(["P", "P_7"])]
    assert names == [f"P_{k}" for k in (5, 7, 10, 15, 20, 30, 100, 200, 500, 1000)]


@pytest.mark.parametrize(
    "bad", ["nosuch", "P_x", "P.0", "P.5,5", "ndcg.x", "utility.1,2", "map_5", "map."]
)
def test_bad_measures(bad: str) -> None:
    with pytest.raises(ValueError):
        resolve_measures([bad])


def test_lround_is_half_away_from_zero() -> None:
    assert [_lround(x) for x in (0.5, 1.5, 2.5, 2.4999, 0.49999999999999994)] == [1, 2, 3, 2, 0]


# --------------------------------------------------------------------------- measures


def test_all_trec_reproduces_trec_eval_v10(ref: Path, test_data: tuple) -> None:
    qrels, run = test_data
    per_query = compute_metrics(qrels, run, ["all_trec"])
    summary = aggregate(per_query, runid=read_runid(ref / "results.test"))
    expected = reference_all_values(ref / "out.test.a")
    assert {name: printed(name, summary[name]) for name in expected} == expected


def test_pytrec_eval_alone_differs_from_v10_exactly_here(ref: Path, test_data: tuple) -> None:
    """Why iprec_at_recall/11pt_avg are computed here: pytrec_eval-terrier 0.5.11 bundles
    a trec_eval that turns recall fractions into doc counts as (long)(x + 0.9), not v10's
    lround(x). On the reference data this changes exactly these 'all' values."""
    qrels, run = test_data
    per_query = pytrec_eval.RelevanceEvaluator(qrels, {"all_trec"}).evaluate(run)
    expected = reference_all_values(ref / "out.test.a")
    differing = {}
    for name, value in expected.items():
        if name in per_query["301"] and name not in ("runid", "relstring"):
            got = pytrec_eval.compute_aggregated_measure(
                name, [per_query[q][name] for q in per_query]
            )
            if printed(name, got) != value:
                differing[name] = (value, printed(name, got))
    assert differing == {
        "iprec_at_recall_0.10": ("0.3885", "0.3884"),
        "iprec_at_recall_0.60": ("0.0858", "0.0822"),
        "11pt_avg": ("0.1962", "0.1958"),
    }
    for want, got in differing.values():
        assert abs(float(want) - float(got)) < 0.005
    # rbp, rbp_resid and unj_* are v10 measures pytrec_eval lacks altogether.
    assert {"rbp", "rbp_resid", "unj_5"} & set(per_query["301"]) == set()


@pytest.mark.parametrize("level", [1, 2])
def test_per_query_matches_hand_computation(ref: Path, level: int) -> None:
    qrels_file = "qrels.test" if level == 1 else "qrels.rel_level"
    qrels = read_qrels(ref / qrels_file)
    run = read_run(ref / "results.test")
    measures = [
        "num_ret", "num_rel", "num_rel_ret", "map", "recip_rank", "Rprec", "ndcg",
        "P.5,7,10,20,100", "recall.5,10,20,100", "ndcg_cut.10,15", "mrr_cut.5,10",
        "iprec_at_recall.0,0.1,0.3,0.6,0.9,1",
    ]  # fmt: skip
    per_query = compute_metrics(qrels, run, measures, relevance_level=level)
    assert list(per_query) == ["301", "302", "303"]
    for qid, row in per_query.items():
        hand = hand_measures(qrels[qid], run[qid], level)
        assert row == pytest.approx({k: hand[k] for k in row}, abs=1e-12), qid


def test_relevance_level_two(ref: Path) -> None:
    qrels = read_qrels(ref / "qrels.rel_level")
    run = read_run(ref / "results.test")
    at1 = aggregate(compute_metrics(qrels, run, ["num_rel", "map", "P_10"], relevance_level=1))
    at2 = aggregate(compute_metrics(qrels, run, ["num_rel", "map", "P_10"], relevance_level=2))
    grades = [g for j in qrels.values() for g in j.values()]
    assert at1["num_rel"] == sum(1 for g in grades if g >= 1)
    assert at2["num_rel"] == sum(1 for g in grades if g >= 2) < at1["num_rel"]
    assert at2["map"] != at1["map"]


def test_mrr_cut_hand_computed_with_ties() -> None:
    qrels = {"a": {"d00": 1}, "b": {"d99": 1}, "c": {"z": 1}, "d": {"n1": 0}, "e": {"y": 2}}
    tied = {f"d{i:02d}": 1.0 for i in (0, 11, 22, 33, 44, 55, 66, 77, 88, 99)}
    run = {
        # 10 docs tied: docno descending puts the relevant d00 last, at rank 10.
        "a": {**tied, "top": 2.0},  # ... and one higher-scored doc pushes it to rank 11
        "b": dict(tied),  # d99 is first among the ties: rank 1
        "c": {"z": 0.5, **{f"n{i}": 1.0 for i in range(9)}},  # rank 10 exactly
        "d": {"n1": 1.0},  # no relevant doc at all
        "e": {"y": 1.0, "x": 1.0, "w": 3.0, "v": 2.0},  # rank 3 (y before x in the tie)
    }
    per_query = compute_metrics(qrels, run, ["mrr_cut_10", "mrr_cut.1,3", "recip_rank"])
    got = {
        q: (r["mrr_cut_1"], r["mrr_cut_3"], r["mrr_cut_10"], r["recip_rank"])
        for q, r in per_query.items()
    }
    assert got == {
        "a": (0.0, 0.0, 0.0, 1 / 11),
        "b": (1.0, 1.0, 1.0, 1.0),
        "c": (0.0, 0.0, 1 / 10, 1 / 10),
        "d": (0.0, 0.0, 0.0, 0.0),
        "e": (0.0, 1 / 3, 1 / 3, 1 / 3),
    }
    assert aggregate(per_query)["mrr_cut_10"] == pytest.approx((0 + 1 + 0.1 + 0 + 1 / 3) / 5)
    # -J drops the unjudged docs before ranking: y moves to rank 1.
    judged_only = compute_metrics(qrels, run, ["mrr_cut_1"], judged_docs_only=True)
    assert judged_only["e"]["mrr_cut_1"] == 1.0


def test_mrr_cut_agrees_with_own_ranking(test_data: tuple) -> None:
    qrels, run = test_data
    per_query = compute_metrics(qrels, run, ["mrr_cut.1,5,10,50"])
    for qid, row in per_query.items():
        ranked = rank_documents(run[qid])
        first = next(i for i, d in enumerate(ranked, 1) if qrels[qid].get(d, 0) >= 1)
        for k in (1, 5, 10, 50):
            assert row[f"mrr_cut_{k}"] == (1 / first if first <= k else 0.0)


def test_rbp_unj_relstring_hand_computed() -> None:
    qrels = {"q": {"a": 1, "b": 0, "c": 1, "u": -1}}
    run = {"q": {"a": 5.0, "x": 4.0, "c": 3.0, "u": 2.0, "b": 1.0}}  # a x c u b
    row = compute_metrics(qrels, run, ["rbp", "rbp_resid", "unj.1,2,5,10"])["q"]
    # unjudged: x (not in qrels) at rank 2, u (judged -1) at rank 4
    assert row["rbp"] == pytest.approx(0.1 * (1 + 0.9**2))
    assert row["rbp_resid"] == pytest.approx(0.9**5 + 0.1 * (0.9 + 0.9**3))
    assert row["unj_1"] == 0.0 and row["unj_2"] == 0.5
    assert row["unj_5"] == 0.4 and row["unj_10"] == 0.2  # past the end: divide by 10
    assert relstrings(qrels, run, 4) == {"q": "1-1."}
    assert compute_metrics(qrels, run, ["rbp.p=0.5"])["q"]["rbp_p=0.5"] == pytest.approx(
        0.5 * (1 + 0.25)
    )


def test_gm_map_floor_and_geometric_mean() -> None:
    qrels = {"a": {"r": 1}, "b": {"r": 1}}
    run = {"a": {"r": 1.0}, "b": {"x": 1.0}}  # AP 1 and AP 0
    per_query = compute_metrics(qrels, run, ["map", "gm_map"])
    # Per query, gm_map holds the log trec_eval accumulates: log(max(AP, 1e-5)).
    assert per_query["a"]["gm_map"] == 0.0
    assert per_query["b"]["gm_map"] == math.log(MIN_GEO_MEAN)
    summary = aggregate(per_query)
    assert summary["map"] == 0.5
    assert summary["gm_map"] == pytest.approx(math.sqrt(MIN_GEO_MEAN))


def test_complete_flag_with_truncated_run(ref: Path) -> None:
    qrels = read_qrels(ref / "qrels.test")
    run = read_run(ref / "results.trunc")  # topic 302 missing
    measures = ["num_q", "num_ret", "num_rel", "map", "gm_map", "P_10", "unj_5"]
    plain = compute_metrics(qrels, run, measures)
    assert list(plain) == ["301", "303"]
    full = compute_metrics(qrels, run, measures, complete=True)
    assert list(full) == ["301", "302", "303"]
    num_rel_302 = sum(1 for r in qrels["302"].values() if r >= 1)
    assert full["302"] == {
        "num_q": 1.0, "num_ret": 0.0, "num_rel": num_rel_302, "map": 0.0,
        "gm_map": math.log(MIN_GEO_MEAN), "P_10": 0.0, "unj_5": 0.0,
    }  # fmt: skip
    summary = aggregate(full, qrels=qrels, complete=True)
    assert summary["num_q"] == 3
    assert summary["num_ret"] == 584
    assert summary["num_rel"] == 561
    assert summary["map"] == pytest.approx((plain["301"]["map"] + plain["303"]["map"]) / 3)
    ap301, ap303 = plain["301"]["map"], plain["303"]["map"]
    expected_gm = (ap301 * ap303 * MIN_GEO_MEAN) ** (1 / 3)
    assert summary["gm_map"] == pytest.approx(expected_gm)
    # aggregate fills missing queries itself when given per-query rows without them.
    assert aggregate(plain, qrels=qrels, complete=True) == summary
    assert aggregate(plain)["num_q"] == 2


def test_max_docs_per_query_equals_truncated_run(test_data: tuple) -> None:
    qrels, run = test_data
    measures = ["all_trec"]
    by_flag = compute_metrics(qrels, run, measures, max_docs_per_query=100)
    by_hand = {q: {d: run[q][d] for d in hand_ranking(run[q])[:100]} for q in run}
    assert by_flag == compute_metrics(qrels, by_hand, measures)
    assert aggregate(by_flag)["num_ret"] == 300


def test_judged_docs_only_equals_dropping_unjudged(test_data: tuple) -> None:
    qrels, run = test_data
    measures = ["all_trec"]
    by_flag = compute_metrics(qrels, run, measures, judged_docs_only=True)
    judged = {
        q: {d: s for d, s in docs.items() if qrels[q].get(d, -1) >= 0} for q, docs in run.items()
    }
    assert by_flag == compute_metrics(qrels, judged, measures)
    assert by_flag["301"]["num_ret"] == len(judged["301"]) < len(run["301"])
    assert by_flag["301"]["unj_10"] == 0.0


def test_queries_outside_qrels_are_ignored() -> None:
    qrels = {"1": {"a": 1}}
    run = {"1": {"a": 1.0}, "2": {"a": 1.0}}
    assert compute_metrics(qrels, run, ["map"]) == {"1": {"map": 1.0}}


def test_mean_metrics(test_data: tuple) -> None:
    qrels, run = test_data
    per_query = compute_metrics(qrels, run, ["map", "P.5,10"])
    means = mean_metrics(per_query, ["map", "P.5,10"])
    assert list(means) == ["map", "P_5", "P_10"]
    assert f"{means['map']:.4f}" == "0.1785" and f"{means['P_10']:.4f}" == "0.3000"
    with pytest.raises(ValueError):
        aggregate({})
