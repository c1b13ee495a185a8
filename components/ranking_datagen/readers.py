"""Pluggable readers for ranking collections in the field's standard file formats.

Each reader turns one file (local, gs://, ... through ``tf.io.gfile``; ``.gz`` is gunzipped)
into plain records, so that a Beam pipeline can call it per file path::

    docs = paths | beam.FlatMap(get_reader("documents", "trec_sgml").read)

or, to keep the bad records as data instead of only counting them::

    out = paths | beam.ParDo(ReadCollectionFile(reader, "skip")).with_outputs(
        BAD_RECORDS_TAG, main="records")
    out.records, out[BAD_RECORDS_TAG]

A new format is one ``Reader`` subclass plus one line in ``READERS``.

Bad input (malformed lines, unterminated ``<DOC>``, empty text, non-UTF-8 bytes, duplicate ids)
becomes a ``BadRecord(path, line, problem)`` with the 1-based line where the bad record starts
(for undecodable bytes: the line holding them). ``on_bad_record="fail"`` raises
``BadRecordError`` ("<path>:<line>: <problem>"); ``"skip"`` drops the record and counts it in
the Beam counter ``rankpipe/bad_records_<kind>``.
"""

from __future__ import annotations

import gzip
import html
import json
import logging
import math
import re
from abc import ABC, abstractmethod
from collections.abc import Container, Iterable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from typing import Any, BinaryIO, ClassVar, Literal, NamedTuple, Union

import apache_beam as beam
from apache_beam.metrics import Metrics

logger = logging.getLogger(__name__)

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


def _check_policy(on_bad_record: str) -> str:
    if on_bad_record not in POLICIES:
        raise ValueError(f"on_bad_record must be one of {POLICIES}, got {on_bad_record!r}")
    return on_bad_record


def bad_records_counter(kind: str) -> Any:
    """The Beam counter ``rankpipe/bad_records_<kind>`` (works inside and outside a pipeline)."""
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


def _raw_lines(f: BinaryIO) -> Iterator[bytes]:
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
        for number, raw in enumerate(_raw_lines(f), start=1):
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


def _collapse(text: str) -> str:
    return " ".join(text.split())


# --------------------------------------------------------------------------------------------
# Reader base class
# --------------------------------------------------------------------------------------------


class _Parsed(NamedTuple):
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
        self.on_bad_record = _check_policy(on_bad_record)
        self.check_duplicates = check_duplicates

    def __repr__(self) -> str:
        return f"{type(self).__name__}({vars(self)!r})"

    @abstractmethod
    def _parse(self, path: str) -> Iterator[_Parsed | BadRecord]:
        """Yield parsed records with their start line, and BadRecords for malformed input."""

    def _check(self, path: str, parsed: _Parsed) -> BadRecord | None:
        """Per-record semantic check after parsing (e.g. empty text); None when fine."""
        return None

    @staticmethod
    def _key(record: Record) -> Any:
        return record[0]

    @staticmethod
    def _describe_key(record: Record) -> str:
        return f"{record._fields[0]} {record[0]!r}"

    def read_with_errors(self, path: str) -> Iterator[Record | BadRecord]:
        """Yield records and BadRecord values in file order; no policy, no counting."""
        for item in self.read_with_lines(path):
            yield item if isinstance(item, BadRecord) else item[1]

    def read_with_lines(self, path: str) -> Iterator[tuple[int, Record] | BadRecord]:
        """Like ``read_with_errors``, with each good record as ``(start_line, record)``, so that
        collection-level checks (a judged docid missing from the corpus...) can name the line."""
        path = str(path)
        seen: dict[Any, int] = {}
        for item in self._parse(path):
            if isinstance(item, BadRecord):
                yield item
                continue
            bad = self._check(path, item)
            if bad is not None:
                yield bad
                continue
            if self.check_duplicates:
                key = self._key(item.record)
                first = seen.get(key)
                if first is not None:
                    yield BadRecord(
                        path,
                        item.line,
                        f"duplicate {self._describe_key(item.record)}{item.context}"
                        f" (first seen at line {first})",
                    )
                    continue
                seen[key] = item.line
            yield item.line, item.record

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


