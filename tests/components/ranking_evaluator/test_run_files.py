"""TREC run files the evaluator writes: ranks consistent with scores, exact round trip; and the
scoring helpers that turn inference output into runs."""

from __future__ import annotations

from pathlib import Path

import pytest
import tensorflow as tf

from components.ranking_evaluator import eval_examples, scoring
from components.ranking_evaluator.outputs import write_trec_run
from rankcore.metrics import rank_documents, read_run


def read_lines(path: Path) -> list[list[str]]:
    return [line.split() for line in path.read_text().splitlines()]


def test_ranks_follow_scores_then_docno_descending(tmp_path: Path) -> None:
    run = {
        "2": {"d1": 0.5, "d10": 0.5, "d3": 0.5, "d2": 0.9},
        "10": {"x": -1.0, "y": 2.0},
    }
    path = tmp_path / "run.txt"
    write_trec_run(str(path), run, "cand")
    lines = read_lines(path)
    # Queries in sorted (string) order; within a query score desc, ties by docno desc.
    assert [(q, d, r) for q, _, d, r, _, _ in lines] == [
        ("10", "y", "1"), ("10", "x", "2"),
        ("2", "d2", "1"), ("2", "d3", "2"), ("2", "d10", "3"), ("2", "d1", "4"),
    ]  # fmt: skip
    assert {line[5] for line in lines} == {"cand"}
    # The rank column is exactly trec_eval's order for the scores in the file.
    back = read_run(path)
    for qid, docs in back.items():
        ranked = [line[2] for line in lines if line[0] == qid]
        assert ranked == rank_documents(docs)


def test_scores_round_trip_exactly(tmp_path: Path) -> None:
    # float32 scores close together: 6-decimal printing would tie (and reorder) them.
    scores = [float(tf.constant(v, tf.float32).numpy()) for v in (0.1234567, 0.12345671, 1e-9)]
    run = {"q": {f"d{i}": s for i, s in enumerate(scores)}}
    path = tmp_path / "run.txt"
    write_trec_run(str(path), run, "r")
    assert read_run(path) == run
    assert [line[2] for line in read_lines(path)] == ["d1", "d0", "d2"]


def test_example_key_reads_qid_and_docid() -> None:
    example = tf.train.Example()
    example.features.feature["qid"].bytes_list.value.append(b"q7")
    example.features.feature["docids"].bytes_list.value.append(b"doc-\xc3\xa9")
    assert eval_examples.example_key(example.SerializeToString()) == ("q7", "doc-é")


def test_to_runs_splits_models_and_rejects_duplicates() -> None:
    scored = [("q1", "a", (0.5, 0.1)), ("q1", "b", (0.2, 0.3)), ("q2", "a", (1.0, 2.0))]
    runs = scoring.to_runs(scored, ["candidate", "baseline"])
    assert runs == {
        "candidate": {"q1": {"a": 0.5, "b": 0.2}, "q2": {"a": 1.0}},
        "baseline": {"q1": {"a": 0.1, "b": 0.3}, "q2": {"a": 2.0}},
    }
    with pytest.raises(ValueError, match="candidate 'a' of query 'q1' appears twice"):
        scoring.to_runs([*scored, ("q1", "a", (0.0, 0.0))], ["candidate", "baseline"])
