"""TREC run and qrels readers, strict, with file:line errors (ir_measures' `util.py`
parse_trec_qrels / parse_trec_run counterpart).

As in trec_eval v10 (rank column ignored, runid from the last line, '#' comments) but stricter:
what trec_eval would atol()/atof() to 0 is an error here. The one place rankpipe parses these
formats: the evaluator, the Trainer's validation and `rankpipe eval` all read through it.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from os import PathLike
from typing import TypeVar

__all__ = ["MalformedLineError", "read_qrels", "read_run", "read_run_with_runid", "read_runid"]


N = TypeVar("N", int, float)


class MalformedLineError(ValueError):
    """A line of a qrels or run file that trec_eval would reject (or misread)."""

    def __init__(self, path: str | PathLike[str], line_no: int, problem: str) -> None:
        super().__init__(f"{path}:{line_no}: {problem}")
        self.path = str(path)
        self.line_no = line_no
        self.problem = problem


def _decode(raw: bytes, path: str | PathLike[str], line_no: int) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise MalformedLineError(path, line_no, f"not valid UTF-8 ({exc.reason})") from None


def _number(
    convert: Callable[[bytes], N],
    raw: bytes,
    name: str,
    kind: str,
    path: str | PathLike[str],
    line_no: int,
) -> N:
    """`convert(raw)`, or MalformedLineError "NAME 'raw' is not KIND" naming the line."""
    try:
        return convert(raw)
    except ValueError:
        problem = f"{name} {_decode(raw, path, line_no)!r} is not {kind}"
        raise MalformedLineError(path, line_no, problem) from None


def _first_time(
    first_seen: dict[tuple[str, str], int],
    qid: str,
    docno: str,
    path: str | PathLike[str],
    line_no: int,
    problem: str,
) -> None:
    """Records where (qid, docno) was first seen; MalformedLineError naming that line when it
    was seen before. `problem` is formatted with d=docno, q=qid."""
    first = first_seen.setdefault((qid, docno), line_no)
    if first != line_no:
        message = problem.format(d=docno, q=qid)
        raise MalformedLineError(path, line_no, f"{message} (first at line {first})")


def read_qrels(path: str | PathLike[str]) -> dict[str, dict[str, int]]:
    """Read `qid iter docno rel` lines (trec_eval's qrels format).

    As in trec_eval: fields are split on ASCII whitespace (bytes.split matches C
    isspace, str.split would also split on e.g. U+00A0), exactly 4 fields, lines
    starting with '#' are comments. Stricter than trec_eval, which atol()s garbage to
    0: a non-integer relevance or a repeated (qid, docno) raises MalformedLineError.
    Blank lines are skipped (trec_eval rejects them in qrels, accepts them in runs).
    """
    qrels: dict[str, dict[str, int]] = {}
    first_seen: dict[tuple[str, str], int] = {}
    with open(path, "rb") as f:
        for line_no, raw in enumerate(f, start=1):
            if raw.startswith(b"#"):
                continue
            fields = raw.split()
            if not fields:
                continue
            if len(fields) != 4:
                raise MalformedLineError(
                    path, line_no, f"expected 4 fields 'qid iter docno rel', got {len(fields)}"
                )
            qid = _decode(fields[0], path, line_no)
            docno = _decode(fields[2], path, line_no)
            rel = _number(int, fields[3], "relevance", "an integer", path, line_no)
            _first_time(
                first_seen, qid, docno, path, line_no, "duplicate judgment of {d!r} for query {q!r}"
            )
            qrels.setdefault(qid, {})[docno] = rel
    return qrels


def read_run_with_runid(
    path: str | PathLike[str],
) -> tuple[dict[str, dict[str, float]], str | None]:
    """Read `qid iter docno rank score runid [ignored...]` lines; return (run, runid).

    As in trec_eval: the rank column is ignored (ranks come from the scores, see
    `rank_documents`), columns after runid are ignored (results.trunc has them), blank
    lines and lines whose first non-blank character is '#' are skipped, and the runid
    is the one on the last line. Stricter than trec_eval (which atof()s garbage to 0):
    a non-numeric or NaN score raises MalformedLineError, and so does a document
    retrieved twice for one query (trec_eval aborts on that too, without a line).
    """
    run: dict[str, dict[str, float]] = {}
    first_seen: dict[tuple[str, str], int] = {}
    qid_cache: dict[bytes, str] = {}
    runid_raw: bytes | None = None
    with open(path, "rb") as f:
        for line_no, raw in enumerate(f, start=1):
            fields = raw.split()
            if not fields or fields[0].startswith(b"#"):
                continue
            if len(fields) < 6:
                raise MalformedLineError(
                    path,
                    line_no,
                    f"expected 6 fields 'qid iter docno rank score runid', got {len(fields)}",
                )
            qid = qid_cache.get(fields[0])
            if qid is None:
                qid = qid_cache[fields[0]] = _decode(fields[0], path, line_no)
            docno = _decode(fields[2], path, line_no)
            score = _number(float, fields[4], "score", "a number", path, line_no)
            if math.isnan(score):
                raise MalformedLineError(path, line_no, "score is NaN")
            _first_time(
                first_seen,
                qid,
                docno,
                path,
                line_no,
                "document {d!r} retrieved twice for query {q!r}",
            )
            docs = run.get(qid)
            if docs is None:
                docs = run[qid] = {}
            docs[docno] = score
            runid_raw = fields[5]
    runid = None if runid_raw is None else runid_raw.decode("utf-8", errors="replace")
    return run, runid


def read_run(path: str | PathLike[str]) -> dict[str, dict[str, float]]:
    """Read a TREC run file (see `read_run_with_runid`)."""
    return read_run_with_runid(path)[0]


def read_runid(path: str | PathLike[str]) -> str | None:
    """The run's runid as trec_eval reports it: the runid column of the last line."""
    runid_raw: bytes | None = None
    with open(path, "rb") as f:
        for raw in f:
            fields = raw.split()
            if len(fields) >= 6 and not fields[0].startswith(b"#"):
                runid_raw = fields[5]
    return None if runid_raw is None else runid_raw.decode("utf-8", errors="replace")
