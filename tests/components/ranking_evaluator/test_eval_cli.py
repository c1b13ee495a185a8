"""`rankpipe eval` / `rankpipe compare` output against trec_eval v10's reference output, in every
judgment format the pipeline reads and with ir_measures' measure names."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from components.ranking_evaluator.eval_cli import compare_main, eval_main
from rankcore.metrics import QRELS_FORMATS, rank_documents, read_qrels, read_run

REPO_ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def ref(shared_data: Path) -> Path:
    return shared_data / "trec_eval"


def run_eval(capsys: pytest.CaptureFixture[str], *argv: object) -> tuple[int, str, str]:
    rc = eval_main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return rc, out, err


def lines_by_qid(output: str) -> dict[str, dict[str, str]]:
    table: dict[str, dict[str, str]] = {}
    for line in output.splitlines():
        name, qid, value = line.split("\t")
        table.setdefault(qid, {})[name.rstrip()] = value
    return table


def precision_at(judged: dict[str, int], docs: dict[str, float], k: int, level: int = 1) -> str:
    # trec_eval order via two stable sorts: docno descending, then score descending.
    top = sorted(sorted(docs, reverse=True), key=lambda d: -docs[d])[:k]
    return f"{sum(judged.get(d, 0) >= level for d in top) / k:6.4f}"


# --------------------------------------------------------------------------- eval


def test_default_measures_reproduce_out_test(ref: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = run_eval(capsys, ref / "qrels.test", ref / "results.test")
    assert (rc, err) == (0, "")
    assert out == (ref / "out.test").read_text()


def test_qrels_with_comments_reproduce_out_test(
    ref: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rc, out, _ = run_eval(capsys, ref / "qrels.test.with-comments", ref / "results.test")
    assert rc == 0 and out == (ref / "out.test").read_text()


def test_all_trec_reproduces_out_test_a(ref: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # Whole-output equality, including iprec_at_recall_0.10/0.60 and 11pt_avg, where
    # pytrec_eval's older trec_eval alone would print 0.3884/0.0822/0.1958 (see tests/rankcore/
    # metrics/test_trec_eval.py::test_pytrec_eval_alone_differs_from_v10_exactly_here).
    rc, out, _ = run_eval(capsys, "-m", "all_trec", ref / "qrels.test", ref / "results.test")
    assert rc == 0
    assert out == (ref / "out.test.a").read_text()


def test_per_query_output(ref: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = run_eval(capsys, "-q", "-m", "all_trec", ref / "qrels.test", ref / "results.test")
    assert rc == 0
    expected_all = (ref / "out.test.a").read_text()
    per_query_part, all_part = out[: -len(expected_all)], out[-len(expected_all) :]
    assert all_part == expected_all  # trec_eval prints the per-query blocks, then "all"
    lines = per_query_part.splitlines()
    qids = [line.split("\t")[1] for line in lines]
    assert qids == sorted(qids) and set(qids) == {"301", "302", "303"}
    names = [line.split("\t")[0].rstrip() for line in lines if line.split("\t")[1] == "301"]
    # Summary-only measures are not printed per query; relstring only is.
    assert "runid" not in names and "num_q" not in names and "gm_map" not in names
    assert names[:3] == ["num_ret", "num_rel", "num_rel_ret"]
    assert names.index("P_1000") + 1 == names.index("relstring")
    assert names[-3:] == ["unj_5", "unj_10", "unj_20"]
    table = lines_by_qid(out)
    qrels, run = read_qrels(ref / "qrels.test"), read_run(ref / "results.test")
    for qid in ("301", "302", "303"):
        judged, docs = qrels[qid], run[qid]
        assert table[qid]["num_ret"] == str(len(docs))
        assert table[qid]["num_rel"] == str(sum(r >= 1 for r in judged.values()))
        for k in (5, 10, 100):
            assert table[qid][f"P_{k}"] == precision_at(judged, docs, k)
        top10 = "".join(str(judged[d]) if d in judged else "-" for d in rank_documents(docs)[:10])
        assert table[qid]["relstring"] == f"'{top10}'"
    for name in ("map", "P_10", "ndcg", "rbp"):  # "all" is the mean of the printed queries
        mean = sum(float(table[q][name]) for q in ("301", "302", "303")) / 3
        assert abs(float(table["all"][name]) - mean) < 2e-4


def test_relevance_level(ref: Path, capsys: pytest.CaptureFixture[str]) -> None:
    qrels, run = read_qrels(ref / "qrels.rel_level"), read_run(ref / "results.test")
    files = [ref / "qrels.rel_level", ref / "results.test"]
    rc, out, _ = run_eval(capsys, "-q", "-l2", "-m", "P.5,10", "-m", "num_rel", *files)
    assert rc == 0
    table = lines_by_qid(out)
    for qid in ("301", "302", "303"):
        assert table[qid]["num_rel"] == str(sum(r >= 2 for r in qrels[qid].values()))
        assert table[qid]["P_10"] == precision_at(qrels[qid], run[qid], 10, level=2)
    total = sum(r >= 2 for j in qrels.values() for r in j.values())
    assert table["all"]["num_rel"] == str(total)
    _, out1, _ = run_eval(capsys, "-m", "num_rel", *files)
    assert int(lines_by_qid(out1)["all"]["num_rel"]) > total


def test_truncated_run_without_and_with_c(ref: Path, capsys: pytest.CaptureFixture[str]) -> None:
    qrels = read_qrels(ref / "qrels.test")
    args = ["-q", "-m", "official", ref / "qrels.test", ref / "results.trunc"]
    _, out, _ = run_eval(capsys, *args)
    table = lines_by_qid(out)
    assert set(table) == {"301", "303", "all"}  # 302 has no results: ignored
    assert table["all"]["num_q"] == "2"
    assert table["all"]["num_ret"] == "584"  # every line of results.trunc
    assert table["all"]["runid"] == "STANDARD"

    rc, out_c, _ = run_eval(capsys, "-c", *args)
    assert rc == 0
    table_c = lines_by_qid(out_c)
    assert set(table_c) == {"301", "302", "303", "all"}  # v10 prints the missing query too
    num_rel_302 = sum(r >= 1 for r in qrels["302"].values())
    for name, value in table_c["302"].items():
        expected = {"num_rel": str(num_rel_302), "num_ret": "0", "num_rel_ret": "0"}
        assert value == expected.get(name, "0.0000"), name
    assert table_c["all"]["num_q"] == "3"
    assert table_c["all"]["num_rel"] == "561"
    for name in ("map", "P_10", "recip_rank"):  # averaged over 3 queries, 302 counting 0
        mean = (float(table["301"][name]) + float(table["303"][name])) / 3
        assert abs(float(table_c["all"][name]) - mean) < 1e-4
    # gm_map: geometric mean with trec_eval's 1e-5 floor for the missing query.
    assert float(table_c["all"]["gm_map"]) < float(table["all"]["gm_map"])


def test_max_docs_per_topic(ref: Path, capsys: pytest.CaptureFixture[str]) -> None:
    qrels, run = read_qrels(ref / "qrels.test"), read_run(ref / "results.test")
    files = [ref / "qrels.test", ref / "results.test"]
    rc, out, _ = run_eval(capsys, "-q", "-M", "10", "-m", "P.10,20", "-m", "num_ret", *files)
    assert rc == 0
    table = lines_by_qid(out)
    assert table["all"]["num_ret"] == "30"
    for qid in ("301", "302", "303"):
        assert table[qid]["P_10"] == precision_at(qrels[qid], run[qid], 10)
        # Only 10 docs are left, so P_20 is half of P_10.
        assert abs(float(table[qid]["P_20"]) - float(table[qid]["P_10"]) / 2) < 1e-4


def test_judged_docs_only(ref: Path, capsys: pytest.CaptureFixture[str]) -> None:
    qrels, run = read_qrels(ref / "qrels.test"), read_run(ref / "results.test")
    rc, out, _ = run_eval(
        capsys, "-q", "-J", "-m", "num_ret", "-m", "P.10", ref / "qrels.test", ref / "results.test"
    )
    assert rc == 0
    table = lines_by_qid(out)
    for qid in ("301", "302", "303"):
        judged_docs = {d: s for d, s in run[qid].items() if d in qrels[qid]}
        assert table[qid]["num_ret"] == str(len(judged_docs))
        assert table[qid]["P_10"] == precision_at(qrels[qid], judged_docs, 10)


def test_measure_families_and_first_parameters_win(
    ref: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    files = [ref / "qrels.test", ref / "results.test"]
    _, out, _ = run_eval(capsys, "-m", "ndcg_cut.10,5", "-m", "P.5,10", "-m", "mrr_cut", *files)
    assert [line.split("\t")[0].rstrip() for line in out.splitlines()] == [
        "mrr_cut_10", "P_5", "P_10", "ndcg_cut_5", "ndcg_cut_10",
    ]  # fmt: skip
    expected = (ref / "out.test.a").read_text().splitlines()
    assert set(out.splitlines()) - {out.splitlines()[0]} <= set(expected)
    _, out2, _ = run_eval(capsys, "-mP.5", "-m", "P.10", *files)  # trec_eval: P.5 wins
    assert out2 == "P_5                   \tall\t0.2667\n"


@pytest.mark.parametrize(
    ("which", "content", "problem"),
    [
        ("qrels", "301 0 CR93E-1282 1\n301 0 CR93E-1850\n",
         "2: expected 4 fields 'qid iter docno rel', got 3"),
        ("run", "301 Q0 FR940202-2-00150 1 2.1 R\n\n301 Q0 x 2 high R\n",
         "3: score 'high' is not a number"),
    ],
)  # fmt: skip
def test_malformed_input_names_file_and_line(
    ref: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    which: str,
    content: str,
    problem: str,
) -> None:
    bad = tmp_path / f"bad.{which}"
    bad.write_text(content)
    qrels = bad if which == "qrels" else ref / "qrels.test"
    run = bad if which == "run" else ref / "results.test"
    rc, out, err = run_eval(capsys, qrels, run)
    assert rc == 2 and out == ""
    assert err == f"rankpipe eval: {bad}:{problem}\n"


def test_usage_errors(ref: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    files = [ref / "qrels.test", ref / "results.test"]
    rc, out, err = run_eval(capsys, "-m", "nosuch", *files)
    assert (rc, out) == (2, "")
    assert err.startswith("rankpipe eval: unsupported measure 'nosuch'; supported: trec_eval ")
    missing = tmp_path / "missing"
    rc, _, err = run_eval(capsys, missing, ref / "results.test")
    assert (rc, err) == (2, f"rankpipe eval: cannot read {missing}: No such file or directory\n")
    rc, _, err = run_eval(capsys, ref / "qrels.test")
    assert rc == 2 and err.startswith("rankpipe eval: the following arguments are required: run")
    other = tmp_path / "other.run"
    other.write_text("999 Q0 d 1 1.0 r\n")
    rc, _, err = run_eval(capsys, ref / "qrels.test", other)
    assert rc == 2 and "no queries with both results and relevance info" in err


def test_module_entry_point(ref: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    cmd = [sys.executable, "-m", "components.ranking_evaluator.eval_cli", "eval"]
    done = subprocess.run(
        [*cmd, str(ref / "qrels.test"), str(ref / "results.test")],
        capture_output=True, text=True, cwd=REPO_ROOT, env=env, check=False,
    )  # fmt: skip
    assert done.returncode == 0 and done.stdout == (ref / "out.test").read_text()
    bad = subprocess.run(
        [*cmd, str(ref / "results.test"), str(ref / "results.test")],  # a run is no qrels
        capture_output=True, text=True, cwd=REPO_ROOT, env=env, check=False,
    )  # fmt: skip
    assert bad.returncode == 2
    assert bad.stderr == (
        f"rankpipe eval: {ref / 'results.test'}:1: expected 4 fields 'qid iter docno rel', got 6\n"
    )


# --------------------------------------------------------------------------- compare


def compare_rows(out: str) -> dict[str, list[str]]:
    rows = [line.split("\t") for line in out.splitlines() if not line.startswith("#")]
    header, body = rows[0], rows[1:]
    assert [h.strip() for h in header] == [
        "measure", "mean_A", "mean_B", "delta", "win", "tie", "loss", "ttest_p", "rand_p",
    ]  # fmt: skip
    return {row[0].strip(): row[1:] for row in body}


def test_compare_identical_runs(ref: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = ref / "results.test"
    rc = compare_main([str(ref / "qrels.test"), str(run), str(run), "-m", "map", "-m", "P.10"])
    out, _ = capsys.readouterr()
    assert rc == 0
    rows = compare_rows(out)
    assert rows == {
        "map": ["0.1785", "0.1785", "+0.0000", "0", "3", "0", "1.0000", "1.0000"],
        "P_10": ["0.3000", "0.3000", "+0.0000", "0", "3", "0", "1.0000", "1.0000"],
    }


def test_compare_truncated_run(ref: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = [str(ref / "qrels.test"), str(ref / "results.test"), str(ref / "results.trunc")]
    rc = compare_main([*argv, "-m", "map", "-m", "recip_rank", "--seed", "3", "--trials", "999"])
    out, _ = capsys.readouterr()
    assert rc == 0
    rows = compare_rows(out)
    eval_main(["-c", "-m", "map", str(ref / "qrels.test"), str(ref / "results.trunc")])
    map_b = capsys.readouterr()[0].split("\t")[2].strip()
    # Over the queries of either run: A has all 3, so B's missing 302 counts 0 (as with -c).
    assert rows["map"][:2] == ["0.1785", map_b]
    assert "# run B has no results for 1 of them: 0 there (302)" in out
    assert float(rows["map"][2]) == pytest.approx(float(map_b) - 0.1785, abs=2e-4)
    assert [int(x) for x in rows["map"][3:6]] == [1, 1, 1]
    # 3 queries: 8 sign patterns; the randomization p is a multiple of 1/1000 here.
    assert (float(rows["map"][7]) * 1000) == pytest.approx(round(float(rows["map"][7]) * 1000))
    again = compare_main([*argv, "-m", "map", "-m", "recip_rank", "--seed", "3", "--trials", "999"])
    assert again == 0 and capsys.readouterr()[0] == out  # seeded: identical output


def test_compare_errors(ref: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = [str(ref / "qrels.test"), str(ref / "results.test"), str(ref / "results.test")]
    assert compare_main(argv) == 2  # -m is required
    assert "-m" in capsys.readouterr()[1]
    assert compare_main([*argv, "-m", "gm_map"]) == 2  # no per-query values to pair
    assert "no per-query measure" in capsys.readouterr()[1]


def all_values(output: str) -> dict[str, str]:
    return lines_by_qid(output)["all"]


def test_compare_means_are_the_eval_values_of_the_same_queries(
    ref: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """compare's means are what eval (and trec_eval) print for the same query set: without -c
    the judged queries of the runs (results.trunc: 301 and 303; out.test: all three), with -c
    every qrels query."""
    qrels, full, trunc = ref / "qrels.test", ref / "results.test", ref / "results.trunc"
    measures = ["map", "P_5", "P_10", "recip_rank", "Rprec", "bpref"]
    m_args = [x for m in measures for x in ("-m", m)]
    expected_full = all_values((ref / "out.test").read_text())
    for run, flags in ((full, []), (trunc, []), (trunc, ["-c"])):
        assert compare_main([*flags, str(qrels), str(run), str(run), *m_args]) == 0
        out = capsys.readouterr()[0]
        rows = compare_rows(out)
        _, evaluated, _ = run_eval(capsys, *flags, "-m", "official", qrels, run)
        values = all_values(evaluated)
        assert f"# queries: {values['num_q']} " in out
        for name in measures:
            assert rows[name][:2] == [values[name], values[name]], (run, flags, name)
            if run == full:
                assert rows[name][0] == expected_full[name]  # trec_eval's own out.test


def test_compare_ignores_queries_without_judgments_and_pairs_missing_ones(
    ref: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A run query the qrels do not judge is ignored (as trec_eval ignores it); 302, judged but
    # in neither run, is left out without -c.
    extra = tmp_path / "extra.run"
    extra.write_text((ref / "results.trunc").read_text() + "999 Q0 d1 1 9.0 X\n")
    argv = [str(ref / "qrels.test"), str(extra), str(ref / "results.trunc"), "-m", "map"]
    assert compare_main(argv) == 0
    out = capsys.readouterr()[0]
    assert "# queries: 2 (judged queries of either run)" in out and "no results" not in out
    assert compare_main(["-c", *argv]) == 0
    out_c = capsys.readouterr()[0]
    assert "# queries: 3 (every judged query, -c)" in out_c
    assert "# run A has no results for 1 of them: 0 there (302)" in out_c
    rc, out_eval, _ = run_eval(capsys, "-m", "map", ref / "qrels.test", extra)
    assert rc == 0
    _, out_trunc, _ = run_eval(capsys, "-m", "map", ref / "qrels.test", ref / "results.trunc")
    assert out_eval == out_trunc


# --------------------------------------------------------------------------- formats, names


def _as_beir(qrels: dict[str, dict[str, int]], header: bool) -> str:
    lines = ["query-id\tcorpus-id\tscore"] if header else []
    lines += [f"{q}\t{d}\t{r}" for q, docs in qrels.items() for d, r in docs.items()]
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("header", [True, False])
def test_beir_qrels_reproduce_out_test(
    ref: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], header: bool
) -> None:
    # qrels.test's judgments in BEIR's TSV: the format is told from the first line.
    beir = tmp_path / "test.tsv"
    beir.write_text(_as_beir(read_qrels(ref / "qrels.test"), header))
    rc, out, err = run_eval(capsys, beir, ref / "results.test")
    assert (rc, err) == (0, "")
    assert out == (ref / "out.test").read_text()
    rc, out, _ = run_eval(capsys, "--qrels-format", "beir_qrels", beir, ref / "results.test")
    assert rc == 0 and out == (ref / "out.test").read_text()


def test_real_beir_qrels_with_header(
    shared_data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """NFCorpus' dev qrels, header and all (before: "expected 4 fields"), with a run that ranks
    20 queries' judged documents by grade: nDCG@10 is 1 on each, over those 20 queries."""
    qrels = shared_data / "nfcorpus" / "qrels" / "dev.tsv"
    judged = read_qrels(qrels, "beir_qrels")
    run = tmp_path / "ideal.run"
    run.write_text(
        "".join(
            f"{q} Q0 {d} {i} {float(g)} ideal\n"
            for q in sorted(judged)[:20]
            for i, (d, g) in enumerate(sorted(judged[q].items(), key=lambda x: -x[1]))
        )
    )
    rc, out, err = run_eval(capsys, "-m", "nDCG@10", "-m", "num_q", qrels, run)
    assert (rc, err) == (0, "")
    assert all_values(out) == {"num_q": "20", "ndcg_cut_10": "1.0000"}


