"""Tests for components.ranking_datagen.readers.sniff: which format a file looks like, and the
readers' error for a file read in another format (issue 37: errors name the real cause)."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from components.ranking_datagen.readers import (
    READERS,
    BadRecord,
    BadRecordError,
    BeirCorpus,
    MsMarcoTsvDocuments,
    TrecQrels,
    TrecTopics,
    guess_format,
    sniff,
)

CORPUS = '{"_id": "d1", "title": "A", "text": "one"}\n{"_id": "d2", "text": "two"}\n'
QUERIES = '{"_id": "q1", "text": "one"}\n'
BEIR_QRELS = "query-id\tcorpus-id\tscore\nq1\td1\t1\nq1\td2\t0\n"
TREC_QRELS = "q1 0 d1 1\nq1 0 d2 0\n"
TREC_QRELS_5 = "q1 0 d1 1 x\nq1 0 d2 0 x\n"
SGML = "<DOC>\n<DOCNO>d1</DOCNO>\n<TEXT>one</TEXT>\n</DOC>\n"
TOPICS = "<top>\n<num> Number: 1\n<title> one\n</top>\n"
SMART = ".I 1\n.T\ntitle\n.W\nbody\n"


def _write(tmp_path: Path, name: str, content: str) -> str:
    path = tmp_path / name
    data = content.encode()
    path.write_bytes(gzip.compress(data) if name.endswith(".gz") else data)
    return str(path)


@pytest.mark.parametrize(
    ("kind", "content", "expected"),
    [
        ("documents", CORPUS, "beir_corpus"),
        ("documents", "d1\tone\nd2\ttwo\n", "msmarco_tsv"),
        ("documents", SGML, "trec_sgml"),
        ("documents", SMART, "cranfield"),
        ("queries", QUERIES, "beir_queries"),
        ("queries", "1\tone\n", "msmarco_tsv"),
        ("queries", TOPICS, "trec_topics"),
        ("queries", SMART, "cranfield"),
        ("qrels", BEIR_QRELS, "beir_qrels"),
        ("qrels", "q1\td1\t1\n", "beir_qrels"),
        ("qrels", TREC_QRELS, "trec_qrels"),
        ("qrels", "# comment\n" + TREC_QRELS, "trec_qrels"),
        ("qrels", "1 184 2\n1 29 -1\n", "cranfield"),
        ("run", "q1 Q0 d1 1 2.5 bm25\n", "trec_run"),
        ("qrels", TREC_QRELS_5, None),
        ("documents", "", None),
        ("documents", "\n\n", None),
        ("documents", "plain text, no format\n", None),
    ],
)
def test_guess_format(tmp_path: Path, kind: str, content: str, expected: str | None) -> None:
    assert guess_format(_write(tmp_path, "f", content), kind) == expected
    # gzip-aware, as the readers are (*.gz is gunzipped).
    assert guess_format(_write(tmp_path, "f.gz", content), kind) == expected


def test_guesses_are_registered_formats() -> None:
    for kind, fmt in sniff.DESCRIPTIONS:
        assert fmt in READERS[kind], (kind, fmt)


def test_guess_reads_only_the_first_lines(tmp_path: Path) -> None:
    """Cheap on a large file: a bad line after the first MAX_LINES does not change the guess,
    and a file that cannot be read is no guess rather than an error."""
    content = TREC_QRELS * 3 + "not qrels at all\n" * 1000
    assert guess_format(_write(tmp_path, "qrels", content), "qrels") == "trec_qrels"
    assert guess_format(str(tmp_path / "missing"), "qrels") is None
    (tmp_path / "bad.gz").write_bytes(b"q1 0 d1 1\n")  # not gzip inside
    assert guess_format(str(tmp_path / "bad.gz"), "qrels") is None


def test_beir_qrels_read_as_trec_qrels_names_the_format(tmp_path: Path) -> None:
    """Refused at the first line under either policy (skipping would drop every line)."""
    path = _write(tmp_path, "qrels.tsv", BEIR_QRELS)
    expected = (
        f"{path}:1: looks like BEIR qrels (3 tab-separated fields), not trec_qrels (expected 4 "
        "columns (qid iter docid rel), got 3): set collection.qrels_format: beir_qrels"
    )
    for policy in ("fail", "skip"):
        with pytest.raises(BadRecordError) as err:
            list(TrecQrels(on_bad_record=policy).read(path))
        assert str(err.value) == expected


def test_jsonl_read_as_msmarco_tsv_names_beir_corpus(tmp_path: Path) -> None:
    path = _write(tmp_path, "corpus.jsonl", CORPUS)
    with pytest.raises(BadRecordError, match=r"corpus\.jsonl:1: looks like BEIR corpus \(JSON "):
        list(MsMarcoTsvDocuments(on_bad_record="skip").read(path))
    with pytest.raises(BadRecordError, match="set collection.documents_format: beir_corpus$"):
        list(MsMarcoTsvDocuments().read(path))
    # TREC topics read as BEIR queries: the JSON error becomes the format to set.
    topics = _write(tmp_path, "topics.txt", TOPICS)
    with pytest.raises(BadRecordError, match="set collection.queries_format: trec_topics$"):
        list(READERS["queries"]["beir_queries"]().read(topics))


def test_first_record_in_no_known_format_says_the_format_may_be_wrong(tmp_path: Path) -> None:
    """A TREC qrels file with a fifth column: nothing it looks like, so the first record says the
    file may not be trec_qrels, and skip still skips (the file might be mostly right)."""
    path = _write(tmp_path, "qrels", TREC_QRELS_5)
    with pytest.raises(BadRecordError) as err:
        list(TrecQrels().read(path))
    assert str(err.value) == (
        f"{path}:1: expected 4 columns (qid iter docid rel), got 5; as this is the file's first "
        "record, the file may not be trec_qrels at all: check collection.qrels_format"
    )
    bad = [x for x in TrecQrels().read_with_errors(path) if isinstance(x, BadRecord)]
    assert [b.line for b in bad] == [1, 2]
    assert bad[1].problem == "expected 4 columns (qid iter docid rel), got 5"  # the first only


def test_a_bad_record_in_a_file_of_the_right_format_is_left_as_it_is(tmp_path: Path) -> None:
    path = _write(tmp_path, "qrels", "q1 0 d1 yes\nq1 0 d2 1\n")
    with pytest.raises(BadRecordError) as err:
        list(TrecQrels().read(path))
    assert str(err.value) == f"{path}:1: non-integer relevance 'yes'"


def test_gzipped_file_without_gz_name(tmp_path: Path) -> None:
    path = tmp_path / "corpus.jsonl"
    path.write_bytes(gzip.compress(CORPUS.encode()))
    with pytest.raises(BadRecordError, match="gzip-compressed but its name does not end in .gz"):
        list(BeirCorpus(on_bad_record="skip").read(str(path)))


def test_no_records_message(tmp_path: Path) -> None:
    empty = _write(tmp_path, "queries.jsonl", "")
    assert sniff.no_records_message([empty], "queries", "beir_queries") == (
        f"{empty}: the queries file is empty (collection.queries)"
    )
    # A block format finds none of its blocks in a file of another format: no record at all.
    jsonl = _write(tmp_path, "q.jsonl", QUERIES)
    assert list(TrecTopics().read(jsonl)) == []
    assert sniff.no_records_message([jsonl], "queries", "trec_topics") == (
        f"{jsonl}: no queries record found in it as trec_topics (collection.queries_format); "
        "it looks like BEIR queries (JSON lines): set collection.queries_format: beir_queries"
    )
