"""rankcore.trec's one TREC grammar: every dialect item its header decides, accepted or rejected
as decided, and the two error policies ("fail": first bad line with file:line and reason;
"skip": bad lines left out, counted by reason).

The metrics' readers (tests/rankcore/metrics/) and RankingDataGen's trec_qrels/trec_run
(tests/components/ranking_datagen/readers/test_trec.py) are tested on top of it.
"""

from __future__ import annotations

import gzip
import logging
from pathlib import Path

import pytest

from rankcore import trec
from rankcore.trec import (
    LineProblem,
    MalformedLineError,
    QrelsLine,
    RunLine,
    parse_qrels_line,
    parse_run_line,
    read_qrels_lines,
    read_run_lines,
)


def _write(tmp_path: Path, name: str, content: str | bytes) -> Path:
    path = tmp_path / name
    data = content.encode() if isinstance(content, str) else content
    path.write_bytes(gzip.compress(data) if name.endswith(".gz") else data)
    return path


# --------------------------------------------------------------------------- lines, one by one


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (b"301 0 d1 1\n", QrelsLine("301", "d1", 1)),
        (b"301 0 d1 1", QrelsLine("301", "d1", 1)),  # last line, no newline
        (b"301 0 d1 1\r\n", QrelsLine("301", "d1", 1)),  # CRLF
        (b"  301\t0  d1\v1\f\r\n", QrelsLine("301", "d1", 1)),  # any ASCII whitespace
        (b"301 0 CR#93E-1860 0\n", QrelsLine("301", "CR#93E-1860", 0)),  # '#' inside a field
        (b"301 0 d1 +1\n", QrelsLine("301", "d1", 1)),
        (b"301 0 d1 007\n", QrelsLine("301", "d1", 7)),
        (b"301 0 d1 -1\n", QrelsLine("301", "d1", -1)),
        ("301\u00a0x 0 d1 1\n".encode(), QrelsLine("301\u00a0x", "d1", 1)),  # NBSP: in the qid
        (b"301 0 d\x1c1 2\n", QrelsLine("301", "d\x1c1", 2)),  # str.split would split
        ("301 0 caf\u00e9 1\n".encode(), QrelsLine("301", "caf\u00e9", 1)),
        # blank and comment lines carry no record
        (b"\n", None),
        (b"   \t\r\n", None),
        (b"# comment\n", None),
        (b"   # indented comment, 5 fields\n", None),  # trec_eval: a query '#' in qrels
        (b"\t#0 0 d 1\n", None),
        (b"# latin-1 comment: g\xe9n\xe9r\xe9\n", None),  # never decoded
    ],
)
def test_qrels_lines_accepted(raw: bytes, expected: QrelsLine | None) -> None:
    assert parse_qrels_line(raw) == expected


@pytest.mark.parametrize(
    ("raw", "reason", "message"),
    [
        (b"301 0 d1\n", trec.FIELD_COUNT, "expected 4 fields 'qid iter docno rel', got 3"),
        (b"301 0 d1 1 x\n", trec.FIELD_COUNT, "expected 4 fields 'qid iter docno rel', got 5"),
        ("301 0 d1\u00a01\n".encode(), trec.FIELD_COUNT,
         "expected 4 fields 'qid iter docno rel', got 3"),  # U+00A0 separates nothing
        (b"301 0 d1 1.5\n", trec.NOT_INTEGER, "relevance '1.5' is not an integer"),
        (b"301 0 d1 yes\n", trec.NOT_INTEGER, "relevance 'yes' is not an integer"),
        (b"301 0 d1 1_0\n", trec.NOT_INTEGER, "relevance '1_0' is not an integer"),
        ("301 0 d1 \u0661\n".encode(), trec.NOT_INTEGER,
         "relevance '\u0661' is not an integer"),  # Arabic-Indic one
        ("301 0 d1 \uff11\n".encode(), trec.NOT_INTEGER,
         "relevance '\uff11' is not an integer"),  # fullwidth one
        (b"301 0 d\x001 1\n", trec.NUL_BYTE, "NUL byte in line (trec_eval reads no NUL)"),
        (b"301 0 d\xff 1\n", trec.NOT_UTF8, "not valid UTF-8 (invalid start byte)"),
        (b"301 \xe9 d1 1\n", trec.NOT_UTF8, "not valid UTF-8 (invalid continuation byte)"),
    ],
)  # fmt: skip
def test_qrels_lines_rejected(raw: bytes, reason: str, message: str) -> None:
    problem = parse_qrels_line(raw)
    assert isinstance(problem, LineProblem)
    assert (problem.reason, problem.message) == (reason, message)
    assert problem.reason in trec.REASONS


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (b"1 Q0 a 1 2.5 r\n", RunLine("1", "a", 1, 2.5, "r")),
        (b"1 Q0 a 0 2.5 r extra text here\n", RunLine("1", "a", 0, 2.5, "r")),  # results.trunc
        (b"1\tQ0\ta\t-3\t.5\tr\r\n", RunLine("1", "a", -3, 0.5, "r")),
        (b"1 Q0 a 1 5. r\n", RunLine("1", "a", 1, 5.0, "r")),
        (b"1 Q0 a 1 1e-3 r\n", RunLine("1", "a", 1, 0.001, "r")),
        (b"1 Q0 a 1 -1E+2 r\n", RunLine("1", "a", 1, -100.0, "r")),
        (b"1 Q0 a 1 +2 r\n", RunLine("1", "a", 1, 2.0, "r")),
        (b"1 Q0 a 1 0.30000000000000004 r\n", RunLine("1", "a", 1, 0.30000000000000004, "r")),
        (b"   # indented comment\n", None),
        (b"\n", None),
    ],
)
def test_run_lines_accepted(raw: bytes, expected: RunLine | None) -> None:
    assert parse_run_line(raw) == expected


