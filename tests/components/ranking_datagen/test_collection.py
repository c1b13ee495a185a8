"""Unit tests of components.ranking_datagen.collection: the bad-record report, driver-side
readers with locations, collection-level checks, and unwrapping Beam errors."""

from __future__ import annotations

from pathlib import Path

import apache_beam as beam
import pytest
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.testing.util import assert_that, equal_to

from components.ranking_datagen import collection as collection_io
from components.ranking_datagen.readers import BadRecord, BadRecordError


def test_report_fail_raises_at_first_record() -> None:
    report = collection_io.BadRecordReport("fail")
    with pytest.raises(BadRecordError, match=r"^q\.tsv:3: empty text$"):
        report.add("queries", BadRecord("q.tsv", 3, "empty text"))


def test_report_skip_counts_by_kind_with_a_few_examples() -> None:
    report = collection_io.BadRecordReport("skip", max_examples=2)
    for line in (1, 2, 3):
        report.add("qrels", BadRecord("qrels.txt", line, "non-integer relevance 'x'"))
    report.add_counted("documents", 7, [BadRecord("docs.tsv", 9, "empty text for docid 'd'")])
    report.add_counted("run", 0, [])
    assert report.count() == 10 and report.count("qrels") == 3
    assert report.to_dict() == {
        "total": 10,
        "by_kind": {"documents": 7, "qrels": 3},  # reader-kind order, zero counts left out
        "examples": {
            "documents": ["docs.tsv:9: empty text for docid 'd'"],
            "qrels": [
                "qrels.txt:1: non-integer relevance 'x'",
                "qrels.txt:2: non-integer relevance 'x'",
            ],
        },
    }


def _write(tmp_path: Path, name: str, text: str) -> str:
    (tmp_path / name).write_text(text)
    return str(tmp_path / name)


def test_qrels_across_files_and_checks_name_the_line(tmp_path: Path) -> None:
    a = _write(tmp_path, "qrels-a.txt", "q1 0 d1 1\nq1 0 d2 0\nq9 0 d1 1\n")
    b = _write(tmp_path, "qrels-b.txt", "q2 0 d1 2\nq1 0 d2 1\nq2 0 dX 1\n")
    report = collection_io.BadRecordReport("skip")
    judgments = collection_io.read_qrels(str(tmp_path / "qrels-*.txt"), "trec_qrels", report)
    assert judgments.qrels == {"q1": {"d1": 1, "d2": 0}, "q9": {"d1": 1}, "q2": {"d1": 2, "dX": 1}}
    assert judgments.where[("q2", "dX")] == (b, 3)
    collection_io.check_qrels(judgments, {"q1": "x", "q2": "y"}, {"d1", "d2"}, report)
    assert judgments.qrels == {"q1": {"d1": 1, "d2": 0}, "q2": {"d1": 2}}
    assert report.to_dict()["examples"]["qrels"] == [
        f"{b}:2: duplicate pair qid 'q1' docid 'd2' (first seen at {a}:2)",
        f"{a}:3: qrels qid 'q9' has no query",
        f"{b}:3: judged docid 'dX' (qid 'q2') is not in the corpus",
    ]
    # Under fail, the first offending line in file order stops the run.
    judgments = collection_io.read_qrels(a, "trec_qrels", collection_io.BadRecordReport("fail"))
    with pytest.raises(BadRecordError, match=rf"^{a}:3: qrels qid 'q9' has no query$"):
        collection_io.check_qrels(
            judgments, {"q1": "x"}, None, collection_io.BadRecordReport("fail")
        )


def test_run_check_drops_unknown_documents(tmp_path: Path) -> None:
    path = _write(tmp_path, "run.txt", "q1 Q0 d1 1 3.5 r\nq1 Q0 d7 2 2.5 r\nq2 Q0 d2 1 1 r\n")
    report = collection_io.BadRecordReport("skip")
    run = collection_io.read_run(path, report)
    collection_io.check_run(run, {"d1", "d2"}, report)
    assert run.scores == {"q1": {"d1": 3.5}, "q2": {"d2": 1.0}}
    assert report.to_dict()["examples"] == {
        "run": [f"{path}:2: run docid 'd7' (qid 'q1') is not in the corpus"]
    }