class _TextRecordReader(Reader):
    """Readers of documents/queries: empty text is a bad record unless allowed."""

    def __init__(
        self,
        on_bad_record: Policy = "fail",
        check_duplicates: bool = True,
        allow_empty_text: bool = False,
    ) -> None:
        super().__init__(on_bad_record, check_duplicates)
        self.allow_empty_text = allow_empty_text

    def _check(self, path: str, parsed: _Parsed) -> BadRecord | None:
        record = parsed.record
        if not self.allow_empty_text and not record.text.strip():
            return BadRecord(
                path, parsed.line, f"empty text for {self._describe_key(record)}{parsed.context}"
            )
        return None


class _PairReader(Reader):
    """Readers of qrels/runs: the duplicate key is the (qid, docid) pair."""

    @staticmethod
    def _key(record: Record) -> Any:
        return (record.qid, record.docid)

    @staticmethod
    def _describe_key(record: Record) -> str:
        return f"pair qid {record.qid!r} docid {record.docid!r}"


def _parse_int(value: str, what: str) -> int | str:
    """int(value), or a problem description."""
    try:
        return int(value)
    except ValueError:
        return f"non-integer {what} {value!r}"


# --------------------------------------------------------------------------------------------
# Line-per-record formats
# --------------------------------------------------------------------------------------------


def _is_comment_or_blank(text: str) -> bool:
    stripped = text.strip()
    return not stripped or stripped.startswith("#")


class _TsvTextReader(_TextRecordReader):
    """``id<TAB>text`` per line (MS MARCO collection.tsv / queries.*.tsv)."""

    record_type: ClassVar[type[Document] | type[Query]]

    def _parse(self, path: str) -> Iterator[_Parsed | BadRecord]:
        for item in iter_lines(path):
            if isinstance(item, BadRecord):
                yield item
                continue
            number, text = item
            if not text.strip():
                continue  # blank lines (e.g. a trailing one) carry no record
            cols = text.split("\t")
            if len(cols) != 2:
                yield BadRecord(
                    path, number, f"expected 2 tab-separated columns (id, text), got {len(cols)}"
                )
                continue
            rid = cols[0].strip()
            if not rid:
                yield BadRecord(path, number, "empty id")
                continue
            yield _Parsed(number, self.record_type(rid, cols[1].strip()))


class MsMarcoTsvDocuments(_TsvTextReader):
    kind = DOCUMENTS
    record_type = Document


class MsMarcoTsvQueries(_TsvTextReader):
    kind = QUERIES
    record_type = Query


class _JsonlReader(_TextRecordReader):
    """One JSON object per line, BEIR style (``_id`` plus text fields)."""

    def _record(self, obj: dict[str, Any], rid: str) -> Record | str:
        raise NotImplementedError

    def _parse(self, path: str) -> Iterator[_Parsed | BadRecord]:
        for item in iter_lines(path):
            if isinstance(item, BadRecord):
                yield item
                continue
            number, text = item
            if not text.strip():
                continue
            try:
                obj = json.loads(text)
            except json.JSONDecodeError as e:
                yield BadRecord(path, number, f"invalid JSON: {e.msg} at column {e.colno}")
                continue
            if not isinstance(obj, dict):
                yield BadRecord(path, number, f"expected a JSON object, got {type(obj).__name__}")
                continue
            rid = obj.get("_id")
            if not isinstance(rid, (str, int)) or isinstance(rid, bool) or not str(rid).strip():
                yield BadRecord(path, number, f"missing or invalid '_id': {rid!r}")
                continue
            record = self._record(obj, str(rid).strip())
            if isinstance(record, str):
                yield BadRecord(path, number, record)
                continue
            yield _Parsed(number, record)


def _json_str(obj: dict[str, Any], field: str, required: bool) -> str | None:
    value = obj.get(field)
    if value is None and not required:
        return ""
    return value if isinstance(value, str) else None


class BeirCorpus(_JsonlReader):
    """BEIR ``corpus.jsonl``: text = title + " " + text when the title is non-empty."""

    kind = DOCUMENTS

    def _record(self, obj: dict[str, Any], rid: str) -> Record | str:
        text = _json_str(obj, "text", required=True)
        title = _json_str(obj, "title", required=False)
        if text is None:
            return f"missing or non-string 'text' for _id {rid!r}"
        if title is None:
            return f"non-string 'title' for _id {rid!r}"
        title = title.strip()
        return Document(rid, f"{title} {text}" if title else text)


