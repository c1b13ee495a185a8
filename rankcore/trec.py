"""TREC qrels and run files: the one grammar that reads them and the one writer of runs.

Read: every TREC qrels or run file rankpipe takes goes through `parse_qrels_line` /
`parse_run_line` (RankingDataGen's `trec_qrels`/`trec_run` readers, components/ranking_datagen/
readers/trec.py, and rankcore.metrics' readers for the evaluator, the Trainer's validation and
`rankpipe eval`), so one file means the same thing to the pipeline and to its metrics, and a
line is bad for both or for neither. `iter_records`/`read_lines` apply the two error policies:
"fail" stops at the first bad line (`MalformedLineError`, "<path>:<line>: <reason>"), "skip"
drops bad lines and reports them counted by reason (`SkippedLines`).

Write: RankingDataGen's first-stage run, the RankingEvaluator's run files and `rankpipe rerank`
all write through `format_run`/`write_run`, so every run the pipeline writes has the same layout
and reads back the same way. In rankcore, the lowest layer: the readers and writers are in
independent components (RankingDataGen, the evaluator), and every layer above may import it.

THE GRAMMAR. trec_eval v10 (get_qrels.c, get_trec_results.c; its test inputs in
../shared/data/trec_eval) is the reference: what it reads, we read the same way, except that
where it would silently read garbage as 0 (atol/atof) we reject the line. Each difference
between the two readers this replaced (M: rankcore.metrics.readers, D: RankingDataGen's
readers/trec.py), with trec_eval (T) and the decision:

  item                          M before     D before     T            decision
  ----------------------------  -----------  -----------  -----------  -------------------------
  '#' in column 1               comment      comment      comment      comment
  '#' after blanks (indented)   run: comment comment      run: comment comment, qrels too (T reads
                                qrels: data               qrels: data  a query '#' no run has)
  '#' inside a field            data         data         data         data (CR#93E-1860 docno)
  blank / whitespace-only line  skipped      skipped      run: skip,   skipped (files end with
                                                          qrels: error one; T skips them in runs)
  UTF-8 BOM at file start       in 1st qid   stripped     in 1st qid   stripped (line 1 only)
  CRLF line ends                ok           ok           ok           ok
  separators                    ASCII space  any Unicode  C isspace    ASCII whitespace only,
                                             space                     " \\t\\n\\r\\v\\f" (= T);
                                                                       U+00A0, U+3000, \\x1c..
                                                                       stay inside a field
  NUL byte                      in field     in field     undefined    bad line
  bad UTF-8                     bad only in  bad line     bytes        bad line, wherever in
                                qid/docno                              the line (ids are text);
                                                                       not in comment lines
  qrels field count             exactly 4    exactly 4    exactly 4    exactly 4
  run field count               >= 6         >= 6         >= 6         >= 6, extra ignored
                                                                       (results.trunc has them)
  relevance '1.5', 'yes'        bad          bad          atol: 1, 0   bad
  relevance '+1', '007', '-1'   ok           ok           ok           ok
  relevance '1_0'               ok (10)      ok (10)      atol: 1      bad
  relevance Arabic-Indic '١'    bad          ok (1)       atol: 0      bad (ASCII digits only)
  rank 'x'                      ignored      bad          ignored      bad: a non-integer rank
                                                                       is a shifted column
  score 'high', '2.5abc'        bad          bad          atof: 0, 2.5 bad
  score 'nan'                   bad          bad          nan          bad
  score 'inf', '-inf', '1e999'  ok (inf)     bad          inf          bad (fusion and feedback
                                                                       need finite scores)
  score '1_0'                   ok (10)      ok (10)      atof: 1      bad (ASCII decimal only)
  score Arabic-Indic '١'        bad          ok (1.0)     atof: 0      bad
  score '.5', '5.', '1e-3', '+2' ok          ok           ok           ok
  (qid, docno) twice            bad          bad          run: abort   bad (first one kept
                                                                       under "skip")
  runid                         last line's  unread       last line's  last content line's
  '.gz' file name               raw (fails)  gunzipped    raw bytes    gunzipped (TREC ships
                                                                       runs and qrels gzipped)

Scores are written with repr(), which round-trips exactly: reading the file back gives the same
floats, so trec_eval on the file ranks it as it was ranked here, and no two documents that
differ in score get the same printed score (a rounded score could create ties that trec_eval
would break differently from the rank column).

No TensorFlow at import (the CLI reads and formats runs without it); `write_run` loads it.
"""

from __future__ import annotations

import gzip
import logging
import math
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from os import PathLike, fspath
from typing import BinaryIO, Literal, NamedTuple, Union

