"""TREC run and qrels readers for the metrics, with file:line errors (ir_measures' `util.py`
parse_trec_qrels / parse_trec_run counterpart): the evaluator, the Trainer's validation and
`rankpipe eval` all read through it.

TREC lines are parsed by rankcore/trec.py, the one TREC grammar (as trec_eval v10 reads them,
but what trec_eval would atol()/atof() to 0 is an error; the grammar and every decision on a
dialect are listed there), which RankingDataGen's `trec_qrels`/`trec_run` readers use too: a
file means the same to the pipeline and to its metrics. Here the "fail" policy: the first bad
line raises MalformedLineError. The runs rankpipe writes come from rankcore/trec.py as well.

`read_qrels` also reads the other judgment formats the pipeline takes as `collection.qrels`
(`QRELS_FORMATS`, the names of components/ranking_datagen/readers' registry): BEIR's
`qrels/*.tsv` and Cranfield's `cranqrel`, into the same qid -> {docid: grade} with the grades
RankingDataGen gives them, so that `rankpipe eval` scores a run against a collection's own
judgment file exactly as the pipeline judges it. Here rather than through the datagen readers:
those import Apache Beam and open files with TensorFlow (seconds, and start-up noise, for a
command that reads two text files), and rankcore may not import components; a test holds the
two to the same records on the shared collections
(tests/components/ranking_evaluator/test_eval_cli.py).
"""

from __future__ import annotations

from collections.abc import Callable
from os import PathLike
from typing import TypeVar

from rankcore.trec import (
    MalformedLineError,
    QrelsLine,
    RunLine,
    iter_records,
    open_lines,
    parse_lines,
    parse_qrels_line,
    parse_run_line,
)

__all__ = [
    "QRELS_FORMATS",
    "MalformedLineError",
    "detect_qrels_format",
    "read_qrels",
    "read_run",
    "read_run_with_runid",
    "read_runid",
]

# collection.qrels_format's names (components/ranking_datagen/readers READERS["qrels"]).
TREC_QRELS, BEIR_QRELS, CRANFIELD_QRELS = "trec_qrels", "beir_qrels", "cranfield"
QRELS_FORMATS: tuple[str, ...] = (TREC_QRELS, BEIR_QRELS, CRANFIELD_QRELS)
# BEIR's header line (its README, "Load your own dataset"): query-id<TAB>corpus-id<TAB>score.
BEIR_HEADER = (b"query-id", b"corpus-id")
_BOM = b"\xef\xbb\xbf"


N = TypeVar("N", int, float)


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


def _beir_judgment(raw: bytes, line_no: int) -> tuple[bytes, bytes, bytes] | str | None:
    # BEIR's TSV: tab-separated, each column stripped (so CRLF files read), an optional header
    # on line 1, no comment syntax: as RankingDataGen's BeirQrels reads it.
    fields = [f.strip() for f in raw.split(b"\t")]
    if line_no == 1 and tuple(fields[:2]) == BEIR_HEADER:
        return None
    if len(fields) != 3:
        return f"expected 3 tab-separated fields 'query-id corpus-id score', got {len(fields)}"
    if not fields[0] or not fields[1]:
        return "empty query-id or corpus-id"
    return fields[0], fields[1], fields[2]


def _cranfield_gain(code: int) -> int | None:
    """Cranfield's relevance code -> gain, as RankingDataGen's CranfieldQrels maps it: codes 1..5
    of Cleverdon's scale (1 = complete answer) -> 5 - code, and -1 (one line per query) -> 0,
    judged non-relevant (../shared/README.md; cranqrel.readme)."""
    if code == -1:
        return 0
    return 5 - code if 1 <= code <= 5 else None


