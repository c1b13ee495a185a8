"""Every judged query counts (issue 39): a real LocalDagRunner run of the demo pipeline on the
demo collection with one judged test query rewritten into words no document holds, so BM25
returns nothing for it and it has no example. The RankingEvaluator still evaluates it: it is
in every system's per-query table at trec_eval -c's 0, in the tests and the means, which equal
trec_eval -c's (pytrec_eval, trec_eval's own C code, on the written run and qrels files), and
the report and the console say how many judged queries had no candidate.

One run per module (about a minute on 2 cores: a short Trainer)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import pytrec_eval
from demo_pipeline import _run_pipeline, _snapshot

from components.ranking_datagen import splits
from components.ranking_evaluator.outputs import RUN_FILES
from pipelines import demo_data
from pipelines.config import load_config
from rankcore import folds
from rankcore.metrics import read_qrels, read_run

pytestmark = pytest.mark.e2e

PIPELINE_NAME = "no-candidate-test"
UNMATCHED_TEXT = "xyzzy plugh"  # no demo document has these words (demo_data's syllables)
NOTE = "had no candidate: they score 0 for every system, as trec_eval -c counts them"


def _test_qids(qids: list[str]) -> list[str]:
    """The demo config's test queries (datagen.split's kfold hash)."""
    split = load_config("demo", []).datagen.split
    assignment = splits.kfold_assignment(
        qids, split.num_folds, split.dev_fold, split.test_fold, split.seed
    )
    return sorted(q for q, s in assignment.items() if s == "test")


@pytest.fixture(scope="module")
def no_candidate_run(tmp_path_factory: pytest.TempPathFactory):
    base = tmp_path_factory.mktemp("rankpipe-no-candidate")
    paths = demo_data.generate(base / "collection")
    judged = sorted({line.split()[0] for line in Path(paths["qrels"]).read_text().splitlines()})
    unmatched = _test_qids(judged)[0]
    lines = Path(paths["queries"]).read_text().splitlines()
    rewritten = [json.loads(line) for line in lines]
    for query in rewritten:
        if query["_id"] == unmatched:
            query["text"] = UNMATCHED_TEXT
    Path(paths["queries"]).write_text("".join(json.dumps(q) + "\n" for q in rewritten))
    settings = [
        f"runner.pipeline_name={PIPELINE_NAME}",
        "collection.demo.enabled=false",
        f"collection.documents={paths['documents']}",
        f"collection.queries={paths['queries']}",
        f"collection.qrels={paths['qrels']}",
        "trainer.train_steps=20",
        "trainer.checkpoint_every=20",
        "trainer.validate_every=20",
        "evaluator.min_values={}",
    ]
    outputs = base / "outputs"
    output = _run_pipeline(outputs, settings)
    run = _snapshot(outputs / "pipelines" / PIPELINE_NAME, output)
    (record,) = (outputs / "pipelines" / PIPELINE_NAME / "RankingDataGen" / "qrels").glob(
        f"*/{folds.SPLIT_QUERIES_FILE}"
    )
    return run, unmatched, json.loads(record.read_text())["splits"], record.parent


def test_the_query_without_candidates_is_evaluated_as_trec_eval_c_counts_it(
    no_candidate_run,
) -> None:
    run, unmatched, record, qrels_dir = no_candidate_run
    metrics = run.metrics
    test = record["test"]
    assert test[folds.WITHOUT_CANDIDATES] == [unmatched]
    judged_test = _test_qids(sorted(read_qrels(str(qrels_dir / "qrels.txt"))))
    assert test[folds.JUDGED] == len(judged_test) == metrics["num_queries"]
    assert metrics["queries_without_candidates"] == {
        "count": 1,
        "judged": len(judged_test),
        "qids": [unmatched],
        "note": f"1 of {len(judged_test)} judged queries {NOTE}",
    }
    qrels = read_qrels(str(qrels_dir / "qrels.txt"))
    test_qrels = {q: qrels[q] for q in judged_test}
    for system, file in RUN_FILES.items():
        if system not in metrics["runs"]:
            continue
        ranking = read_run(os.path.join(run.evaluation.uri, file))
        assert unmatched not in ranking  # in no run: the first stage gave it nothing
        assert metrics["per_query"][system][unmatched]["ndcg_cut_10"] == 0.0
        # trec_eval -c: the mean over every judged query, one missing from the run being 0.
        evaluator = pytrec_eval.RelevanceEvaluator(test_qrels, {"ndcg_cut.10"})
        found = evaluator.evaluate({q: docs for q, docs in ranking.items() if q in test_qrels})
        per_query = [found.get(q, {}).get("ndcg_cut_10", 0.0) for q in sorted(test_qrels)]
        mean = sum(per_query) / len(test_qrels)
        assert metrics["aggregate"][system]["ndcg_cut_10"] == pytest.approx(mean, abs=1e-9)
    # In the paired tests as a tie at 0, and in the small-sample count.
    stats = metrics["comparisons"]["first_stage"]["ndcg_cut_10"]
    assert stats["n"] == len(judged_test)
    assert stats["ties"] >= 1


def test_the_report_and_the_console_say_how_many_had_none(no_candidate_run) -> None:
    run, _, record, _ = no_candidate_run
    judged = record["test"][folds.JUDGED]
    sentence = f"1 of {judged} judged queries {NOTE}"
    report = Path(run.evaluation.uri, "report.md").read_text()
    assert f"({judged} queries," in report and f"{sentence}." in report
    assert sentence in Path(run.evaluation.uri, "report.html").read_text()
    (line,) = [ln for ln in run.stdout.splitlines() if "RankingEvaluator" in ln and NOTE in ln]
    assert sentence in line