class BeirQueries(_JsonlReader):
    """BEIR ``queries.jsonl``."""

    kind = QUERIES

    def _record(self, obj: dict[str, Any], rid: str) -> Record | str:
        text = _json_str(obj, "text", required=True)
        if text is None:
            return f"missing or non-string 'text' for _id {rid!r}"
        return Query(rid, text)


class TrecQrels(_PairReader):
    """TREC qrels ``qid iter docid rel``, any whitespace; ``#`` comment and blank lines skipped."""

    kind = QRELS

    def _parse(self, path: str) -> Iterator[_Parsed | BadRecord]:
        for item in iter_lines(path):
            if isinstance(item, BadRecord):
                yield item
                continue
            number, text = item
            if _is_comment_or_blank(text):
                continue
            cols = text.split()
            if len(cols) != 4:
                yield BadRecord(
                    path, number, f"expected 4 columns (qid iter docid rel), got {len(cols)}"
                )
                continue
            rel = _parse_int(cols[3], "relevance")
            if isinstance(rel, str):
                yield BadRecord(path, number, rel)
                continue
            yield _Parsed(number, Judgment(cols[0], cols[2], rel))


class BeirQrels(_PairReader):
    """BEIR ``qrels/*.tsv``: ``qid<TAB>docid<TAB>grade``; a ``query-id corpus-id score`` header
    on the first line is skipped."""

    kind = QRELS

    def _parse(self, path: str) -> Iterator[_Parsed | BadRecord]:
        for item in iter_lines(path):
            if isinstance(item, BadRecord):
                yield item
                continue
            number, text = item
            if not text.strip():
                continue
            cols = [c.strip() for c in text.split("\t")]
            if number == 1 and cols[:2] == ["query-id", "corpus-id"]:
                continue
            if len(cols) != 3:
                yield BadRecord(
                    path,
                    number,
                    f"expected 3 tab-separated columns (qid, docid, grade), got {len(cols)}",
                )
                continue
            grade = _parse_int(cols[2], "relevance")
            if isinstance(grade, str):
                yield BadRecord(path, number, grade)
                continue
            if not cols[0] or not cols[1]:
                yield BadRecord(path, number, "empty qid or docid")
                continue
            yield _Parsed(number, Judgment(cols[0], cols[1], grade))


class CranfieldQrels(_PairReader):
    """Cranfield ``cranqrel``: ``qid docid code``, any whitespace (one real line has a double
    space). Gain = 5 - code for Cleverdon codes 1..4 (1 = complete answer -> 4) and 5 ("no
    interest") -> 0; code -1 (one per query) -> 0, i.e. judged non-relevant."""

    kind = QRELS

    def _parse(self, path: str) -> Iterator[_Parsed | BadRecord]:
        for item in iter_lines(path):
            if isinstance(item, BadRecord):
                yield item
                continue
            number, text = item
            if _is_comment_or_blank(text):
                continue
            cols = text.split()
            if len(cols) != 3:
                yield BadRecord(
                    path, number, f"expected 3 columns (qid docid code), got {len(cols)}"
                )
                continue
            code = _parse_int(cols[2], "relevance code")
            if isinstance(code, str):
                yield BadRecord(path, number, code)
                continue
            if code == -1:
                gain = 0
            elif 1 <= code <= 5:
                gain = 5 - code
            else:
                yield BadRecord(
                    path, number, f"unknown Cranfield relevance code {code} (expected 1..5 or -1)"
                )
                continue
            yield _Parsed(number, Judgment(cols[0], cols[1], gain))


