"""What every reader shares: records, the bad-record policy, line I/O and the parsing loops.

Why one module under all format families: a bad record must look the same whatever the format
(``BadRecord(path, line, problem)``, text ``<path>:<line>: <problem>``), be counted in the same
Beam counter and obey the same ``on_bad_record`` policy; and every line-based format must split
lines the same way (``\\n`` only, CR and a UTF-8 byte order mark dropped, undecodable bytes
reported on their line). So the format modules (``trec``, ``beir``, ``msmarco``, ``cranfield``)
only describe their syntax, and the loop that turns it into records or BadRecords is here once:

* ``parse_items``: items with a start line (lines, SGML blocks, SMART blocks) -> records, a
  ``RecordProblem`` raised while parsing one becoming ``BadRecord(path, its line, why)``;
* ``Columns``: the column formats (TREC qrels and runs, BEIR qrels, MS MARCO TSV, cranqrel):
  split, check the column count, convert typed columns (``integer``, ``finite_float``), and
  hand the values to the reader's record constructor.

Bad input (malformed lines, unterminated ``<DOC>``, empty text, non-UTF-8 bytes, duplicate ids)
becomes a ``BadRecord(path, line, problem)`` with the 1-based line where the bad record starts
(for undecodable bytes: the line holding them). ``on_bad_record="fail"`` raises
``BadRecordError`` ("<path>:<line>: <problem>"); ``"skip"`` drops the record and counts it in
the Beam counter ``rankpipe/bad_records_<kind>``.
"""

from __future__ import annotations

import gzip
import logging
import math
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from typing import Any, BinaryIO, ClassVar, Literal, NamedTuple, Union

# Error texts name the package, not this module: "components.ranking_datagen.readers.
# BadRecordError: <path>:<line>: ..." is what Beam workers send back and what callers match.
PACKAGE = __name__.rsplit(".", 1)[0]
logger = logging.getLogger(PACKAGE)

Policy = Literal["fail", "skip"]
POLICIES: tuple[str, ...] = ("fail", "skip")
METRICS_NAMESPACE = "rankpipe"
BAD_RECORDS_TAG = "bad_records"

# Reader kinds; each has its own counter "bad_records_<kind>".
DOCUMENTS = "documents"
QUERIES = "queries"
QRELS = "qrels"
RUN = "run"
KINDS: tuple[str, ...] = (DOCUMENTS, QUERIES, QRELS, RUN)


# --------------------------------------------------------------------------------------------
# Records. NamedTuples: immutable, and they pickle cheaply between Beam stages.
# --------------------------------------------------------------------------------------------


class Document(NamedTuple):
    docid: str
    text: str


class Query(NamedTuple):
    qid: str
    text: str


class Judgment(NamedTuple):
    qid: str
    docid: str
    relevance: int


class RunEntry(NamedTuple):
    qid: str
    docid: str
    score: float
    rank: int


class BadRecord(NamedTuple):
    path: str
    line: int  # 1-based; 0 when a collection-level check has no line to point at
    problem: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.problem}"


Record = Union[Document, Query, Judgment, RunEntry]


class BadRecordError(ValueError):
    """Raised for a bad record under ``on_bad_record="fail"``; message ``<path>:<line>: <why>``."""

    def __init__(self, bad_record: BadRecord) -> None:
        super().__init__(str(bad_record))
        self.bad_record = bad_record

    def __reduce__(self) -> tuple[Any, ...]:
        # Picklable, so the error survives being shipped back from a Beam worker.
        return (BadRecordError, (self.bad_record,))


class EmptyInputError(ValueError):
    """Files matching a collection key gave no record at all, not even a bad one: empty, or
    read as a block format that finds none of its blocks. Its own type (not a BadRecordError):
    there is no record to fix or skip, the key or the format is wrong (sniff.py's
    ``no_records_message`` says which)."""


for _public in (Document, Query, Judgment, RunEntry, BadRecord, BadRecordError, EmptyInputError):
    _public.__module__ = PACKAGE
del _public


def check_policy(on_bad_record: str) -> str:
    if on_bad_record not in POLICIES:
        raise ValueError(f"on_bad_record must be one of {POLICIES}, got {on_bad_record!r}")
    return on_bad_record


