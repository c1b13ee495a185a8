"""MS MARCO formats: ``collection.tsv`` (passages) and ``queries.*.tsv``, ``id<TAB>text``.

Why its own module: MS MARCO ships its texts as plain TSV (no quoting, no header), neither
BEIR's JSON lines nor TREC's SGML; its qrels and runs are TREC's (``trec.py``).

Upstream spec: https://microsoft.github.io/msmarco/ and the passage ranking README,
https://github.com/microsoft/MSMARCO-Passage-Ranking ("collection.tsv: pid<TAB>passage",
"queries.*.tsv: qid<TAB>query").
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import ClassVar

from components.ranking_datagen.readers import base


class _TsvTextReader(base.TextRecordReader):
    """``id<TAB>text`` per line (MS MARCO collection.tsv / queries.*.tsv)."""

    record_type: ClassVar[type[base.Document] | type[base.Query]]
    COLUMNS = base.Columns(("id", "text"), tab_separated=True, comments=False)

    def _parse(self, path: str) -> Iterator[base.Parsed | base.BadRecord]:
        return self.COLUMNS.parse(path, self._record)

    def _record(self, rid: str, text: str) -> base.Document | base.Query:
        if not rid:
            raise base.RecordProblem("empty id")
        return self.record_type(rid, text)


class MsMarcoTsvDocuments(_TsvTextReader):
    kind = base.DOCUMENTS
    record_type = base.Document


class MsMarcoTsvQueries(_TsvTextReader):
    kind = base.QUERIES
    record_type = base.Query