class TrecRun(_PairReader):
    """TREC run ``qid Q0 docid rank score runid``, any whitespace.

    The rank column is kept as read (it may be all 0, or out of order): consumers rank by score
    with trec_eval's tie-breaking. Text after the 6th column is ignored, as trec_eval does
    (its own test file results.trunc has such lines); fewer columns are malformed.
    """

    kind = RUN

    def _parse(self, path: str) -> Iterator[_Parsed | BadRecord]:
        for item in iter_lines(path):
            if isinstance(item, BadRecord):
                yield item
                continue
            number, text = item
            if _is_comment_or_blank(text):
                continue
            cols = text.split()
            if len(cols) < 6:
                yield BadRecord(
                    path,
                    number,
                    f"expected 6 columns (qid Q0 docid rank score runid), got {len(cols)}",
                )
                continue
            rank = _parse_int(cols[3], "rank")
            if isinstance(rank, str):
                yield BadRecord(path, number, rank)
                continue
            try:
                score = float(cols[4])
            except ValueError:
                yield BadRecord(path, number, f"non-numeric score {cols[4]!r}")
                continue
            if not math.isfinite(score):
                yield BadRecord(path, number, f"non-finite score {cols[4]!r}")
                continue
            yield _Parsed(number, RunEntry(cols[0], cols[2], score, rank))


# --------------------------------------------------------------------------------------------
# Block formats: TREC SGML documents, TREC topics
# --------------------------------------------------------------------------------------------


class _Block(NamedTuple):
    line: int
    content: str


def _sgml_blocks(path: str, tag: str, label: str) -> Iterator[_Block | BadRecord]:
    """Yield the content between ``<tag ...>`` and ``</tag>`` (any case, may span lines or share
    a line with other elements), with the start line. An open tag without a close before the
    next open tag or EOF is reported; a block with undecodable bytes is dropped after its
    BadRecord."""
    open_re = re.compile(rf"<{tag}(?:\s[^>]*)?>", re.IGNORECASE)
    close_re = re.compile(rf"</{tag}\s*>", re.IGNORECASE)
    inside = False
    broken = False
    start = 0
    parts: list[str] = []
    for item in iter_lines(path):
        if isinstance(item, BadRecord):
            yield item
            broken = broken or inside
            continue
        number, text = item
        pos = 0
        while True:
            if not inside:
                m = open_re.search(text, pos)
                if m is None:
                    break
                inside, broken, start, parts, pos = True, False, number, [], m.end()
                continue
            close = close_re.search(text, pos)
            reopen = open_re.search(text, pos)
            if reopen is not None and (close is None or reopen.start() < close.start()):
                yield BadRecord(
                    path, start, f"unterminated {label} (next {label} at line {number})"
                )
                broken, start, parts, pos = False, number, [], reopen.end()
                continue
            if close is None:
                parts.append(text[pos:])
                break
            parts.append(text[pos : close.start()])
            if not broken:
                yield _Block(start, "\n".join(parts))
            inside, pos = False, close.end()
    if inside:
        yield BadRecord(path, start, f"unterminated {label} (no closing tag before end of file)")


_TAG_RE = re.compile(r"<[^>]*>")
_DOCNO_RE = re.compile(r"<DOCNO>(.*?)</DOCNO\s*>", re.IGNORECASE | re.DOTALL)
# Elements that are never document text in the fallback "everything but DOCNO" mode.
_NON_TEXT_RE = re.compile(
    r"<(DOCNO|DOCOLDNO|DOCHDR)(?:\s[^>]*)?>.*?</\1\s*>", re.IGNORECASE | re.DOTALL
)


def _sgml_text(fragment: str) -> str:
    return _collapse(html.unescape(_TAG_RE.sub(" ", fragment)))


