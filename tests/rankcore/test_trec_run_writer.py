"""rankcore.trec, the one TREC run writer: its layout, and that runs read back exactly."""

from __future__ import annotations

from pathlib import Path

from rankcore.metrics import rank_documents, read_run_with_runid
from rankcore.trec import RUN_COLUMNS, format_run, write_run


def test_layout_sorted_queries_given_order_repr_scores() -> None:
    ranked = {"q2": [("b", 0.5)], "q1": [("d2", 2.0), ("d1", 0.1 + 0.2)]}
    assert format_run(ranked, "bm25") == (
        "q1 Q0 d2 1 2.0 bm25\nq1 Q0 d1 2 0.30000000000000004 bm25\nq2 Q0 b 1 0.5 bm25\n"
    )
    assert format_run({}, "bm25") == ""
    assert len(RUN_COLUMNS) == len(format_run(ranked, "r").split("\n")[0].split())


def test_written_run_reads_back_as_ranked(tmp_path: Path) -> None:
    run = {"1": {"a": 1 / 3, "b": 1 / 3, "c": 2e-17}, "2": {"x": -1.5}}
    ranked = {q: [(d, docs[d]) for d in rank_documents(docs)] for q, docs in run.items()}
    path = tmp_path / "sub" / "r.run"
    write_run(str(path), ranked, "rankpipe")
    assert read_run_with_runid(path) == (run, "rankpipe")
    lines = path.read_text().splitlines()
    assert [line.split()[3] for line in lines] == ["1", "2", "3", "1"]
    assert not list(tmp_path.glob("sub/*.tmp-*"))
