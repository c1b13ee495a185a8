"""TREC formats: qrels, runs, SGML documents and topics.

Why one module: all four come from NIST's TREC ad hoc tracks and are read by trec_eval, whose
behaviour is the reference for the two line formats. Those two are parsed by the one TREC
grammar, ``rankcore/trec.py`` (which lists every dialect decision: comments, BOM, separators,
numbers, UTF-8, ``.gz``), which the metrics' readers (``rankcore/metrics/readers.py``) use too:
a qrels or run file means the same to RankingDataGen and to the evaluator, and a line is bad
for both or for neither. Here the grammar's problems become this package's BadRecords, worded
as for every other collection format, under ``on_bad_record`` (``base``: files opened through
tf.io.gfile, gzip by name, the format sniffed when the first record fails, duplicates found by
the shared loop). rankpipe writes runs in ``rankcore/trec.py`` too.

Upstream specs:
  * qrels ``TOPIC ITERATION DOCUMENT# RELEVANCY``: https://trec.nist.gov/data/qrels_eng/
  * runs ``qid Q0 docno rank sim run_id``: trec_eval's README,
    https://github.com/usnistgov/trec_eval (its own test file results.trunc has text after the
    6th column, which trec_eval ignores)
  * SGML documents ``<DOC><DOCNO>..</DOCNO>..</DOC>``: https://trec.nist.gov/data/docs_eng.html
  * topics ``<top><num> Number: ..<title>..<desc> Description:..<narr> Narrative:..</top>``:
    https://trec.nist.gov/data/topics_eng/
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable, Iterator, Sequence
from typing import ClassVar, NamedTuple

from components.ranking_datagen.readers import base
from rankcore import trec

# --------------------------------------------------------------------------------------------
# Line formats: qrels, runs
# --------------------------------------------------------------------------------------------

# How a column is named in "non-integer <name> ..." (as the other column formats name theirs).
_COLUMN_WORDS = {"rel": "relevance", "rank": "rank", "score": "score"}


def _problem(problem: trec.LineProblem, columns: Sequence[str]) -> str:
    """The grammar's LineProblem in the words of every collection format's BadRecords."""
    reason = problem.reason
    what = _COLUMN_WORDS.get(problem.column, problem.column)
    if reason == trec.NOT_UTF8:
        return f"undecodable bytes (not UTF-8) at column {problem.count + 1}: {problem.raw!r}"
    if reason == trec.FIELD_COUNT:
        return f"expected {len(columns)} columns ({' '.join(columns)}), got {problem.count}"
    if reason == trec.NOT_INTEGER:
        return f"non-integer {what} {problem.value!r}"
    if reason == trec.NOT_NUMBER:
        return f"non-numeric {what} {problem.value!r}"
    if reason == trec.NOT_FINITE:
        return f"non-finite {what} {problem.value!r}"
    return problem.message  # NUL byte; duplicates are found by base's loop


def _parse_lines(
    path: str,
    parse: trec.LineParser,
    columns: Sequence[str],
    make: Callable[[trec.QrelsLine | trec.RunLine], base.Record],
) -> Iterator[base.Parsed | base.BadRecord]:
    with base.open_binary(path) as f:
        lines = base.raw_lines(f)
        for line_no, item in trec.parse_lines(lines, parse, check_duplicates=False):
            if isinstance(item, trec.LineProblem):
                yield base.BadRecord(path, line_no, _problem(item, columns))
            else:
                yield base.Parsed(line_no, make(item))


class TrecQrels(base.PairReader):
    """TREC qrels ``qid iter docid rel`` in rankcore.trec's grammar: 4 fields separated by ASCII
    whitespace, an integer relevance; blank lines and ``#`` comment lines skipped."""

    kind = base.QRELS
    COLUMNS: ClassVar[tuple[str, ...]] = trec.QRELS_COLUMNS

    def _parse(self, path: str) -> Iterator[base.Parsed | base.BadRecord]:
        return _parse_lines(
            path,
            trec.parse_qrels_line,
            self.COLUMNS,
            lambda j: base.Judgment(j.qid, j.docno, j.rel),
        )


class TrecRun(base.PairReader):
    """TREC run ``qid Q0 docid rank score runid`` in rankcore.trec's grammar.

    The rank column must be an integer and is kept as read (it may be all 0, or out of order):
    consumers rank by score with trec_eval's tie-breaking. The score must be a finite decimal
    number. Text after the 6th column is ignored, as trec_eval does (its own test file
    results.trunc has such lines); fewer columns are malformed.
    """

    kind = base.RUN
    COLUMNS: ClassVar[tuple[str, ...]] = trec.RUN_COLUMNS

    def _parse(self, path: str) -> Iterator[base.Parsed | base.BadRecord]:
        return _parse_lines(
            path,
            trec.parse_run_line,
            self.COLUMNS,
            lambda e: base.RunEntry(e.qid, e.docno, e.score, e.rank),
        )


# --------------------------------------------------------------------------------------------
# Block formats: SGML documents, topics
# --------------------------------------------------------------------------------------------