__all__ = [
    "POLICIES",
    "QRELS_COLUMNS",
    "REASONS",
    "RUN_COLUMNS",
    "LineProblem",
    "MalformedLineError",
    "QrelsLine",
    "RunLine",
    "SkippedLines",
    "format_run",
    "iter_records",
    "open_lines",
    "parse_lines",
    "parse_qrels_line",
    "parse_run_line",
    "read_lines",
    "read_qrels_lines",
    "read_run_lines",
    "write_run",
]

logger = logging.getLogger(__name__)

# The columns of a run line, as trec_eval's README names them (rankpipe writes "Q0" in the
# second, which trec_eval ignores), and of a qrels line (NIST's "TOPIC ITERATION DOCUMENT#
# RELEVANCY").
RUN_COLUMNS: tuple[str, ...] = ("qid", "Q0", "docid", "rank", "score", "runid")
QRELS_COLUMNS: tuple[str, ...] = ("qid", "iter", "docid", "rel")

Policy = Literal["fail", "skip"]
POLICIES: tuple[str, ...] = ("fail", "skip")

# Why a line is bad: the keys `SkippedLines.counts` reports under "skip".
NOT_UTF8 = "not_utf8"
NUL_BYTE = "nul_byte"
FIELD_COUNT = "field_count"
NOT_INTEGER = "not_integer"  # relevance or rank
NOT_NUMBER = "not_number"  # score
NOT_FINITE = "not_finite"  # score nan / inf
DUPLICATE = "duplicate"  # (qid, docno) seen before in the file
REASONS: tuple[str, ...] = (
    NOT_UTF8,
    NUL_BYTE,
    FIELD_COUNT,
    NOT_INTEGER,
    NOT_NUMBER,
    NOT_FINITE,
    DUPLICATE,
)

_BOM = b"\xef\xbb\xbf"


class QrelsLine(NamedTuple):
    qid: str
    docno: str
    rel: int


class RunLine(NamedTuple):
    qid: str
    docno: str
    rank: int
    score: float
    runid: str


@dataclass(frozen=True)
class LineProblem:
    """Why one line is bad, as data: each reader words it its own way (`message` is rankcore's;
    RankingDataGen's readers keep the wording of their other formats).

    reason: one of REASONS. column: the QRELS_COLUMNS / RUN_COLUMNS name concerned ("rel",
    "rank", "score"; "" when none). value: the offending field as text. count: the field count
    (FIELD_COUNT), the column where undecodable bytes start, 0-based (NOT_UTF8), or the line
    first holding the pair (DUPLICATE). detail: the UnicodeDecodeError reason (NOT_UTF8).
    raw: up to 4 undecodable bytes (NOT_UTF8). qrels: whether the line is a qrels line (False:
    a run line), for the wording of `message`."""

    reason: str
    column: str = ""
    value: str = ""
    count: int = 0
    detail: str = ""
    raw: bytes = b""
    qrels: bool = True

    @property
    def message(self) -> str:
        """The problem as rankcore.metrics reports it (MalformedLineError, SkippedLines)."""
        if self.reason == NOT_UTF8:
            return f"not valid UTF-8 ({self.detail})"
        if self.reason == NUL_BYTE:
            return "NUL byte in line (trec_eval reads no NUL)"
        if self.reason == FIELD_COUNT:
            if self.qrels:
                return f"expected 4 fields 'qid iter docno rel', got {self.count}"
            return f"expected 6 fields 'qid iter docno rank score runid', got {self.count}"
        name = {"rel": "relevance"}.get(self.column, self.column)
        if self.reason == NOT_INTEGER:
            return f"{name} {self.value!r} is not an integer"
        if self.reason == NOT_NUMBER:
            return f"{name} {self.value!r} is not a number"
        if self.reason == NOT_FINITE:
            if self.value.lower() == "nan":
                return "score is NaN"
            return f"score {self.value!r} is not finite"
        what = "duplicate judgment of {d!r} for query {q!r}"
        if not self.qrels:
            what = "document {d!r} retrieved twice for query {q!r}"
        qid, _, docno = self.value.partition(" ")
        return f"{what.format(d=docno, q=qid)} (first at line {self.count})"


Parsed = Union[QrelsLine, RunLine]
LineParser = Callable[[bytes], Union[Parsed, LineProblem, None]]