class TrecSgmlDocuments(_TextRecordReader):
    """TREC SGML ``<DOC><DOCNO>id</DOCNO> ... </DOC>`` (TREC disks 1-5, AQUAINT, ...).

    Text = the contents of the ``text_tags`` elements in document order; when a document has
    none of them, everything except DOCNO/DOCHDR. Inner markup is stripped, entities decoded,
    whitespace collapsed. An unterminated ``<DOC>`` is a bad record at its start line.
    """

    kind = DOCUMENTS
    DEFAULT_TEXT_TAGS: ClassVar[tuple[str, ...]] = (
        "TITLE",
        "HEADLINE",
        "HEAD",
        "HL",
        "TI",
        "H3",
        "LEADPARA",
        "TEXT",
    )

    def __init__(
        self,
        on_bad_record: Policy = "fail",
        check_duplicates: bool = True,
        allow_empty_text: bool = False,
        text_tags: Sequence[str] = DEFAULT_TEXT_TAGS,
    ) -> None:
        super().__init__(on_bad_record, check_duplicates, allow_empty_text)
        self.text_tags = tuple(text_tags)
        names = "|".join(re.escape(t) for t in self.text_tags)
        # Alternation + finditer: outermost matching element first, nested ones not repeated.
        self._text_re = re.compile(
            rf"<({names})(?:\s[^>]*)?>(.*?)</\1\s*>", re.IGNORECASE | re.DOTALL
        )

    def _parse(self, path: str) -> Iterator[_Parsed | BadRecord]:
        for block in _sgml_blocks(path, "DOC", "<DOC>"):
            if isinstance(block, BadRecord):
                yield block
                continue
            docnos = _DOCNO_RE.findall(block.content)
            if len(docnos) != 1:
                problem = "missing <DOCNO>" if not docnos else f"{len(docnos)} <DOCNO> elements"
                yield BadRecord(path, block.line, f"{problem} in <DOC>")
                continue
            docid = _collapse(docnos[0])
            if not docid or " " in docid:
                yield BadRecord(path, block.line, f"invalid <DOCNO> {docnos[0]!r}")
                continue
            fragments = [m.group(2) for m in self._text_re.finditer(block.content)]
            if not fragments:
                fragments = [_NON_TEXT_RE.sub(" ", block.content)]
            yield _Parsed(block.line, Document(docid, _sgml_text(" ".join(fragments))))


_TOPIC_FIELD_RE = re.compile(r"<(num|title|desc|narr)(?:\s[^>]*)?>(.*?)(?=<|\Z)", re.I | re.S)
_TOPIC_PREFIX_RE = {
    "num": re.compile(r"^\s*Number:", re.I),
    "title": re.compile(r"^\s*Topic:", re.I),
    "desc": re.compile(r"^\s*Description:", re.I),
    "narr": re.compile(r"^\s*Narrative:", re.I),
}
TOPIC_FIELDS: tuple[str, ...] = ("title", "desc", "narr")


class TrecTopics(_TextRecordReader):
    """TREC topics ``<top> <num> Number: 301 <title> ... <desc> Description: ... </top>``.

    A field runs from its tag to the next tag (classic topics do not close them; closed ones
    work too). Text = the chosen ``fields`` joined by a space (default: title only), with the
    "Topic:"/"Description:"/"Narrative:" labels removed. The qid is the number as written (a
    zero-padded "051" stays "051"; qrels of TREC 1-3 write "51").
    """

    kind = QUERIES

    def __init__(
        self,
        on_bad_record: Policy = "fail",
        check_duplicates: bool = True,
        allow_empty_text: bool = False,
        fields: Sequence[str] = ("title",),
    ) -> None:
        super().__init__(on_bad_record, check_duplicates, allow_empty_text)
        unknown = [f for f in fields if f not in TOPIC_FIELDS]
        if unknown or not fields:
            raise ValueError(f"fields must be a non-empty subset of {TOPIC_FIELDS}, got {fields}")
        self.fields = tuple(fields)

    def _parse(self, path: str) -> Iterator[_Parsed | BadRecord]:
        for block in _sgml_blocks(path, "top", "<top>"):
            if isinstance(block, BadRecord):
                yield block
                continue
            values: dict[str, str] = {}
            for m in _TOPIC_FIELD_RE.finditer(block.content):
                name = m.group(1).lower()
                value = _TOPIC_PREFIX_RE[name].sub("", m.group(2), count=1)
                values.setdefault(name, _collapse(html.unescape(value)))
            num = values.get("num", "").split()
            if len(num) != 1:
                problem = "missing <num>" if not num else f"invalid <num> {values['num']!r}"
                yield BadRecord(path, block.line, f"{problem} in <top>")
                continue
            text = " ".join(values[f] for f in self.fields if values.get(f))
            yield _Parsed(block.line, Query(num[0], text))


# --------------------------------------------------------------------------------------------
# SMART format (Cranfield): ".I id" then ".T", ".A", ".B", ".W" sections
# --------------------------------------------------------------------------------------------