class _Block(NamedTuple):
    line: int
    content: str


def _sgml_blocks(path: str, tag: str, label: str) -> Iterator[_Block | base.BadRecord]:
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
    for item in base.iter_lines(path):
        if isinstance(item, base.BadRecord):
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
                yield base.BadRecord(
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
        problem = f"unterminated {label} (no closing tag before end of file)"
        yield base.BadRecord(path, start, problem)


_TAG_RE = re.compile(r"<[^>]*>")
_DOCNO_RE = re.compile(r"<DOCNO>(.*?)</DOCNO\s*>", re.IGNORECASE | re.DOTALL)
# Elements that are never document text in the fallback "everything but DOCNO" mode.
_NON_TEXT_RE = re.compile(
    r"<(DOCNO|DOCOLDNO|DOCHDR)(?:\s[^>]*)?>.*?</\1\s*>", re.IGNORECASE | re.DOTALL
)


def _sgml_text(fragment: str) -> str:
    return base.collapse(html.unescape(_TAG_RE.sub(" ", fragment)))


class TrecSgmlDocuments(base.TextRecordReader):
    """TREC SGML ``<DOC><DOCNO>id</DOCNO> ... </DOC>`` (TREC disks 1-5, AQUAINT, ...).

    Text = the contents of the ``text_tags`` elements in document order; when a document has
    none of them, everything except DOCNO/DOCHDR. Inner markup is stripped, entities decoded,
    whitespace collapsed. An unterminated ``<DOC>`` is a bad record at its start line.
    """

    kind = base.DOCUMENTS
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
        on_bad_record: base.Policy = "fail",
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

    def _parse(self, path: str) -> Iterator[base.Parsed | base.BadRecord]:
        return base.parse_items(path, _sgml_blocks(path, "DOC", "<DOC>"), self._document)

    def _document(self, block: _Block) -> base.Document:
        docnos = _DOCNO_RE.findall(block.content)
        if len(docnos) != 1:
            problem = "missing <DOCNO>" if not docnos else f"{len(docnos)} <DOCNO> elements"
            raise base.RecordProblem(f"{problem} in <DOC>")
        docid = base.collapse(docnos[0])
        if not docid or " " in docid:
            raise base.RecordProblem(f"invalid <DOCNO> {docnos[0]!r}")
        fragments = [m.group(2) for m in self._text_re.finditer(block.content)]
        if not fragments:
            fragments = [_NON_TEXT_RE.sub(" ", block.content)]
        return base.Document(docid, _sgml_text(" ".join(fragments)))


_TOPIC_FIELD_RE = re.compile(r"<(num|title|desc|narr)(?:\s[^>]*)?>(.*?)(?=<|\Z)", re.I | re.S)
_TOPIC_PREFIX_RE = {
    "num": re.compile(r"^\s*Number:", re.I),
    "title": re.compile(r"^\s*Topic:", re.I),
    "desc": re.compile(r"^\s*Description:", re.I),
    "narr": re.compile(r"^\s*Narrative:", re.I),
}
TOPIC_FIELDS: tuple[str, ...] = ("title", "desc", "narr")


class TrecTopics(base.TextRecordReader):
    """TREC topics ``<top> <num> Number: 301 <title> ... <desc> Description: ... </top>``.

    A field runs from its tag to the next tag (classic topics do not close them; closed ones
    work too). Text = the chosen ``fields`` joined by a space (default: title only), with the
    "Topic:"/"Description:"/"Narrative:" labels removed. The qid is the number as written (a
    zero-padded "051" stays "051"; qrels of TREC 1-3 write "51").
    """

    kind = base.QUERIES

    def __init__(
        self,
        on_bad_record: base.Policy = "fail",
        check_duplicates: bool = True,
        allow_empty_text: bool = False,
        fields: Sequence[str] = ("title",),
    ) -> None:
        super().__init__(on_bad_record, check_duplicates, allow_empty_text)
        unknown = [f for f in fields if f not in TOPIC_FIELDS]
        if unknown or not fields:
            raise ValueError(f"fields must be a non-empty subset of {TOPIC_FIELDS}, got {fields}")
        self.fields = tuple(fields)

    def _parse(self, path: str) -> Iterator[base.Parsed | base.BadRecord]:
        return base.parse_items(path, _sgml_blocks(path, "top", "<top>"), self._topic)

    def _topic(self, block: _Block) -> base.Query:
        values: dict[str, str] = {}
        for m in _TOPIC_FIELD_RE.finditer(block.content):
            name = m.group(1).lower()
            value = _TOPIC_PREFIX_RE[name].sub("", m.group(2), count=1)
            values.setdefault(name, base.collapse(html.unescape(value)))
        num = values.get("num", "").split()
        if len(num) != 1:
            problem = "missing <num>" if not num else f"invalid <num> {values['num']!r}"
            raise base.RecordProblem(f"{problem} in <top>")
        text = " ".join(values[f] for f in self.fields if values.get(f))
        return base.Query(num[0], text)