def bad_records_counter(kind: str) -> Any:
    """The Beam counter ``rankpipe/bad_records_<kind>`` (works inside and outside a pipeline)."""
    # Beam is imported where used (here and in beam_io.py): the pipeline config reads the
    # format registry, and `rankpipe config show` needs no Beam (which also loads TensorFlow:
    # seconds, and start-up warnings a user cannot act on).
    from apache_beam.metrics import Metrics

    return Metrics.counter(METRICS_NAMESPACE, f"bad_records_{kind}")


# --------------------------------------------------------------------------------------------
# File access
# --------------------------------------------------------------------------------------------

_CHUNK = 1 << 20


@contextmanager
def open_binary(path: str) -> Iterator[BinaryIO]:
    """Open ``path`` for binary reading via tf.io.gfile; gunzip when it ends in ``.gz``."""
    # Imported here: TensorFlow takes seconds to import and only file opening needs it.
    from tensorflow.io import gfile

    with ExitStack() as stack:
        f = stack.enter_context(gfile.GFile(path, "rb"))
        if path.endswith(".gz"):
            f = stack.enter_context(gzip.GzipFile(fileobj=f, mode="rb"))
        yield f


def raw_lines(f: BinaryIO) -> Iterator[bytes]:
    """A file's lines as bytes, without their b"\\n" (the readers' and the TREC grammar's)."""
    # Own splitting on b"\n" only: GFile.readline drops every "\r" and str.splitlines would
    # also split on \x1c, \u2028 etc., which occur inside real passages.
    pending = b""
    while True:
        chunk = f.read(_CHUNK)
        if not chunk:
            break
        parts = (pending + chunk).split(b"\n")
        pending = parts.pop()
        yield from parts
    if pending:
        yield pending


def iter_lines(path: str) -> Iterator[tuple[int, str] | BadRecord]:
    """Yield ``(line_number, text)`` per line (CR/LF stripped), or a BadRecord for a line that
    is not valid UTF-8."""
    with open_binary(path) as f:
        for number, raw in enumerate(raw_lines(f), start=1):
            if raw.endswith(b"\r"):
                raw = raw[:-1]
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as e:
                bad = raw[e.start : e.start + 4]
                yield BadRecord(
                    path, number, f"undecodable bytes (not UTF-8) at column {e.start + 1}: {bad!r}"
                )
                continue
            if number == 1 and text.startswith("\ufeff"):
                text = text[1:]  # UTF-8 byte order mark
            yield number, text


def record_lines(path: str, comments: bool) -> Iterator[tuple[int, str] | BadRecord]:
    """``iter_lines`` without the lines that carry no record: blank ones (e.g. a trailing one)
    and, when ``comments``, those starting with ``#``."""
    for item in iter_lines(path):
        if not isinstance(item, BadRecord):
            stripped = item[1].strip()
            if not stripped or (comments and stripped.startswith("#")):
                continue
        yield item


def collapse(text: str) -> str:
    return " ".join(text.split())


# --------------------------------------------------------------------------------------------
# Reader base classes
# --------------------------------------------------------------------------------------------


class Parsed(NamedTuple):
    line: int  # where the record starts
    record: Record
    context: str = ""  # appended to problem messages, e.g. " (.I 004)"


