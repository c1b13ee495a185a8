"""k-fold cross-validation end to end (issue 17): a real LocalDagRunner run of the demo
pipeline with evaluator.cross_validation.folds 3, whose RankingEvaluator ranks every judged query
with the fold branch's model that never saw it, and blesses on all of them.

One run per session (about a minute and a half on 2 cores: 4 short Trainers).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from demo_pipeline import _run_pipeline, _snapshot

from rankcore import folds
from rankcore.fusion import read_fusion
from rankcore.metrics import read_qrels, read_run
from trainer_module.validation import validation_metric

K = 3
PIPELINE_NAME = "cv-test"
SETTINGS = [
    f"runner.pipeline_name={PIPELINE_NAME}",
    f"evaluator.cross_validation.folds={K}",
    f"datagen.split.num_folds={K}",
    "trainer.train_steps=40",
    "trainer.checkpoint_every=20",
    "trainer.validate_every=20",
    "trainer.ranking.fusion.mode=tuned",
]


@pytest.fixture(scope="module")
def cv_run(tmp_path_factory: pytest.TempPathFactory):
    outputs = tmp_path_factory.mktemp("rankpipe-cv") / "outputs"
    output = _run_pipeline(outputs, SETTINGS)
    return _snapshot(outputs / "pipelines" / PIPELINE_NAME, output), outputs


def _datagen_summary(outputs: Path) -> dict:
    (path,) = (outputs / "pipelines" / PIPELINE_NAME / "RankingDataGen" / "summary").glob(
        "*/summary.json"
    )
    return json.loads(path.read_text())


def test_every_judged_query_is_ranked_once_by_the_model_that_never_saw_it(cv_run) -> None:
    run, outputs = cv_run
    metrics = run.metrics
    cv = metrics["cross_validation"]
    fold_of = _datagen_summary(outputs)["cross_validation"]["fold_of"]
    ranked = read_run(os.path.join(run.evaluation.uri, "candidate.run"))
    # A partition: every judged query (with candidates) is in one fold and ranked once.
    assert set(ranked) == set(fold_of)
    assert metrics["num_queries"] == len(fold_of) == sum(f["queries"] for f in cv["per_fold"])
    assert [f["fold"] for f in cv["per_fold"]] == list(range(K))
    for f in cv["per_fold"]:
        assert f["queries"] == sum(1 for q in fold_of if fold_of[q] == f["fold"])
        assert f["split"] == folds.split_name(f["fold"], folds.EVAL)
    # Each fold's model is its own fold branch's Trainer output, not the pushed model.
    models = [f["model"] for f in cv["per_fold"]]
    assert len(set(models)) == K
    assert all(f"Trainer_fold{i}" in m for i, m in enumerate(models))
    assert all(metrics["model"] not in m for m in models)  # the pushed model (Trainer)
    assert "/Trainer/" in metrics["model"]
    # Blessed (or not) on all queries, with significance over all of them.
    assert metrics["comparisons"]["first_stage"][metrics["main_metric"]]["wins"] + metrics[
        "comparisons"
    ]["first_stage"][metrics["main_metric"]]["ties"] + metrics["comparisons"]["first_stage"][
        metrics["main_metric"]
    ]["losses"] == len(fold_of)


def test_each_fold_alpha_was_tuned_on_the_next_fold_only(cv_run) -> None:
    """Fold branch i's dev figure of the first stage is the first stage's figure over fold
    i+1's queries exactly (as the Trainer computes it: every judgment of those queries, from
    the qrels artifact's file for that split), and differs from its own test fold's: its alpha
    was chosen on fold i+1."""
    run, outputs = cv_run
    fold_of = _datagen_summary(outputs)["cross_validation"]["fold_of"]
    first_stage = read_run(os.path.join(run.evaluation.uri, "first_stage.run"))
    (qrels_file,) = (outputs / "pipelines" / PIPELINE_NAME / "RankingDataGen" / "qrels").glob(
        "*/qrels.txt"
    )
    qrels = read_qrels(str(qrels_file))

    def first_stage_on(fold: int) -> float:
        qids = [q for q in fold_of if fold_of[q] == fold]
        judged = {q: qrels[q] for q in qids}
        return validation_metric(judged, {q: first_stage[q] for q in qids}, "ndcg_cut_10", 1)

    for f in run.metrics["cross_validation"]["per_fold"]:
        fusion = read_fusion(f["model"])
        assert fusion is not None and fusion["alpha"] == f["alpha"]
        assert fusion["metric"] == "ndcg_cut_10"
        dev_fold = (f["fold"] + 1) % K
        assert fusion["dev_first_stage"] == pytest.approx(first_stage_on(dev_fold), abs=1e-9)
        assert fusion["dev_first_stage"] != pytest.approx(first_stage_on(f["fold"]), abs=1e-6)


def test_reports_and_model_card_say_it_is_cross_validated(cv_run) -> None:
    run, outputs = cv_run
    report = Path(run.evaluation.uri, "report.md").read_text()
    assert f"on all queries, {K}-fold cross-validated" in report
    assert "## Folds" in report
    assert f"all queries, {K}-fold" in run.stdout
    if run.pushed.custom_properties["pushed"].int_value:
        destination = run.pushed.custom_properties["pushed_destination"].string_value
        card = json.loads(Path(destination, "model_card.json").read_text())
        assert card["evaluation"]["cross_validation"]["folds"] == K
        # The card's fusion is the pushed model's own alpha, chosen on datagen.split.dev_fold.
        assert card["fusion"] == read_fusion(destination)