def _record_fields(raw: bytes, qrels: bool) -> list[bytes] | LineProblem | None:
    """The line's fields (split on ASCII whitespace, so its LF or CRLF end goes too); None for
    a blank line or a comment (first non-blank character '#', never decoded); a LineProblem for
    a NUL byte or bytes that are not UTF-8."""
    fields = raw.split()
    if not fields or fields[0].startswith(b"#"):
        return None
    if raw.isascii() and b"\x00" not in raw:  # the common case, checked fast
        return fields
    if b"\x00" in raw:
        return LineProblem(NUL_BYTE, qrels=qrels)
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        bad = raw[exc.start : exc.start + 4]
        return LineProblem(NOT_UTF8, count=exc.start, detail=exc.reason, raw=bad, qrels=qrels)
    return fields


def _integer(raw: bytes, column: str, qrels: bool) -> int | LineProblem:
    # int(bytes) takes ASCII digits only, but also '1_0': hence the underscore check.
    if b"_" not in raw:
        try:
            return int(raw)
        except ValueError:
            pass
    return LineProblem(NOT_INTEGER, column, raw.decode(), qrels=qrels)


def _score(raw: bytes) -> float | LineProblem:
    # float(bytes) takes ASCII decimal numbers ('.5', '5.', '-1E+2'), and also '1_0', 'nan',
    # 'inf', 'infinity': those are caught after it.
    try:
        score = float(raw)
    except ValueError:
        return LineProblem(NOT_NUMBER, "score", raw.decode(), qrels=False)
    if not math.isfinite(score):  # nan, inf, 1e999
        return LineProblem(NOT_FINITE, "score", raw.decode(), qrels=False)
    if b"_" in raw:
        return LineProblem(NOT_NUMBER, "score", raw.decode(), qrels=False)
    return score


def parse_qrels_line(raw: bytes) -> QrelsLine | LineProblem | None:
    """One qrels line `qid iter docno rel` (with or without its line end) -> QrelsLine, a
    LineProblem, or None for a blank or comment line. See the grammar at the top."""
    fields = _record_fields(raw, qrels=True)
    if fields is None or isinstance(fields, LineProblem):
        return fields
    if len(fields) != len(QRELS_COLUMNS):
        return LineProblem(FIELD_COUNT, count=len(fields))
    rel = _integer(fields[3], "rel", qrels=True)
    if isinstance(rel, LineProblem):
        return rel
    return QrelsLine(fields[0].decode(), fields[2].decode(), rel)


def parse_run_line(raw: bytes) -> RunLine | LineProblem | None:
    """One run line `qid Q0 docno rank score runid [ignored...]` -> RunLine, a LineProblem, or
    None for a blank or comment line. See the grammar at the top."""
    fields = _record_fields(raw, qrels=False)
    if fields is None or isinstance(fields, LineProblem):
        return fields
    if len(fields) < len(RUN_COLUMNS):
        return LineProblem(FIELD_COUNT, count=len(fields), qrels=False)
    try:  # the fast path of _integer and _score (runs have millions of lines)
        rank, score = int(fields[3]), float(fields[4])
        fast = math.isfinite(score) and b"_" not in fields[3] and b"_" not in fields[4]
    except ValueError:
        fast = False
    if not fast:
        rank = _integer(fields[3], "rank", qrels=False)
        if isinstance(rank, LineProblem):
            return rank
        score = _score(fields[4])
        if isinstance(score, LineProblem):
            return score
    return RunLine(fields[0].decode(), fields[2].decode(), rank, score, fields[5].decode())


def parse_lines(
    lines: Iterable[bytes], parse: LineParser, check_duplicates: bool = True
) -> Iterator[tuple[int, Parsed | LineProblem]]:
    """(1-based line number, record or problem) for each line that is not blank or a comment.
    A UTF-8 byte order mark opening line 1 is dropped. With `check_duplicates`, a (qid, docno)
    seen on an earlier line is a DUPLICATE problem (the first stays a record)."""
    first_seen: dict[tuple[str, str], int] = {}
    for line_no, raw in enumerate(lines, start=1):
        if line_no == 1 and raw.startswith(_BOM):
            raw = raw[len(_BOM) :]
        item = parse(raw)
        if item is None:
            continue
        if check_duplicates and not isinstance(item, LineProblem):
            first = first_seen.setdefault((item.qid, item.docno), line_no)
            if first != line_no:
                is_qrels = isinstance(item, QrelsLine)
                value = f"{item.qid} {item.docno}"
                item = LineProblem(DUPLICATE, value=value, count=first, qrels=is_qrels)
        yield line_no, item


