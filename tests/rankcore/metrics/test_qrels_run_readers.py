"""rankcore.metrics.read_qrels in the pipeline's three judgment formats, and detect_qrels_format.

The same judgments written as TREC, BEIR (with and without header) and Cranfield qrels must read
back identically (Cranfield after its code -> gain mapping). That the records equal
RankingDataGen's readers' on the real collections is checked in
tests/components/ranking_evaluator/test_eval_cli.py (this layer may not import components).
"""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from rankcore.metrics import (
    QRELS_FORMATS,
    MalformedLineError,
    detect_qrels_format,
    read_qrels,
    read_run,
    read_run_with_runid,
    read_runid,
)


@pytest.fixture(scope="module")
def trec_qrels(shared_data: Path) -> dict[str, dict[str, int]]:
    return read_qrels(shared_data / "trec_eval" / "qrels.rel_level")  # grades -1..4


def _beir(qrels: dict[str, dict[str, int]], header: bool, crlf: bool = False) -> str:
    end = "\r\n" if crlf else "\n"
    lines = ["query-id\tcorpus-id\tscore"] if header else []
    lines += [f"{q}\t{d}\t{r}" for q, docs in qrels.items() for d, r in docs.items()]
    return end.join(lines) + end


@pytest.mark.parametrize(("header", "crlf"), [(True, False), (False, False), (True, True)])
def test_beir_qrels_read_as_their_trec_twin(
    tmp_path: Path, trec_qrels: dict, header: bool, crlf: bool
) -> None:
    path = tmp_path / "qrels.tsv"
    path.write_bytes(_beir(trec_qrels, header, crlf).encode())
    assert detect_qrels_format(path) == "beir_qrels"
    assert read_qrels(path, "beir_qrels") == trec_qrels
    assert read_qrels(path, "auto") == trec_qrels


def test_beir_header_with_byte_order_mark(tmp_path: Path, trec_qrels: dict) -> None:
    path = tmp_path / "qrels.tsv"
    path.write_bytes(b"\xef\xbb\xbf" + _beir(trec_qrels, header=True).encode())
    assert read_qrels(path, "auto") == trec_qrels


def test_cranfield_codes_become_gains(tmp_path: Path) -> None:
    path = tmp_path / "cranqrel"
    path.write_text("1 184 2\n1 29  1\n1 12 5\n1 51 -1\n2 12 4\n")
    assert read_qrels(path, "cranfield") == {
        "1": {"184": 3, "29": 4, "12": 0, "51": 0},
        "2": {"12": 1},
    }
    bad = tmp_path / "bad"
    bad.write_text("1 184 2\n1 29 0\n")
    with pytest.raises(MalformedLineError, match=r"bad:2: unknown Cranfield relevance code 0"):
        read_qrels(bad, "cranfield")


def test_detection(tmp_path: Path, shared_data: Path) -> None:
    ref = shared_data / "trec_eval"
    assert detect_qrels_format(ref / "qrels.test") == "trec_qrels"
    assert detect_qrels_format(ref / "qrels.test.with-comments") == "trec_qrels"
    assert detect_qrels_format(shared_data / "nfcorpus" / "qrels" / "dev.tsv") == "beir_qrels"
    assert (
        detect_qrels_format(shared_data / "msmarco-dl19-subset" / "qrels" / "test.tsv")
        == "beir_qrels"
    )
    # cranqrel's 3 space-separated columns are codes, not grades: never guessed.
    with pytest.raises(MalformedLineError, match="cranqrel:1: cannot tell the qrels format"):
        detect_qrels_format(shared_data / "cranfield" / "cranqrel")
    empty = tmp_path / "empty"
    empty.write_text("")
    assert detect_qrels_format(empty) == "trec_qrels"


@pytest.mark.parametrize(
    ("fmt", "content", "problem"),
    [
        ("beir_qrels", "query-id\tcorpus-id\tscore\nq1\td1\t1\nq1\td2\n",
         "3: expected 3 tab-separated fields 'query-id corpus-id score', got 2"),
        ("beir_qrels", "q1\td1\t1\nq1\td1\t2\n",
         "2: duplicate judgment of 'd1' for query 'q1' (first at line 1)"),
        ("beir_qrels", "q1\td1\thigh\n", "1: relevance 'high' is not an integer"),
        ("beir_qrels", "q1\t\t1\n", "1: empty query-id or corpus-id"),
        ("cranfield", "1 2 3 4\n", "1: expected 3 fields 'qid docid code' (cranqrel), got 4"),
        ("trec_qrels", "q1 0 d1\n", "1: expected 4 fields 'qid iter docno rel', got 3"),
    ],
)  # fmt: skip
def test_malformed_lines_name_file_and_line(
    tmp_path: Path, fmt: str, content: str, problem: str
) -> None:
    path = tmp_path / "qrels"
    path.write_text(content)
    with pytest.raises(MalformedLineError) as info:
        read_qrels(path, fmt)
    assert str(info.value) == f"{path}:{problem}"


def test_unknown_format_is_named(tmp_path: Path) -> None:
    with pytest.raises(
        ValueError, match="unknown qrels format 'tsv'; known: " + ", ".join(QRELS_FORMATS)
    ):
        read_qrels(tmp_path / "x", "tsv")


# The outcomes rankcore/trec.py's one grammar changed for these readers (each was accepted or
# misread before, as listed at the top of rankcore/trec.py).


def test_trec_qrels_grammar_decisions(tmp_path: Path) -> None:
    gz = tmp_path / "qrels.gz"
    gz.write_bytes(gzip.compress(b"\xef\xbb\xbf301 0 d1 1\n  # indented comment\n301 0 d2 0\n"))
    assert read_qrels(gz) == {"301": {"d1": 1, "d2": 0}}  # gunzipped, BOM dropped


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        (b"1 Q0 a x 1.0 r\n", "1: rank 'x' is not an integer"),
        (b"1 Q0 a 1 inf r\n", "1: score 'inf' is not finite"),
        (b"1 Q0 a 1 1.0 r junk \xff\n", "1: not valid UTF-8 (invalid start byte)"),
        (b"1 Q0 a 1 1_0 r\n", "1: score '1_0' is not a number"),
    ],
)
def test_run_grammar_decisions(tmp_path: Path, content: bytes, problem: str) -> None:
    path = tmp_path / "run"
    path.write_bytes(content)
    with pytest.raises(MalformedLineError) as info:
        read_run(path)
    assert str(info.value) == f"{path}:{problem}"


def test_runid_passes_over_bad_lines(tmp_path: Path) -> None:
    path = tmp_path / "run"
    path.write_bytes(b"1 Q0 a 1 1.0 first\n1 Q0 b 2 high bad\n# c\n")
    assert read_runid(path) == "first"
    with pytest.raises(MalformedLineError, match=":2: score 'high' is not a number"):
        read_run_with_runid(path)
