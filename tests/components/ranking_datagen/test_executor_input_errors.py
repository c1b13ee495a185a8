"""RankingDataGen's errors for a collection file that is empty or in another format (issue 37):
said as they are, by the executor too (an object-store collection is not read at config time),
rather than as every judgment lacking its query or every line skipped."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from datagen_testlib import Tiny, leftover_files, run_executor, tiny_configs

from components.ranking_datagen.readers import BadRecordError, EmptyInputError


@pytest.mark.parametrize("policy", ["fail", "skip"])
def test_empty_queries_file(tmp_path: Path, policy: str) -> None:
    """Was `qrels.txt:1: qrels qid 'q1' has no query` (fail), or a positive_threshold error
    after every judgment was dropped (skip)."""
    paths = Tiny.make().write_tsv(tmp_path / "data")
    Path(paths["queries"]).write_text("")
    with pytest.raises(EmptyInputError) as err:
        run_executor(tmp_path / "run", *tiny_configs(paths, policy=policy))
    assert str(err.value) == f"{paths['queries']}: the queries file is empty (collection.queries)"
    assert leftover_files(tmp_path / "run") == []


def test_empty_documents_file(tmp_path: Path) -> None:
    paths = Tiny.make().write_tsv(tmp_path / "data")
    Path(paths["documents"]).write_text("\n")
    with pytest.raises(EmptyInputError) as err:
        run_executor(tmp_path / "run", *tiny_configs(paths, policy="skip"))
    assert str(err.value) == (
        f"{paths['documents']}: the documents file is empty (collection.documents)"
    )


def test_documents_in_another_format_are_refused_even_under_skip(tmp_path: Path) -> None:
    """BEIR JSON lines read as msmarco_tsv: every line would be skipped."""
    tiny = Tiny.make()
    paths = tiny.write_tsv(tmp_path / "data")
    Path(paths["documents"]).write_text(
        "".join(json.dumps({"_id": d, "text": t}) + "\n" for d, t in tiny.docs.items())
    )
    with pytest.raises(BadRecordError) as err:
        run_executor(tmp_path / "run", *tiny_configs(paths, policy="skip"))
    assert str(err.value) == (
        f"{paths['documents']}:1: looks like BEIR corpus (JSON lines), not msmarco_tsv "
        "(expected 2 tab-separated columns (id, text), got 1): set collection.documents_format: "
        "beir_corpus"
    )
    assert leftover_files(tmp_path / "run") == []