def read_qrels(
    path: str | PathLike[str], qrels_format: str = TREC_QRELS
) -> dict[str, dict[str, int]]:
    """Read judgments as {qid: {docno: grade}}; `qrels_format` is one of QRELS_FORMATS or
    "auto" (`detect_qrels_format`).

    trec_qrels, `qid iter docno rel` (trec_eval's format), in rankcore/trec.py's grammar:
    fields split on ASCII whitespace, exactly 4, an ASCII integer relevance, blank lines and
    lines whose first non-blank character is '#' skipped, '.gz' files gunzipped; a bad line or
    a repeated (qid, docno) raises MalformedLineError.

    beir_qrels, `query-id<TAB>corpus-id<TAB>score` with or without that header line; cranfield,
    `qid docid code` with Cleverdon's codes mapped to gains (`_cranfield_gain`): the same
    records as RankingDataGen's readers of those formats, with the same strictness as above.
    """
    if qrels_format == "auto":
        qrels_format = detect_qrels_format(path)
    if qrels_format not in QRELS_FORMATS:
        raise ValueError(
            f"unknown qrels format {qrels_format!r}; known: {', '.join(QRELS_FORMATS)}"
        )
    qrels: dict[str, dict[str, int]] = {}
    if qrels_format == TREC_QRELS:
        for _, judgment in iter_records(path, parse_qrels_line):
            assert isinstance(judgment, QrelsLine)
            qrels.setdefault(judgment.qid, {})[judgment.docno] = judgment.rel
        return qrels
    first_seen: dict[tuple[str, str], int] = {}
    with open(path, "rb") as f:
        for line_no, raw in enumerate(f, start=1):
            if qrels_format == BEIR_QRELS:
                if line_no == 1 and raw.startswith(_BOM):
                    raw = raw[len(_BOM) :]
                if not raw.strip():
                    continue
                parsed = _beir_judgment(raw, line_no)
                if parsed is None:
                    continue
            else:
                if raw.startswith(b"#"):
                    continue
                fields = raw.split()
                if not fields:
                    continue
                if len(fields) != 3:
                    parsed = f"expected 3 fields 'qid docid code' (cranqrel), got {len(fields)}"
                else:
                    parsed = (fields[0], fields[1], fields[2])
            if isinstance(parsed, str):
                raise MalformedLineError(path, line_no, parsed)
            qid = _decode(parsed[0], path, line_no)
            docno = _decode(parsed[1], path, line_no)
            rel = _number(int, parsed[2], "relevance", "an integer", path, line_no)
            if qrels_format == CRANFIELD_QRELS:
                gain = _cranfield_gain(rel)
                if gain is None:
                    problem = f"unknown Cranfield relevance code {rel} (expected 1..5 or -1)"
                    raise MalformedLineError(path, line_no, problem)
                rel = gain
            _first_time(
                first_seen, qid, docno, path, line_no, "duplicate judgment of {d!r} for query {q!r}"
            )
            qrels.setdefault(qid, {})[docno] = rel
    return qrels


def detect_qrels_format(path: str | PathLike[str]) -> str:
    """The qrels format of the file at `path`, from its first line that is not blank or a
    '#' comment: BEIR's header or 3 tab-separated fields -> beir_qrels; else trec_qrels (4
    fields; a malformed line is then reported as trec_eval's format). 3 space-separated fields
    raise MalformedLineError: Cranfield's cranqrel looks like that, and reading its relevance
    codes as grades would score silently wrong, so that format must be named."""
    with open(path, "rb") as f:
        for line_no, raw in enumerate(f, start=1):
            if line_no == 1 and raw.startswith(_BOM):
                raw = raw[len(_BOM) :]
            if not raw.strip() or raw.startswith(b"#"):
                continue
            tabbed = [c.strip() for c in raw.split(b"\t")]
            if tuple(tabbed[:2]) == BEIR_HEADER or len(tabbed) == 3:
                return BEIR_QRELS
            if len(raw.split()) == 3:
                raise MalformedLineError(
                    path,
                    line_no,
                    "cannot tell the qrels format: 3 space-separated fields, as in Cranfield's "
                    "cranqrel (relevance codes; name the format: cranfield) or a BEIR qrels "
                    "file without its tabs; TREC qrels have 4 fields",
                )
            return TREC_QRELS
    return TREC_QRELS


def read_run_with_runid(
    path: str | PathLike[str],
) -> tuple[dict[str, dict[str, float]], str | None]:
    """Read `qid iter docno rank score runid [ignored...]` lines; return (run, runid).

    In rankcore/trec.py's grammar, as trec_eval reads runs: the rank column is not used
    (ranks come from the scores, see `rank_documents`; it must be an integer), columns after
    runid are ignored (results.trunc has them), blank lines and lines whose first non-blank
    character is '#' are skipped, and the runid is the one on the last line. Stricter than
    trec_eval (which atof()s garbage to 0): a score that is not a finite decimal number, or a
    document retrieved twice for one query (trec_eval aborts on that too, without a line),
    raises MalformedLineError.
    """
    run: dict[str, dict[str, float]] = {}
    runid: str | None = None
    for _, entry in iter_records(path, parse_run_line):
        assert isinstance(entry, RunLine)
        docs = run.get(entry.qid)
        if docs is None:
            docs = run[entry.qid] = {}
        docs[entry.docno] = entry.score
        runid = entry.runid
    return run, runid


def read_run(path: str | PathLike[str]) -> dict[str, dict[str, float]]:
    """Read a TREC run file (see `read_run_with_runid`)."""
    return read_run_with_runid(path)[0]


def read_runid(path: str | PathLike[str]) -> str | None:
    """The run's runid as trec_eval reports it: the runid column of the last line (bad lines
    are passed over here; reading the run reports them)."""
    runid: str | None = None
    with open_lines(path) as f:
        for _, entry in parse_lines(f, parse_run_line, check_duplicates=False):
            if isinstance(entry, RunLine):
                runid = entry.runid
    return runid
