"""The Tuner's search (trainer_module/tuning.py) on real examples with the real Trainer: each
trial is a whole training run scored on the dev split, the best is what run_fn then trains,
and the search reads the train and dev splits only."""

from __future__ import annotations

import json
import os
import shutil

import keras_tuner
import pytest
import trainer_testdata
from tfx import v1 as tfx

from rankcore import folds
from trainer_module import tuning, validation
from trainer_module.run_fn import run_fn
from trainer_module.tuning_config import TRIALS_KEY, TunerConfig, chosen, combinations

SPACE = {"train_steps": [2, 6], "learning_rate": [0.01, 0.001]}


def _fn_args(examples: str, transform_graph: str, work: str, tuner: dict, **trainer) -> object:
    cfg = trainer_testdata.small_config(validate_every=0, checkpoint_every=6, **trainer)
    return tfx.components.FnArgs(
        working_dir=work,
        train_files=trainer_testdata.split_pattern(examples, "train"),
        eval_files=trainer_testdata.split_pattern(examples, "dev"),
        transform_graph_path=transform_graph,
        custom_config={
            "trainer": cfg.to_dict(),
            "max_query_length": trainer_testdata.MAX_Q,
            "max_doc_length": trainer_testdata.MAX_D,
            "tuner": tuner,
        },
    )


def _search(fn_args: object) -> tuning.RecipeSearch:
    result = tuning.tuner_fn(fn_args)
    result.tuner.search(**result.fit_kwargs)
    return result.tuner


@pytest.fixture(scope="module")
def searched(examples_dir, transform_graph, tmp_path_factory):
    work = str(tmp_path_factory.mktemp("search"))
    tuner = {"max_trials": 3, "space": SPACE}
    return _search(_fn_args(examples_dir, transform_graph, work, tuner)), work


def test_each_trial_is_a_training_run_and_the_best_is_chosen(searched) -> None:
    search, work = searched
    trials = search.trials()
    # Grid order, cut at max_trials: 3 of the 4 combinations, each trained and scored on dev.
    assert len(trials) == 3
    assert {json.dumps(t["values"], sort_keys=True) for t in trials} == {
        json.dumps(v, sort_keys=True)
        for v in (
            {"learning_rate": 0.01, "train_steps": 2},
            {"learning_rate": 0.01, "train_steps": 6},
            {"learning_rate": 0.001, "train_steps": 2},
        )
    }
    scores = [t["score"] for t in trials]
    assert all(0.0 < s <= 1.0 for s in scores)
    assert scores == sorted(scores, reverse=True)  # best first
    best = search.best_config()
    assert chosen(best).values == trials[0]["values"]
    assert best[TRIALS_KEY] == trials
    # A trial's model is not kept: its directory is removed once it is scored.
    assert not os.path.exists(os.path.join(work, "search", "trials", trials[0]["trial_id"]))


def test_the_search_reads_no_split_but_train_and_dev(
    searched, examples_dir, transform_graph, tmp_path
) -> None:
    """With the test split's records replaced by garbage (reading one would fail), the search
    gives the same trials and scores: the evaluated queries' judgments are never read."""
    copy = tmp_path / "examples"
    shutil.copytree(examples_dir, copy)
    for shard in (copy / "Split-test").iterdir():
        shard.write_bytes(b"not a TFRecord: the Tuner must not read the evaluated split")
    tuner = {"max_trials": 3, "space": SPACE}
    again = _search(_fn_args(str(copy), transform_graph, str(tmp_path / "work"), tuner))
    first = [(t["values"], t["score"]) for t in searched[0].trials()]
    assert [(t["values"], t["score"]) for t in again.trials()] == first


def _write_qrels(path, qrels: dict) -> None:
    lines = [f"{q} 0 {d} {g}\n" for q in sorted(qrels) for d, g in sorted(qrels[q].items())]
    path.write_text("".join(lines))


@pytest.mark.parametrize("outside", [False, True])
def test_the_dev_metric_counts_every_judgment_of_the_dev_split_only(
    searched, examples_dir, transform_graph, tmp_path, outside: bool
) -> None:
    """With RankingDataGen's per-split judgments (custom_config qrels_uri and dev_splits) a
    trial is scored as the evaluator scores: the dev file holding just the judged candidates
    gives the same scores as the examples alone; a relevant document outside the candidates
    (in the ideal ranking, never ranked) lowers every trial's score. The test split's file,
    garbage here, is never opened."""
    judged = validation.read_candidates(
        trainer_testdata.split_pattern(examples_dir, "dev"),
        64,
        trainer_testdata.MAX_Q,
        trainer_testdata.MAX_D,
    ).qrels
    if outside:
        judged = {q: {**docs, "no-candidate-doc": 1} for q, docs in judged.items()}
    qrels_dir = tmp_path / "qrels"
    qrels_dir.mkdir()
    _write_qrels(qrels_dir / folds.split_qrels_file("dev"), judged)
    (qrels_dir / folds.split_qrels_file("test")).write_text("not qrels: never to be read\n")
    args = _fn_args(
        examples_dir, transform_graph, str(tmp_path / "work"), {"max_trials": 3, "space": SPACE}
    )
    args.custom_config.update(qrels_uri=str(qrels_dir), dev_splits=["dev"])
    again = {json.dumps(t["values"], sort_keys=True): t["score"] for t in _search(args).trials()}
    first = {json.dumps(t["values"], sort_keys=True): t["score"] for t in searched[0].trials()}
    assert again.keys() == first.keys()
    for key, score in again.items():
        if outside:
            assert score < first[key] - 1e-3, key
        else:
            assert score == pytest.approx(first[key], abs=1e-9), key