class Reader(ABC):
    """Base of all readers. Subclasses set ``kind`` and implement ``_parse``.

    Args:
      on_bad_record: "fail" raises BadRecordError at the first bad record; "skip" drops it and
        increments the Beam counter ``rankpipe/bad_records_<kind>``.
      check_duplicates: report a repeated id (docid, qid, or qid+docid pair) within one file.
        Each file is read whole by one worker, so a per-file set of ids is enough here; across
        sharded files, duplicates must be checked at collection level. The set costs memory
        (~100 bytes per id); turn it off for very large files checked elsewhere.
    """

    kind: ClassVar[str]

    def __init__(self, on_bad_record: Policy = "fail", check_duplicates: bool = True) -> None:
        self.on_bad_record = check_policy(on_bad_record)
        self.check_duplicates = check_duplicates

    def __repr__(self) -> str:
        return f"{type(self).__name__}({vars(self)!r})"

    @abstractmethod
    def _parse(self, path: str) -> Iterator[Parsed | BadRecord]:
        """Yield parsed records with their start line, and BadRecords for malformed input."""

    def _check(self, path: str, parsed: Parsed) -> BadRecord | None:
        """Per-record semantic check after parsing (e.g. empty text); None when fine."""
        return None

    @staticmethod
    def key(record: Record) -> Any:
        """What makes a record a duplicate of another (the collection checks across files)."""
        return record[0]

    @staticmethod
    def describe_key(record: Record) -> str:
        """``key`` in problem messages: "docid 'd1'", "pair qid 'q1' docid 'd1'"."""
        return f"{record._fields[0]} {record[0]!r}"

    def read_with_errors(self, path: str) -> Iterator[Record | BadRecord]:
        """Yield records and BadRecord values in file order; no policy, no counting."""
        for item in self.read_with_lines(path):
            yield item if isinstance(item, BadRecord) else item[1]

    def read_with_lines(self, path: str) -> Iterator[tuple[int, Record] | BadRecord]:
        """Like ``read_with_errors``, with each good record as ``(start_line, record)``, so that
        collection-level checks (a judged docid missing from the corpus...) can name the line.

        A file whose first record already fails to parse may be in another format: its
        BadRecord then says which (``sniff.diagnose_first_record``: "looks like BEIR corpus
        (JSON lines), not msmarco_tsv (...): set collection.documents_format: beir_corpus").
        When the file surely is in another format, every record of it would be bad, so that
        one is raised as BadRecordError whatever the policy: skipping would drop the file."""
        path = str(path)
        seen: dict[Any, int] = {}
        first = True
        for item in self._parse(path):
            if isinstance(item, BadRecord):
                if first:
                    item = self._first_record_failed(item)
                first = False
                yield item
                continue
            first = False
            bad = self._check(path, item)
            if bad is not None:
                yield bad
                continue
            if self.check_duplicates:
                key = self.key(item.record)
                first = seen.get(key)
                if first is not None:
                    yield BadRecord(
                        path,
                        item.line,
                        f"duplicate {self.describe_key(item.record)}{item.context}"
                        f" (first seen at line {first})",
                    )
                    continue
                seen[key] = item.line
            yield item.line, item.record

    def _first_record_failed(self, bad: BadRecord) -> BadRecord:
        """``bad`` (the file's first record) with the cause the file's first lines suggest;
        raises it when the file is in another format (see ``read_with_lines``)."""
        # Here, not at the top: sniff names formats by the registry, which imports this module.
        from components.ranking_datagen.readers import sniff

        diagnosis = sniff.diagnose_first_record(
            bad.path, self.kind, sniff.format_name(self), bad.problem
        )
        if diagnosis is None:
            return bad
        bad = bad._replace(problem=diagnosis.problem)
        if diagnosis.certain:
            raise BadRecordError(bad)
        return bad

    def read(self, path: str) -> Iterator[Record]:
        """Yield the file's good records, applying ``on_bad_record`` to the bad ones."""
        counter = bad_records_counter(self.kind)
        skipped = 0
        for item in self.read_with_errors(path):
            if isinstance(item, BadRecord):
                counter.inc()
                if self.on_bad_record == "fail":
                    raise BadRecordError(item)
                skipped += 1
                continue
            yield item
        if skipped:
            logger.warning("%s: skipped %d bad %s record(s)", path, skipped, self.kind)


class TextRecordReader(Reader):
    """Readers of documents/queries: empty text is a bad record unless allowed."""

    def __init__(
        self,
        on_bad_record: Policy = "fail",
        check_duplicates: bool = True,
        allow_empty_text: bool = False,
    ) -> None:
        super().__init__(on_bad_record, check_duplicates)
        self.allow_empty_text = allow_empty_text

    def _check(self, path: str, parsed: Parsed) -> BadRecord | None:
        record = parsed.record
        if not self.allow_empty_text and not record.text.strip():
            return BadRecord(
                path, parsed.line, f"empty text for {self.describe_key(record)}{parsed.context}"
            )
        return None


