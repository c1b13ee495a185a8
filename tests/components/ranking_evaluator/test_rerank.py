"""`rankpipe rerank` / components.ranking_evaluator.rerank with a real pushed model.

The model is the one the shared demo pipeline runs pushed (demo_pipeline.py: run 2 pushes the
newest version); reranking the evaluator's own first-stage run with it must give back the run
the evaluator scored and blessed (candidate.run).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from demo_pipeline import DemoRuns

from components.ranking_evaluator import rerank
from rankcore.metrics import rank_documents, read_run, read_run_with_runid

REPO_ROOT = Path(__file__).resolve().parents[3]


def _inputs(runs: DemoRuns) -> dict[str, str]:
    evaluation = Path(runs.second.evaluation.uri)
    return {
        "evaluation": str(evaluation),
        "run": str(evaluation / "first_stage.run"),
        "queries": str(runs.collection / "queries.jsonl"),
        "documents": str(runs.collection / "corpus.jsonl"),
    }


def _pushed(run) -> str:
    return run.pushed.custom_properties["pushed_destination"].string_value


def _ordered(ranked: dict[str, list[tuple[str, float]]]) -> None:
    for docs in ranked.values():
        scores = dict(docs)
        assert [d for d, _ in docs] == rank_documents(scores)  # score desc, docno desc on ties


# --------------------------------------------------------------------------- no model needed


def test_format_and_write_run(tmp_path: Path) -> None:
    ranked = {"q2": [("d1", 0.5)], "q1": [("d9", 2.0), ("d3", 0.1 + 0.2)]}
    text = rerank.format_run(ranked, "mine")
    assert text == (
        "q1 Q0 d9 1 2.0 mine\nq1 Q0 d3 2 0.30000000000000004 mine\nq2 Q0 d1 1 0.5 mine\n"
    )
    out = tmp_path / "sub" / "new.run"
    rerank.write_run(ranked, str(out), "mine")
    assert out.read_text() == text and os.listdir(out.parent) == ["new.run"]  # no temp file
    run, runid = read_run_with_runid(out)
    assert runid == "mine" and run["q1"] == {"d9": 2.0, "d3": 0.1 + 0.2}  # repr: exact floats
    with pytest.raises(ValueError, match="runid must be one word"):
        rerank.format_run(ranked, "two words")


def test_missing_model_is_named(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="nothing: no such directory"):
        rerank.model_path(str(tmp_path / "nothing"))
    with pytest.raises(FileNotFoundError, match="neither a SavedModel directory"):
        rerank.model_path(str(tmp_path))  # no version in it


# --------------------------------------------------------------------------- the pushed model


@pytest.mark.e2e
def test_rerank_gives_the_evaluators_ranking(pipeline_runs: DemoRuns) -> None:
    inputs = _inputs(pipeline_runs)
    # The destination resolves to its newest version: run 2's push.
    newest = _pushed(pipeline_runs.second)
    assert rerank.model_path(str(pipeline_runs.serving_base)) == newest
    assert rerank.model_path(newest) == newest
    ranked = rerank.rerank_run(
        str(pipeline_runs.serving_base), inputs["run"], inputs["queries"], inputs["documents"]
    )
    first_stage = read_run(inputs["run"])
    assert set(ranked) == set(first_stage)
    for qid, docs in ranked.items():
        assert sorted(d for d, _ in docs) == sorted(first_stage[qid])  # same candidates
    _ordered(ranked)
    # The scores of the ranking the evaluator judged (rank_candidates = its candidate.run).
    candidate = read_run(os.path.join(inputs["evaluation"], "candidate.run"))
    for qid, docs in ranked.items():
        assert dict(docs) == pytest.approx(candidate[qid], abs=1e-5)


@pytest.mark.e2e
def test_depth_and_reranker_scores(pipeline_runs: DemoRuns, tmp_path: Path) -> None:
    inputs = _inputs(pipeline_runs)
    model = _pushed(pipeline_runs.second)
    first_stage = read_run(inputs["run"])
    top = rerank.rerank_run(
        model, inputs["run"], inputs["queries"], inputs["documents"], depth=5, scores="reranker"
    )
    for qid, docs in top.items():
        assert {d for d, _ in docs} == set(rank_documents(first_stage[qid])[:5])
    _ordered(top)
    reranker_run = Path(inputs["evaluation"]) / "reranker.run"
    if reranker_run.exists():  # written when the model fuses: the reranker alone
        alone = read_run(reranker_run)
        for qid, docs in top.items():
            assert dict(docs) == pytest.approx({d: alone[qid][d] for d, _ in docs}, abs=1e-5)
    # A query of the run without text is an error naming it.
    queries = tmp_path / "queries.jsonl"
    lines = Path(inputs["queries"]).read_text().splitlines(keepends=True)
    kept = [line for line in lines if f'"{sorted(first_stage)[0]}"' not in line]
    queries.write_text("".join(kept))
    with pytest.raises(ValueError, match=rf"1 queries of the run not in {queries}: "):
        rerank.rerank_run(model, inputs["run"], str(queries), inputs["documents"])


@pytest.mark.e2e
def test_cli_writes_the_run_quietly(pipeline_runs: DemoRuns, tmp_path: Path) -> None:
    inputs = _inputs(pipeline_runs)
    out = tmp_path / "reranked.run"
    argv = [
        sys.executable, "-m", "pipelines.cli", "rerank", _pushed(pipeline_runs.second),
        inputs["run"], "--queries", inputs["queries"], "--documents", inputs["documents"],
        "--documents-format", "beir_corpus", "--runid", "knrm",
    ]  # fmt: skip
    done = subprocess.run(
        [*argv, "--output", str(out)], capture_output=True, text=True, cwd=REPO_ROOT, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""  # no TensorFlow start-up lines, no library warnings
    run, runid = read_run_with_runid(out)
    first_stage = read_run(inputs["run"])
    assert runid == "knrm" and set(run) == set(first_stage)
    documents = sum(len(d) for d in run.values())
    assert done.stdout == f"rankpipe rerank: {len(run)} queries, {documents} documents -> {out}\n"
    to_stdout = subprocess.run(argv, capture_output=True, text=True, cwd=REPO_ROOT, check=False)
    assert to_stdout.returncode == 0 and to_stdout.stdout == out.read_text()
    missing = subprocess.run(
        [*argv[:4], str(tmp_path / "nothing"), *argv[5:]],
        capture_output=True, text=True, cwd=REPO_ROOT, check=False,
    )  # fmt: skip
    assert missing.returncode == 2
    nothing = tmp_path / "nothing"
    assert missing.stderr == (
        f"rankpipe rerank: {nothing}: no such directory (a pushed model or push destination)\n"
    )