def test_queries_duplicate_across_files(tmp_path: Path) -> None:
    a = _write(tmp_path, "q1.tsv", "1\tfirst\n2\tsecond\n")
    b = _write(tmp_path, "q2.tsv", "3\tthird\n1\tagain\n")
    with pytest.raises(BadRecordError) as err:
        collection_io.read_queries(
            str(tmp_path / "q*.tsv"), "msmarco_tsv", collection_io.BadRecordReport("fail")
        )
    assert str(err.value) == f"{b}:2: duplicate qid '1' (first seen at {a}:1)"


def _fail_in_beam(mode: str) -> BaseException:
    def boom(x: int) -> int:
        if x == 2:
            raise BadRecordError(BadRecord("/data/docs.tsv", 7, "expected 2 columns, got 3"))
        return x

    options = PipelineOptions([f"--direct_running_mode={mode}", "--direct_num_workers=1"])
    with pytest.raises(Exception) as err:
        with beam.Pipeline(options=options) as p:
            _ = p | beam.Create([1, 2, 3]) | beam.Map(boom)
    return err.value


def test_unwrap_bad_record_error_from_beam() -> None:
    raised = _fail_in_beam("in_memory")
    assert "[while running" in str(raised)  # what Beam adds
    unwrapped = collection_io.unwrap_bad_record_error(raised)
    assert str(unwrapped) == "/data/docs.tsv:7: expected 2 columns, got 3"
    assert unwrapped.bad_record == BadRecord("/data/docs.tsv", 7, "expected 2 columns, got 3")
    # Multi-process runners only ship the worker's traceback text.
    text = RuntimeError(
        "Traceback (most recent call last):\n  ...\ncomponents.ranking_datagen.readers."
        "BadRecordError: gs://b/docs.tsv:12: empty text for docid 'x' [while running 'Read']\n"
    )
    assert collection_io.unwrap_bad_record_error(text).bad_record == BadRecord(
        "gs://b/docs.tsv", 12, "empty text for docid 'x'"
    )
    assert collection_io.unwrap_bad_record_error(RuntimeError("disk full")) is None


def _check_document_texts(pattern: str, batch_size: int, expected: list[tuple[str, str]]) -> None:
    """DocumentTexts in a real in-memory Beam pipeline: its documents are `expected`, in
    batches of at most `batch_size`."""
    with beam.Pipeline(options=PipelineOptions(["--direct_running_mode=in_memory"])) as p:
        out = p | collection_io.DocumentTexts(pattern, "msmarco_tsv", "skip", batch_size=batch_size)
        docs = out["texts"] | "Docs" >> beam.FlatMap(lambda batch: batch)
        assert_that(docs, equal_to(expected), label="Texts")
        too_big = out["texts"] | "TooBig" >> beam.Filter(lambda batch: len(batch) > batch_size)
        assert_that(too_big, equal_to([]), label="BatchSizes")


def test_document_texts_are_the_first_files_copy_of_each_docid(tmp_path: Path) -> None:
    """The texts the examples hold: one per docid, across files the first file's copy (the
    encoding pass's rule); within one file every document, in batches."""
    (tmp_path / "a.tsv").write_text("d1\tfirst one\nd2\ttwo\n")
    (tmp_path / "b.tsv").write_text("d3\tthree\nd1\tsecond one\n")
    first = [("d1", "first one"), ("d2", "two"), ("d3", "three")]
    _check_document_texts(str(tmp_path / "*.tsv"), 2, first)
    _check_document_texts(str(tmp_path / "b.tsv"), 8, [("d3", "three"), ("d1", "second one")])
