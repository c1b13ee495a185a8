"""Test helpers on top of components.ranking_datagen.readers that the pipeline does not use.

The pipeline's own collection-level checks are in components/ranking_datagen/collection.py
(``check_qrels``, with locations across files); these small versions check one reader's output
in the reader tests.
"""

from __future__ import annotations

from collections.abc import Container, Iterable

from components.ranking_datagen.readers import (
    QRELS,
    BadRecord,
    BadRecordError,
    Judgment,
    Policy,
    bad_records_counter,
)
from components.ranking_datagen.readers.base import check_policy
from components.ranking_datagen.readers.cranfield import SmartBlock, smart_blocks


def cranfield_query_numbers(path: str) -> dict[str, str]:
    """Map Cranfield qid (ordinal "1".."225") to the ``.I`` number as written ("004")."""
    return {str(b.ordinal): b.ident for b in smart_blocks(str(path)) if isinstance(b, SmartBlock)}


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
    check_policy(on_bad_record)
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