class MalformedLineError(ValueError):
    """A bad line under the "fail" policy, "<path>:<line>: <reason>": of a TREC file, or of
    the other judgment formats rankcore.metrics reads (BEIR, cranqrel)."""

    def __init__(self, path: str | PathLike[str], line_no: int, problem: str) -> None:
        super().__init__(f"{fspath(path)}:{line_no}: {problem}")
        self.path = fspath(path)
        self.line_no = line_no
        self.problem = problem


@dataclass
class SkippedLines:
    """The bad lines the "skip" policy dropped from one file: how many per reason, and the first
    of each reason (line, message) so that the report points at one to fix."""

    path: str
    counts: Counter[str] = field(default_factory=Counter)
    first: dict[str, tuple[int, str]] = field(default_factory=dict)

    def add(self, line_no: int, problem: LineProblem) -> None:
        self.counts[problem.reason] += 1
        self.first.setdefault(problem.reason, (line_no, problem.message))

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    def __str__(self) -> str:
        parts = [
            f"{n} {reason} (first: line {self.first[reason][0]}: {self.first[reason][1]})"
            for reason, n in sorted(self.counts.items())
        ]
        return f"{self.path}: skipped {self.total} bad line(s): " + "; ".join(parts)


def open_lines(path: str | PathLike[str]) -> BinaryIO:
    """The local file at `path` for reading in binary, gunzipped when its name ends in '.gz'."""
    if fspath(path).endswith(".gz"):
        return gzip.open(path, "rb")  # type: ignore[return-value]
    return open(path, "rb")


def iter_records(
    path: str | PathLike[str],
    parse: LineParser,
    on_bad_line: Policy = "fail",
    skipped: SkippedLines | None = None,
) -> Iterator[tuple[int, Parsed]]:
    """(line number, record) for each good line of the local file at `path`, read with `parse`
    (`parse_qrels_line` or `parse_run_line`) under a policy: "fail" raises MalformedLineError at
    the first bad line; "skip" leaves bad lines out, counts them by reason in `skipped` (when
    given) and logs one warning that sums them up at the end. A generator, so that a caller
    building its own table never holds every line's record at once (runs have millions)."""
    if on_bad_line not in POLICIES:
        raise ValueError(f"on_bad_line must be one of {POLICIES}, got {on_bad_line!r}")
    if skipped is None:
        skipped = SkippedLines(fspath(path))
    with open_lines(path) as f:
        for line_no, item in parse_lines(f, parse):
            if isinstance(item, LineProblem):
                if on_bad_line == "fail":
                    raise MalformedLineError(path, line_no, item.message)
                skipped.add(line_no, item)
            else:
                yield line_no, item
    if skipped.total:
        logger.warning("%s", skipped)


def read_lines(
    path: str | PathLike[str], parse: LineParser, on_bad_line: Policy = "fail"
) -> tuple[list[tuple[int, Parsed]], SkippedLines]:
    """`iter_records` as a list, with the SkippedLines report ("skip": the bad lines by
    reason; empty under "fail", which raises at the first)."""
    skipped = SkippedLines(fspath(path))
    return list(iter_records(path, parse, on_bad_line, skipped)), skipped


def read_qrels_lines(
    path: str | PathLike[str], on_bad_line: Policy = "fail"
) -> tuple[list[tuple[int, QrelsLine]], SkippedLines]:
    """`read_lines` of a TREC qrels file."""
    return read_lines(path, parse_qrels_line, on_bad_line)  # type: ignore[return-value]


def read_run_lines(
    path: str | PathLike[str], on_bad_line: Policy = "fail"
) -> tuple[list[tuple[int, RunLine]], SkippedLines]:
    """`read_lines` of a TREC run file."""
    return read_lines(path, parse_run_line, on_bad_line)  # type: ignore[return-value]


# --------------------------------------------------------------------------------------------
# Writing
# --------------------------------------------------------------------------------------------


def format_run(ranked: Mapping[str, Iterable[tuple[str, float]]], runid: str) -> str:
    """TREC run text: queries in sorted order, each query's (docid, score) list in its given
    order with ranks 1..n (rank 1 first). The caller orders the lists (e.g. trec_eval's order,
    rankcore.metrics.rank_documents) and gives a one-word runid."""
    return "".join(
        f"{qid} Q0 {docid} {rank} {score!r} {runid}\n"
        for qid in sorted(ranked)
        for rank, (docid, score) in enumerate(ranked[qid], 1)
    )


def write_run(path: str, ranked: Mapping[str, Iterable[tuple[str, float]]], runid: str) -> None:
    """`format_run` to `path` (local or any tf.io.gfile URI) through a temporary file and a
    rename: a reader never sees a half-written run."""
    from rankcore.file_io import write_text_atomic

    write_text_atomic(path, format_run(ranked, runid))