@pytest.mark.parametrize(
    ("raw", "reason", "message"),
    [
        (b"1 Q0 a 1 2.5\n", trec.FIELD_COUNT,
         "expected 6 fields 'qid iter docno rank score runid', got 5"),
        (b"1 Q0 a x 2.5 r\n", trec.NOT_INTEGER, "rank 'x' is not an integer"),
        (b"1 Q0 a 1.0 2.5 r\n", trec.NOT_INTEGER, "rank '1.0' is not an integer"),  # swapped
        (b"1 Q0 a 1 high r\n", trec.NOT_NUMBER, "score 'high' is not a number"),
        (b"1 Q0 a 1 2.5abc r\n", trec.NOT_NUMBER, "score '2.5abc' is not a number"),
        (b"1 Q0 a 1 1_0 r\n", trec.NOT_NUMBER, "score '1_0' is not a number"),
        (b"1 Q0 a 1 0x1p3 r\n", trec.NOT_NUMBER, "score '0x1p3' is not a number"),
        ("1 Q0 a 1 \u0661 r\n".encode(), trec.NOT_NUMBER, "score '\u0661' is not a number"),
        (b"1 Q0 a 1 nan r\n", trec.NOT_FINITE, "score is NaN"),
        (b"1 Q0 a 1 NaN r\n", trec.NOT_FINITE, "score is NaN"),
        (b"1 Q0 a 1 inf r\n", trec.NOT_FINITE, "score 'inf' is not finite"),
        (b"1 Q0 a 1 -Infinity r\n", trec.NOT_FINITE, "score '-Infinity' is not finite"),
        (b"1 Q0 a 1 1e999 r\n", trec.NOT_FINITE, "score '1e999' is not finite"),
        (b"1 Q0 a 1 1.0 r \xff\n", trec.NOT_UTF8, "not valid UTF-8 (invalid start byte)"),
        (b"1 Q0 a 1 1.0 r\x00\n", trec.NUL_BYTE, "NUL byte in line (trec_eval reads no NUL)"),
    ],
)  # fmt: skip
def test_run_lines_rejected(raw: bytes, reason: str, message: str) -> None:
    problem = parse_run_line(raw)
    assert isinstance(problem, LineProblem)
    assert (problem.reason, problem.message) == (reason, message)


def test_undecodable_bytes_are_located() -> None:
    problem = parse_qrels_line(b"301 0 caf\xe9-x 1\r\n")
    assert isinstance(problem, LineProblem)
    assert (problem.count, problem.raw) == (9, b"\xe9-x ")


# --------------------------------------------------------------------------- files, policies


def test_byte_order_mark_only_opens_the_file(tmp_path: Path) -> None:
    path = _write(tmp_path, "qrels", b"\xef\xbb\xbf301 0 d1 1\n\xef\xbb\xbf302 0 d1 1\n")
    records, _ = read_qrels_lines(path)
    assert [r.qid for _, r in records] == ["301", "\ufeff302"]
    commented = _write(tmp_path, "q2", b"\xef\xbb\xbf# header\n301 0 d1 1\n")
    assert read_qrels_lines(commented)[0] == [(2, QrelsLine("301", "d1", 1))]


def test_gzipped_files_by_name(tmp_path: Path) -> None:
    text = "# run\n1 Q0 a 1 2.0 r\n1 Q0 b 2 1.0 r\n"
    plain, gz = _write(tmp_path, "run", text), _write(tmp_path, "run.gz", text)
    assert read_run_lines(gz)[0] == read_run_lines(plain)[0] != []
    bad = _write(tmp_path, "bad.run.gz", "1 Q0 a 1 2.0 r\n1 Q0 b 2\n")
    with pytest.raises(MalformedLineError, match=r"bad\.run\.gz:2: expected 6 fields"):
        read_run_lines(bad)