class PairReader(Reader):
    """Readers of qrels/runs: the duplicate key is the (qid, docid) pair."""

    @staticmethod
    def key(record: Record) -> Any:
        return (record.qid, record.docid)

    @staticmethod
    def describe_key(record: Record) -> str:
        return f"pair qid {record.qid!r} docid {record.docid!r}"


# --------------------------------------------------------------------------------------------
# The one parsing loop: located items -> records or BadRecords
# --------------------------------------------------------------------------------------------


class RecordProblem(Exception):
    """Raised while parsing one item; becomes ``BadRecord(path, item line, str(problem))``."""


def parse_items(
    path: str,
    items: Iterable[tuple[Any, ...] | BadRecord],
    parse: Callable[[Any], Record | Parsed | None],
) -> Iterator[Parsed | BadRecord]:
    """Turn ``items`` (tuples whose first field is their start line: ``(line, text)`` from
    ``record_lines``, or a format's blocks) into ``Parsed`` records, passing BadRecords through.
    ``parse(item)`` returns a Record (or a ``Parsed`` with its own context), None to skip the
    item (a header line), or raises RecordProblem."""
    for item in items:
        if isinstance(item, BadRecord):
            yield item
            continue
        try:
            result = parse(item)
        except RecordProblem as problem:
            yield BadRecord(path, item[0], str(problem))
            continue
        if result is not None:
            yield result if isinstance(result, Parsed) else Parsed(item[0], result)


def integer(what: str) -> Callable[[str], int]:
    """Column parser: int, else RecordProblem "non-integer <what> '<value>'"."""

    def parse(value: str) -> int:
        try:
            return int(value)
        except ValueError:
            raise RecordProblem(f"non-integer {what} {value!r}") from None

    return parse


def finite_float(what: str) -> Callable[[str], float]:
    """Column parser: a finite float, else "non-numeric <what> ..." / "non-finite <what> ..."."""

    def parse(value: str) -> float:
        try:
            number = float(value)
        except ValueError:
            raise RecordProblem(f"non-numeric {what} {value!r}") from None
        if not math.isfinite(number):
            raise RecordProblem(f"non-finite {what} {value!r}")
        return number

    return parse


@dataclass(frozen=True)
class Columns:
    """A one-record-per-line column format, e.g. TREC qrels ``qid iter docid rel``.

    Each line is split (on any whitespace, or on tabs with each column stripped), must have
    ``len(names)`` columns (or at least that many with ``extra_ignored``), and the columns
    named in ``types`` are converted in column order; the first failure is the line's
    BadRecord. The values then go to the reader's ``make(*values)``, which may raise
    RecordProblem for row-level checks (an empty id, an unknown relevance code).
    """

    names: tuple[str, ...]
    types: Mapping[str, Callable[[str], Any]] = field(default_factory=dict)
    tab_separated: bool = False
    extra_ignored: bool = False  # columns after the last named one are ignored (TREC runs)
    comments: bool = True  # lines starting with "#" carry no record
    header: tuple[str, ...] = ()  # leading columns of an optional header on line 1

    def problem(self, count: int) -> str:
        n = len(self.names)
        if self.tab_separated:
            return f"expected {n} tab-separated columns ({', '.join(self.names)}), got {count}"
        return f"expected {n} columns ({' '.join(self.names)}), got {count}"

    def values(self, line: tuple[int, str]) -> list[Any] | None:
        """The line's typed column values; None for a header line."""
        number, text = line
        cols = [c.strip() for c in text.split("\t")] if self.tab_separated else text.split()
        if self.header and number == 1 and tuple(cols[: len(self.header)]) == self.header:
            return None
        if len(cols) < len(self.names) or (len(cols) > len(self.names) and not self.extra_ignored):
            raise RecordProblem(self.problem(len(cols)))
        values: list[Any] = cols[: len(self.names)]
        for index, name in enumerate(self.names):
            if name in self.types:
                values[index] = self.types[name](values[index])
        return values

    def parse(self, path: str, make: Callable[..., Record]) -> Iterator[Parsed | BadRecord]:
        """Records of the file at ``path``, one per line, made by ``make(*values)``."""

        def parse_line(line: tuple[int, str]) -> Record | None:
            values = self.values(line)
            return None if values is None else make(*values)

        return parse_items(path, record_lines(path, self.comments), parse_line)