_SMART_FIELD_RE = re.compile(r"^\.([A-Z])(?:\s+(.*?))?\s*$")


class _SmartBlock(NamedTuple):
    line: int
    ordinal: int  # 1-based position of the ".I" line in the file
    ident: str  # the .I token as written, e.g. "004"
    fields: dict[str, str]


def _smart_blocks(path: str) -> Iterator[_SmartBlock | BadRecord]:
    """Split a SMART file into ``.I`` blocks. A section marker seen twice in one block appends
    to that section (real Cranfield docs 576 and 578 carry a stray second ``.W``); sections
    other than T/A/B/W are kept but unused."""
    ordinal = 0
    current: _SmartBlock | None = None
    broken = False
    section: str | None = None
    lines: dict[str, list[str]] = {}
    reported_preamble = False

    def finish() -> Iterator[_SmartBlock]:
        if current is not None and not broken:
            fields = {k: _collapse(" ".join(v)) for k, v in lines.items()}
            yield current._replace(fields=fields)

    for item in iter_lines(path):
        if isinstance(item, BadRecord):
            yield item
            broken = broken or current is not None
            continue
        number, text = item
        m = _SMART_FIELD_RE.match(text)
        if m and m.group(1) == "I":
            yield from finish()
            ordinal += 1
            ident = (m.group(2) or "").split()
            current = _SmartBlock(number, ordinal, ident[0] if ident else "", {})
            broken, section, lines = False, None, {}
            if len(ident) != 1:
                yield BadRecord(path, number, f"'.I' line must carry one id, got {text!r}")
                broken = True
            continue
        if current is None:
            if text.strip() and not reported_preamble:
                yield BadRecord(path, number, "text before the first '.I' line")
                reported_preamble = True
            continue
        if m:
            section = m.group(1)
            lines.setdefault(section, [])
            if m.group(2):  # text on the marker line itself
                lines[section].append(m.group(2))
            continue
        if section is None:
            if text.strip():
                yield BadRecord(path, number, f"text outside a section in '.I {current.ident}'")
                broken = True
            continue
        lines[section].append(text)
    yield from finish()


class CranfieldDocuments(_TextRecordReader):
    """Cranfield ``cran.all.1400`` (SMART): docid = the ``.I`` id, text = title + abstract.

    Note: the real collection has two documents with empty title and abstract (471, 995; 995
    is judged for query 125), so reading all 1,400 needs ``allow_empty_text=True``.
    """

    kind = DOCUMENTS

    def _parse(self, path: str) -> Iterator[_Parsed | BadRecord]:
        for block in _smart_blocks(path):
            if isinstance(block, BadRecord):
                yield block
                continue
            text = " ".join(t for t in (block.fields.get("T"), block.fields.get("W")) if t)
            yield _Parsed(block.line, Document(block.ident, text))


class CranfieldQueries(_TextRecordReader):
    """Cranfield ``cran.qry`` (SMART, CRLF). qid = ordinal position of the query in the file,
    1..225, NOT the ``.I`` number: the ``.I`` numbers run 001..365 with gaps while cranqrel
    numbers queries in file order (qrels query 3 is ``.I 004``). The ``.I`` number is kept in
    error messages and by ``cranfield_query_numbers``. A bad query still takes its ordinal, so
    skipping it does not shift the queries after it.
    """

    kind = QUERIES

    def _parse(self, path: str) -> Iterator[_Parsed | BadRecord]:
        seen: dict[str, int] = {}
        for block in _smart_blocks(path):
            if isinstance(block, BadRecord):
                yield block
                continue
            qid = str(block.ordinal)
            if block.ident in seen:
                yield BadRecord(
                    path,
                    block.line,
                    f"duplicate '.I {block.ident}' for qid {qid!r}"
                    f" (first seen at line {seen[block.ident]})",
                )
                continue
            seen[block.ident] = block.line
            yield _Parsed(block.line, Query(qid, block.fields.get("W", "")), f" (.I {block.ident})")


def cranfield_query_numbers(path: str) -> dict[str, str]:
    """Map Cranfield qid (ordinal "1".."225") to the ``.I`` number as written ("004")."""
    return {str(b.ordinal): b.ident for b in _smart_blocks(str(path)) if isinstance(b, _SmartBlock)}


