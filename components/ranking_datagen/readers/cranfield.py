"""Cranfield formats: ``cran.all.1400``, ``cran.qry`` (SMART) and ``cranqrel``.

Why its own module: Cranfield is the pipeline's built-in real collection, and its files have
quirks the readers must know (queries numbered by file position, not by ``.I``; Cleverdon's
relevance codes; two empty documents; a stray second ``.W``), documented where handled.

Upstream spec: the collection as distributed by the University of Glasgow IR group,
http://ir.dcs.gla.ac.uk/resources/test_collections/cran/ (SMART format: ``.I id`` then
``.T`` title, ``.A`` authors, ``.B`` bibliography, ``.W`` text sections; cranqrel lines
``qid docid code``, codes 1..5 of Cleverdon's relevance scale and -1).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import NamedTuple

from components.ranking_datagen.readers import base

_SMART_FIELD_RE = re.compile(r"^\.([A-Z])(?:\s+(.*?))?\s*$")


class SmartBlock(NamedTuple):
    line: int
    ordinal: int  # 1-based position of the ".I" line in the file
    ident: str  # the .I token as written, e.g. "004"
    fields: dict[str, str]


def smart_blocks(path: str) -> Iterator[SmartBlock | base.BadRecord]:
    """Split a SMART file into ``.I`` blocks. A section marker seen twice in one block appends
    to that section (real Cranfield docs 576 and 578 carry a stray second ``.W``); sections
    other than T/A/B/W are kept but unused."""
    ordinal = 0
    current: SmartBlock | None = None
    broken = False
    section: str | None = None
    lines: dict[str, list[str]] = {}
    reported_preamble = False

    def finish() -> Iterator[SmartBlock]:
        if current is not None and not broken:
            fields = {k: base.collapse(" ".join(v)) for k, v in lines.items()}
            yield current._replace(fields=fields)

    for item in base.iter_lines(path):
        if isinstance(item, base.BadRecord):
            yield item
            broken = broken or current is not None
            continue
        number, text = item
        m = _SMART_FIELD_RE.match(text)
        if m and m.group(1) == "I":
            yield from finish()
            ordinal += 1
            ident = (m.group(2) or "").split()
            current = SmartBlock(number, ordinal, ident[0] if ident else "", {})
            broken, section, lines = False, None, {}
            if len(ident) != 1:
                yield base.BadRecord(path, number, f"'.I' line must carry one id, got {text!r}")
                broken = True
            continue
        if current is None:
            if text.strip() and not reported_preamble:
                yield base.BadRecord(path, number, "text before the first '.I' line")
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
                problem = f"text outside a section in '.I {current.ident}'"
                yield base.BadRecord(path, number, problem)
                broken = True
            continue
        lines[section].append(text)
    yield from finish()


class CranfieldDocuments(base.TextRecordReader):
    """Cranfield ``cran.all.1400`` (SMART): docid = the ``.I`` id, text = title + abstract.

    Note: the real collection has two documents with empty title and abstract (471, 995; 995
    is judged for query 125), so reading all 1,400 needs ``allow_empty_text=True``.
    """

    kind = base.DOCUMENTS

    def _parse(self, path: str) -> Iterator[base.Parsed | base.BadRecord]:
        return base.parse_items(path, smart_blocks(path), self._document)

    @staticmethod
    def _document(block: SmartBlock) -> base.Document:
        text = " ".join(t for t in (block.fields.get("T"), block.fields.get("W")) if t)
        return base.Document(block.ident, text)


class CranfieldQueries(base.TextRecordReader):
    """Cranfield ``cran.qry`` (SMART, CRLF). qid = ordinal position of the query in the file,
    1..225, NOT the ``.I`` number: the ``.I`` numbers run 001..365 with gaps while cranqrel
    numbers queries in file order (qrels query 3 is ``.I 004``). The ``.I`` number is kept in
    error messages (and ``SmartBlock.ident``). A bad query still takes its ordinal, so
    skipping it does not shift the queries after it.
    """

    kind = base.QUERIES

    def _parse(self, path: str) -> Iterator[base.Parsed | base.BadRecord]:
        seen: dict[str, int] = {}

        def query(block: SmartBlock) -> base.Parsed:
            qid = str(block.ordinal)
            if block.ident in seen:
                raise base.RecordProblem(
                    f"duplicate '.I {block.ident}' for qid {qid!r}"
                    f" (first seen at line {seen[block.ident]})"
                )
            seen[block.ident] = block.line
            record = base.Query(qid, block.fields.get("W", ""))
            return base.Parsed(block.line, record, f" (.I {block.ident})")

        return base.parse_items(path, smart_blocks(path), query)


def _judgment(qid: str, docid: str, code: int) -> base.Judgment:
    if code == -1:
        gain = 0
    elif 1 <= code <= 5:
        gain = 5 - code
    else:
        raise base.RecordProblem(f"unknown Cranfield relevance code {code} (expected 1..5 or -1)")
    return base.Judgment(qid, docid, gain)


class CranfieldQrels(base.PairReader):
    """Cranfield ``cranqrel``: ``qid docid code``, any whitespace (one real line has a double
    space). Gain = 5 - code for Cleverdon codes 1..4 (1 = complete answer -> 4) and 5 ("no
    interest") -> 0; code -1 (one per query) -> 0, i.e. judged non-relevant."""

    kind = base.QRELS
    COLUMNS = base.Columns(("qid", "docid", "code"), {"code": base.integer("relevance code")})

    def _parse(self, path: str) -> Iterator[base.Parsed | base.BadRecord]:
        return self.COLUMNS.parse(path, _judgment)
