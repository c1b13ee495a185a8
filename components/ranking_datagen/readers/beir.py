"""BEIR formats: ``corpus.jsonl``, ``queries.jsonl`` and ``qrels/*.tsv``.

Why its own module: BEIR is the common packaging of many collections (the MS MARCO DL19 subset
here among them), JSON lines for texts and a TSV with a header for judgments, unlike TREC's.

Upstream spec: the BEIR repository's README, "Load your own dataset",
https://github.com/beir-cellar/beir (corpus lines ``{"_id", "title", "text"}``, query lines
``{"_id", "text"}``, qrels ``query-id<TAB>corpus-id<TAB>score`` with that header line).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from components.ranking_datagen.readers import base


class _JsonlReader(base.TextRecordReader):
    """One JSON object per line, BEIR style (``_id`` plus text fields)."""

    def _record(self, obj: dict[str, Any], rid: str) -> base.Record:
        raise NotImplementedError

    def _parse(self, path: str) -> Iterator[base.Parsed | base.BadRecord]:
        return base.parse_items(path, base.record_lines(path, comments=False), self._parse_line)

    def _parse_line(self, line: tuple[int, str]) -> base.Record:
        try:
            obj = json.loads(line[1])
        except json.JSONDecodeError as e:
            raise base.RecordProblem(f"invalid JSON: {e.msg} at column {e.colno}") from None
        if not isinstance(obj, dict):
            raise base.RecordProblem(f"expected a JSON object, got {type(obj).__name__}")
        rid = obj.get("_id")
        if not isinstance(rid, (str, int)) or isinstance(rid, bool) or not str(rid).strip():
            raise base.RecordProblem(f"missing or invalid '_id': {rid!r}")
        return self._record(obj, str(rid).strip())


def _json_str(obj: dict[str, Any], field: str, required: bool) -> str | None:
    value = obj.get(field)
    if value is None and not required:
        return ""
    return value if isinstance(value, str) else None


def _text(obj: dict[str, Any], rid: str) -> str:
    text = _json_str(obj, "text", required=True)
    if text is None:
        raise base.RecordProblem(f"missing or non-string 'text' for _id {rid!r}")
    return text


class BeirCorpus(_JsonlReader):
    """BEIR ``corpus.jsonl``: text = title + " " + text when the title is non-empty."""

    kind = base.DOCUMENTS

    def _record(self, obj: dict[str, Any], rid: str) -> base.Record:
        text = _text(obj, rid)
        title = _json_str(obj, "title", required=False)
        if title is None:
            raise base.RecordProblem(f"non-string 'title' for _id {rid!r}")
        title = title.strip()
        return base.Document(rid, f"{title} {text}" if title else text)


class BeirQueries(_JsonlReader):
    """BEIR ``queries.jsonl``."""

    kind = base.QUERIES

    def _record(self, obj: dict[str, Any], rid: str) -> base.Record:
        return base.Query(rid, _text(obj, rid))


def _judgment(qid: str, docid: str, grade: int) -> base.Judgment:
    if not qid or not docid:
        raise base.RecordProblem("empty qid or docid")
    return base.Judgment(qid, docid, grade)


class BeirQrels(base.PairReader):
    """BEIR ``qrels/*.tsv``: ``qid<TAB>docid<TAB>grade``; a ``query-id corpus-id score`` header
    on the first line is skipped."""

    kind = base.QRELS
    COLUMNS = base.Columns(
        ("qid", "docid", "grade"),
        {"grade": base.integer("relevance")},
        tab_separated=True,
        comments=False,
        header=("query-id", "corpus-id"),
    )

    def _parse(self, path: str) -> Iterator[base.Parsed | base.BadRecord]:
        return self.COLUMNS.parse(path, _judgment)
