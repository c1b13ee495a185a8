"""RankingDataGen's trec_qrels and trec_run readers on rankcore.trec's grammar: the Reader
interface and the wording of every collection format's BadRecords, with the grammar's
decisions (tests/rankcore/test_readers_trec.py) holding here too.

The readers' cases on the shared collections and the bad-input table of all formats are in
tests/components/ranking_datagen/test_readers.py.
"""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from components.ranking_datagen.readers import (
    BadRecord,
    BadRecordError,
    Judgment,
    RunEntry,
    TrecQrels,
    TrecRun,
    get_reader,
)
from rankcore import trec


def _write(tmp_path: Path, name: str, content: str | bytes) -> str:
    path = tmp_path / name
    data = content.encode() if isinstance(content, str) else content
    path.write_bytes(gzip.compress(data) if name.endswith(".gz") else data)
    return str(path)


def _split(items: list) -> tuple[list, list]:
    good = [i for i in items if not isinstance(i, BadRecord)]
    return good, [i for i in items if isinstance(i, BadRecord)]


def test_registry_names_these_readers() -> None:
    assert isinstance(get_reader("qrels", "trec_qrels"), TrecQrels)
    assert isinstance(get_reader("run", "trec_run", on_bad_record="skip"), TrecRun)


QRELS_DIALECTS = (
    b"\xef\xbb\xbf# written on Windows\r\n"  # BOM, then a comment
    b"301 0 d1 1\r\n"
    b"   # indented comment\n"
    b"# latin-1 comment: g\xe9n\xe9r\xe9\n"
    b"\n"
    b"301\t0\td2\t+2\n"
    b"301 0 CR#93E-1860 007\n"
    b"301 0 d3\xc2\xa01\n"  # U+00A0 separates nothing: 3 fields
    b"301 0 d4 \xd9\xa1\n"  # Arabic-Indic one
    b"301 0 d5 1_0\n"
    b"301 0 d\xff6 1\n"
    b"301 0 d7 1 extra\n"
    b"301 0 d1 0\n"
)
QRELS_GOOD = [
    Judgment("301", "d1", 1),
    Judgment("301", "d2", 2),
    Judgment("301", "CR#93E-1860", 7),
]
QRELS_BAD = [
    (8, "expected 4 columns (qid iter docid rel), got 3"),
    (9, "non-integer relevance '\u0661'"),
    (10, "non-integer relevance '1_0'"),
    (11, "undecodable bytes (not UTF-8) at column 8: b'\\xff6 1'"),
    (12, "expected 4 columns (qid iter docid rel), got 5"),
    (13, "duplicate pair qid '301' docid 'd1' (first seen at line 2)"),
]


@pytest.mark.parametrize("name", ["qrels", "qrels.gz"])
def test_qrels_dialects_skip(tmp_path: Path, name: str) -> None:
    path = _write(tmp_path, name, QRELS_DIALECTS)
    reader = TrecQrels(on_bad_record="skip")
    assert list(reader.read(path)) == QRELS_GOOD
    good, bad = _split(list(reader.read_with_errors(path)))
    assert good == QRELS_GOOD
    assert bad == [BadRecord(path, line, problem) for line, problem in QRELS_BAD]


def test_qrels_dialects_fail(tmp_path: Path) -> None:
    path = _write(tmp_path, "qrels.gz", QRELS_DIALECTS)
    with pytest.raises(BadRecordError) as err:
        list(TrecQrels().read(path))
    assert str(err.value) == f"{path}:8: expected 4 columns (qid iter docid rel), got 3"


RUN_DIALECTS = (
    "1 Q0 a 0 2.5 r\n"
    "\t# comment\n"
    "1 Q0 b 0 .5 r trailing words\n"
    "1 Q0 c 0 inf r\n"
    "1 Q0 d 0 1e999 r\n"
    "1 Q0 e 1.0 2.0 r\n"
    "1 Q0 f 0 2.5abc r\n"
    "1 Q0 g 0 1_0 r\n"
    "1 Q0 h 0 1.0 r\x00\n"
    "1 Q0 i 0 -1E+2 r\n"
)
RUN_GOOD = [
    RunEntry("1", "a", 2.5, 0),
    RunEntry("1", "b", 0.5, 0),
    RunEntry("1", "i", -100.0, 0),
]
RUN_BAD = [
    (4, "non-finite score 'inf'"),
    (5, "non-finite score '1e999'"),
    (6, "non-integer rank '1.0'"),
    (7, "non-numeric score '2.5abc'"),
    (8, "non-numeric score '1_0'"),
    (9, "NUL byte in line (trec_eval reads no NUL)"),
]


def test_run_dialects_skip_and_fail(tmp_path: Path) -> None:
    path = _write(tmp_path, "run", RUN_DIALECTS)
    good, bad = _split(list(TrecRun(on_bad_record="skip").read_with_errors(path)))
    assert good == RUN_GOOD
    assert bad == [BadRecord(path, line, problem) for line, problem in RUN_BAD]
    with pytest.raises(BadRecordError, match=r":4: non-finite score 'inf'$"):
        list(TrecRun(on_bad_record="fail").read(path))


@pytest.mark.parametrize(
    ("reader", "content", "read"),
    [
        (TrecQrels, QRELS_DIALECTS, trec.read_qrels_lines),
        (TrecRun, RUN_DIALECTS.encode(), trec.read_run_lines),
    ],
)
def test_one_meaning_per_file(tmp_path: Path, reader: type, content: bytes, read) -> None:
    """The same lines are good, and the same lines bad, for RankingDataGen and for rankcore's
    "skip" policy: one grammar."""
    path = _write(tmp_path, "file", content)
    ours = list(reader(on_bad_record="skip").read_with_lines(path))
    good = [(n, (r.qid, r.docid)) for n, r in (i for i in ours if not isinstance(i, BadRecord))]
    records, skipped = read(path, "skip")
    assert good == [(n, (r.qid, r.docno)) for n, r in records]
    assert len([i for i in ours if isinstance(i, BadRecord)]) == skipped.total > 0


def test_duplicates_follow_check_duplicates(tmp_path: Path) -> None:
    path = _write(tmp_path, "run", "1 Q0 a 1 2.0 r\n1 Q0 a 2 1.0 r\n")
    assert len(list(TrecRun(check_duplicates=False).read(path))) == 2
    with pytest.raises(BadRecordError, match="duplicate pair qid '1' docid 'a'"):
        list(TrecRun().read(path))