BAD_QRELS = (
    "# judgments\n301 0 d1 1\n301 0 d2\n\n301 0 d3 yes\n301 0 d1 0\n301 0 d4 2\n301 0 d5 high\n"
)


def test_fail_policy_stops_at_the_first_bad_line(tmp_path: Path) -> None:
    path = _write(tmp_path, "qrels", BAD_QRELS)
    for policy in ("fail", None):
        with pytest.raises(MalformedLineError) as info:
            read_qrels_lines(path, policy) if policy else read_qrels_lines(path)
        problem = "expected 4 fields 'qid iter docno rel', got 3"
        assert str(info.value) == f"{path}:3: {problem}"
        assert (info.value.path, info.value.line_no, info.value.problem) == (str(path), 3, problem)
        assert isinstance(info.value, ValueError)


def test_skip_policy_counts_bad_lines_by_reason(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = _write(tmp_path, "qrels", BAD_QRELS)
    with caplog.at_level(logging.WARNING, logger="rankcore.trec"):
        records, skipped = read_qrels_lines(path, "skip")
    assert records == [(2, QrelsLine("301", "d1", 1)), (7, QrelsLine("301", "d4", 2))]
    assert skipped.total == 4
    assert dict(skipped.counts) == {"field_count": 1, "not_integer": 2, "duplicate": 1}
    assert skipped.first == {
        "field_count": (3, "expected 4 fields 'qid iter docno rel', got 3"),
        "not_integer": (5, "relevance 'yes' is not an integer"),
        "duplicate": (6, "duplicate judgment of 'd1' for query '301' (first at line 2)"),
    }
    assert str(skipped) == (
        f"{path}: skipped 4 bad line(s): "
        "1 duplicate (first: line 6: duplicate judgment of 'd1' for query '301' (first at "
        "line 2)); 1 field_count (first: line 3: expected 4 fields 'qid iter docno rel', got "
        "3); 2 not_integer (first: line 5: relevance 'yes' is not an integer)"
    )
    assert [r.getMessage() for r in caplog.records] == [str(skipped)]


def test_skip_policy_on_a_clean_file_reports_nothing(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = _write(tmp_path, "run", "1 Q0 a 1 2.0 r\n1 Q0 b 2 1.0 last\n")
    with caplog.at_level(logging.WARNING, logger="rankcore.trec"):
        records, skipped = read_run_lines(path, "skip")
    assert [r.runid for _, r in records] == ["r", "last"]
    assert skipped.total == 0 and not caplog.records


def test_duplicate_documents_in_a_run(tmp_path: Path) -> None:
    path = _write(tmp_path, "run", "1 Q0 a 1 2.0 r\n2 Q0 a 1 2.0 r\n1 Q0 a 2 1.0 r\n")
    with pytest.raises(MalformedLineError) as info:
        read_run_lines(path)
    assert info.value.problem == "document 'a' retrieved twice for query '1' (first at line 1)"
    assert info.value.line_no == 3
    records, skipped = read_run_lines(path, "skip")
    assert [(n, r.qid, r.score) for n, r in records] == [(1, "1", 2.0), (2, "2", 2.0)]
    assert dict(skipped.counts) == {"duplicate": 1}


def test_unknown_policy_is_named(tmp_path: Path) -> None:
    path = _write(tmp_path, "run", "")
    with pytest.raises(ValueError, match=r"on_bad_line must be one of \('fail', 'skip'\)"):
        read_run_lines(path, "warn")  # type: ignore[arg-type]


def test_reference_inputs(shared_data: Path) -> None:
    """trec_eval's own test inputs read whole: every line a record, none skipped."""
    ref = shared_data / "trec_eval"
    for name, lines in (("qrels.test", 3681), ("qrels.rel_level", 3681)):
        records, skipped = read_qrels_lines(ref / name, "skip")
        assert (len(records), skipped.total) == (lines, 0), name
    records, skipped = read_qrels_lines(ref / "qrels.test.with-comments", "skip")
    assert skipped.total == 0
    assert ("301", "CR#93E-1860") in {(r.qid, r.docno) for _, r in records}
    for name, lines in (("results.test", 1500), ("results.trunc", 584)):
        records, skipped = read_run_lines(ref / name, "skip")
        assert (len(records), skipped.total) == (lines, 0), name
    lucene = shared_data / "cranfield" / "runs" / "lucene-english-100.run"
    records, skipped = read_run_lines(lucene, "skip")
    assert (len(records), skipped.total, {r.rank for _, r in records}) == (22500, 0, {0})