# --------------------------------------------------------------------------------------------
# Registry
# --------------------------------------------------------------------------------------------

READERS: dict[str, dict[str, type[Reader]]] = {
    DOCUMENTS: {
        "trec_sgml": TrecSgmlDocuments,
        "beir_corpus": BeirCorpus,
        "msmarco_tsv": MsMarcoTsvDocuments,
        "cranfield": CranfieldDocuments,
    },
    QUERIES: {
        "trec_topics": TrecTopics,
        "beir_queries": BeirQueries,
        "msmarco_tsv": MsMarcoTsvQueries,
        "cranfield": CranfieldQueries,
    },
    QRELS: {
        "trec_qrels": TrecQrels,
        "beir_qrels": BeirQrels,
        "cranfield": CranfieldQrels,
    },
    RUN: {
        "trec_run": TrecRun,
    },
}


def get_reader(kind: str, format_name: str, **options: Any) -> Reader:
    """Instantiate the reader registered for ``kind`` ("documents", "queries", "qrels", "run")
    and ``format_name``; ``options`` go to its constructor (on_bad_record, fields, ...)."""
    if kind not in READERS:
        raise ValueError(f"unknown reader kind {kind!r}; known: {sorted(READERS)}")
    formats = READERS[kind]
    if format_name not in formats:
        raise ValueError(f"unknown {kind} format {format_name!r}; known: {sorted(formats)}")
    return formats[format_name](**options)


# --------------------------------------------------------------------------------------------
# Beam helper
# --------------------------------------------------------------------------------------------


class ReadCollectionFile(beam.DoFn):
    """DoFn: file path -> records (main output) and BadRecords (output tagged
    ``BAD_RECORDS_TAG``). Bad records are counted in ``rankpipe/bad_records_<kind>``; with
    ``on_bad_record="fail"`` the first one raises BadRecordError instead of being emitted.
    ``on_bad_record=None`` uses the reader's own policy."""

    def __init__(self, reader: Reader, on_bad_record: Policy | None = None) -> None:
        super().__init__()
        self.reader = reader
        self.on_bad_record = _check_policy(on_bad_record or reader.on_bad_record)
        self.bad_records = bad_records_counter(reader.kind)

    def process(self, path: str) -> Iterator[Any]:
        for item in self.reader.read_with_errors(path):
            if isinstance(item, BadRecord):
                self.bad_records.inc()
                if self.on_bad_record == "fail":
                    raise BadRecordError(item)
                yield beam.pvalue.TaggedOutput(BAD_RECORDS_TAG, item)
            else:
                yield item


# --------------------------------------------------------------------------------------------
# Collection-level checks
# --------------------------------------------------------------------------------------------


def check_qrels_against(
    qrels: Iterable[Judgment | tuple[int, Judgment]],
    query_ids: Container[str],
    doc_ids: Container[str],
    *,
    path: str = "<qrels>",
    on_bad_record: Policy = "fail",
) -> list[BadRecord]:
    """Report judgments whose qid has no query or whose docid is not in the corpus.

    One BadRecord per offending judgment. ``qrels`` items are Judgments (line reported as 0)
    or ``(line, Judgment)`` pairs when the caller kept line numbers. With "fail" the first
    problem raises BadRecordError; with "skip" all are returned and counted in
    ``rankpipe/bad_records_qrels`` (the caller drops those judgments).
    """
    _check_policy(on_bad_record)
    counter = bad_records_counter(QRELS)
    bad: list[BadRecord] = []
    for item in qrels:
        line, judgment = (0, item) if isinstance(item, Judgment) else item
        problems = []
        if judgment.qid not in query_ids:
            problems.append(f"qrels qid {judgment.qid!r} has no query")
        if judgment.docid not in doc_ids:
            problems.append(
                f"judged docid {judgment.docid!r} (qid {judgment.qid!r}) is not in the corpus"
            )
        if problems:
            record = BadRecord(path, line, "; ".join(problems))
            counter.inc()
            if on_bad_record == "fail":
                raise BadRecordError(record)
            bad.append(record)
    return bad