def test_cranfield_qrels_must_be_named(
    shared_data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cran = shared_data / "cranfield"
    run = cran / "runs" / "lucene-english-100.run"
    rc, out, err = run_eval(capsys, cran / "cranqrel", run)
    assert rc == 2 and out == ""
    assert "cannot tell the qrels format: 3 space-separated fields" in err and "cranfield" in err
    rc, out, err = run_eval(capsys, "--qrels-format", "cranfield", "-m", "ndcg_cut.10", "-m", "map",
                            cran / "cranqrel", run)  # fmt: skip
    assert (rc, err) == (0, "")
    # The same as the TREC qrels RankingDataGen writes from cranqrel (gains 5 - code, -1 -> 0).
    from components.ranking_datagen.readers import get_reader

    trec = tmp_path / "cranqrel.trec"
    trec.write_text(
        "".join(
            f"{j.qid} 0 {j.docid} {j.relevance}\n"
            for j in get_reader("qrels", "cranfield").read(str(cran / "cranqrel"))
        )
    )
    _, out_trec, _ = run_eval(capsys, "-m", "ndcg_cut.10", "-m", "map", trec, run)
    assert out == out_trec


def test_qrels_read_as_the_pipeline_reads_them(shared_data: Path) -> None:
    """rankcore's qrels reader (eval, evaluator, Trainer) and RankingDataGen's readers give the
    same judgments on the real collections, in each format: one meaning per file."""
    from components.ranking_datagen.readers import READERS, get_reader

    assert set(QRELS_FORMATS) == set(READERS["qrels"])
    files = [
        (shared_data / "trec_eval" / "qrels.test", "trec_qrels"),
        (shared_data / "trec_eval" / "qrels.rel_level", "trec_qrels"),
        (shared_data / "nfcorpus" / "qrels" / "dev.tsv", "beir_qrels"),
        (shared_data / "msmarco-dl19-subset" / "qrels" / "test.tsv", "beir_qrels"),
        (shared_data / "cranfield" / "cranqrel", "cranfield"),
    ]
    for path, fmt in files:
        theirs: dict[str, dict[str, int]] = {}
        for j in get_reader("qrels", fmt).read(str(path)):
            theirs.setdefault(j.qid, {})[j.docid] = j.relevance
        assert read_qrels(path, fmt) == theirs, path


def test_runs_read_as_the_pipeline_reads_them(shared_data: Path) -> None:
    """rankcore's run reader and RankingDataGen's trec_run reader give the same scores on the
    real runs (trec_eval's own, results.trunc's extra columns included)."""
    from components.ranking_datagen.readers import get_reader

    for path in (
        shared_data / "trec_eval" / "results.test",
        shared_data / "trec_eval" / "results.trunc",
        shared_data / "cranfield" / "runs" / "lucene-english-100.run",
    ):
        theirs: dict[str, dict[str, float]] = {}
        for entry in get_reader("run", "trec_run").read(str(path)):
            theirs.setdefault(entry.qid, {})[entry.docid] = entry.score
        assert read_run(path) == theirs, path


def test_ir_measures_names(ref: Path, capsys: pytest.CaptureFixture[str]) -> None:
    files = [ref / "qrels.test", ref / "results.test"]
    ir = ["nDCG@10", "P@5", "P@10", "RR", "AP", "R@100", "RR@10"]
    rc, out, err = run_eval(capsys, *[x for m in ir for x in ("-m", m)], *files)
    assert (rc, err) == (0, "")
    trec = ["ndcg_cut.10", "P.5,10", "recip_rank", "map", "recall.100", "mrr_cut.10"]
    _, out_trec, _ = run_eval(capsys, *[x for m in trec for x in ("-m", m)], *files)
    assert out == out_trec  # printed under trec_eval's names, in its order
    names = [line.split("\t")[0].rstrip() for line in out.splitlines()]
    assert names == ["map", "recip_rank", "mrr_cut_10", "P_5", "P_10", "recall_100",
                     "ndcg_cut_10"]  # fmt: skip
    reference = set((ref / "out.test.a").read_text().splitlines())
    assert {line for line in out.splitlines() if "mrr_cut" not in line} <= reference
    rc, out, err = run_eval(capsys, "-m", "ndcg@10", *files)
    assert rc == 2 and out == ""
    assert err.startswith("rankpipe eval: unsupported measure 'ndcg@10'; did you mean nDCG@10?")
    rc, _, err = run_eval(capsys, "-m", "P(rel=2)@5", *files)
    assert rc == 2 and "give -l 2" in err
    rc, out, _ = run_eval(capsys, "-l", "2", "-m", "P(rel=2)@5", ref / "qrels.rel_level", files[1])
    assert rc == 0 and out.startswith("P_5 ")


@pytest.mark.e2e
def test_compare_on_the_pipelines_artifacts_matches_its_summary(pipeline_runs) -> None:
    """The evaluator's first-stage and candidate runs (test split only) against RankingDataGen's
    qrels (every query): compare's means are metrics.json's, the run summary's numbers."""
    run = pipeline_runs.first
    evaluation = Path(run.evaluation.uri)
    (qrels,) = (
        Path(u) / "qrels.txt" for u in pipeline_runs.artifact_uri("qrels", "RankingDataGen")
    )
    main = run.metrics["main_metric"]
    argv = [str(qrels), str(evaluation / "first_stage.run"), str(evaluation / "candidate.run")]
    done = subprocess.run(
        [sys.executable, "-m", "pipelines.cli", "compare", *argv, "-m", main],
        capture_output=True, text=True, cwd=REPO_ROOT, check=False,
    )  # fmt: skip
    assert done.returncode == 0 and done.stderr == "", done.stderr
    row = compare_rows(done.stdout)[main]
    agg = run.metrics["aggregate"]
    assert row[:2] == [f"{agg['first_stage'][main]:.4f}", f"{agg['candidate'][main]:.4f}"]
    assert f"# queries: {run.metrics['num_queries']} " in done.stdout