def test_the_trainer_trains_what_the_tuner_chose(searched, examples_dir, transform_graph, tmp_path):
    search, _ = searched
    best = search.best_config()
    best["values"] = {"train_steps": "4", "learning_rate": "0.001"}  # a choice != TrainArgs'
    args = _fn_args(examples_dir, transform_graph, str(tmp_path / "work"), {})
    args.custom_config.pop("tuner")
    args.train_steps = 10  # TrainArgs.num_steps: the Tuner's train_steps wins
    args.hyperparameters = json.loads(json.dumps(best))  # as TFX's Trainer reads the file
    args.serving_model_dir = str(tmp_path / "Trainer" / "model" / "1" / "Format-Serving")
    args.model_run_dir = str(tmp_path / "Trainer" / "model_run" / "1")
    result = run_fn(args)
    assert result.steps == 4
    assert result.recipe[-len(best[TRIALS_KEY]) - 1].startswith(
        "Chosen by the Tuner on the dev queries (dev_ndcg_cut_10): `train_steps: 4`"
    )
    # The exported model describes itself with the choice (the model card prints it).
    path = os.path.join(args.serving_model_dir, "assets.extra", "model_description.json")
    with open(path) as f:
        assert any(line.startswith("Chosen by the Tuner") for line in json.load(f))


def test_a_failing_trial_stops_the_search_naming_it(examples_dir, transform_graph, tmp_path):
    tuner = {"max_trials": 2, "space": {"max_loss": [1e-9]}}  # every step "diverges"
    args = _fn_args(examples_dir, transform_graph, str(tmp_path), tuner, train_steps=6)
    with pytest.raises(keras_tuner.errors.FatalError, match=r"Tuner trial 0 \({'max_loss': 1e-09}"):
        _search(args)


def test_zero_shot_is_tried_once_whatever_the_training_keys(
    bert_checkpoint, examples_dir, transform_graph, tmp_path
) -> None:
    # encoder_learning_rate shapes training only: at train_steps 0 it is not varied
    # (KerasTuner's conditional scope), so the grid is 3 trials, not 4 with zero-shot twice;
    # the Trainer's own rate stands in the zero-shot trial.
    space = {"train_steps": [0, 2], "encoder_learning_rate": [1e-3, 1e-4]}
    expected = [
        {"train_steps": 0},
        {"train_steps": 2, "encoder_learning_rate": 1e-3},
        {"train_steps": 2, "encoder_learning_rate": 1e-4},
    ]
    assert combinations(space) == expected  # what config checks and the CorpusEncoder read
    tuner = {"max_trials": 4, "space": space}
    bert = {"model": "bert", "bert": {"checkpoint_dir": bert_checkpoint}}
    args = _fn_args(examples_dir, transform_graph, str(tmp_path), tuner, **bert)
    search = _search(args)
    tried = sorted(search.trials(), key=lambda t: int(t["trial_id"]))
    assert [t["values"] for t in tried] == expected
    assert all(t["score"] is not None for t in tried)


def test_keys_that_matter_without_training_are_searched_at_zero_steps() -> None:
    # A companion encoder changes a zero-shot model's scores: it is varied at 0 steps too.
    space = {"train_steps": [0, 6], "recipe.frozen_documents.companion_checkpoint_dir": [None, "m"]}
    assert len(combinations(space)) == 4
    # Without a zero-shot value nothing is conditional.
    assert len(combinations({"train_steps": [2, 6], "learning_rate": [0.01, 0.001]})) == 4


def test_the_config_section_refuses_what_cannot_run() -> None:
    with pytest.raises(ValueError, match="space: is empty"):
        TunerConfig(max_trials=2)
    with pytest.raises(
        ValueError, match=r"algorithm: must be one of \['grid', 'random'\] \(did you mean grid\?\)"
    ):
        TunerConfig(max_trials=2, algorithm="gird", space={"train_steps": [1]})
    with pytest.raises(ValueError, match="distinct values"):
        TunerConfig(max_trials=2, space={"train_steps": [1, 1]})
