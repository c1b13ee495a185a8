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

from trainer_module import tuning
from trainer_module.run_fn import run_fn
from trainer_module.tuning_config import TRIALS_KEY, TunerConfig, chosen

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


def test_the_config_section_refuses_what_cannot_run() -> None:
    with pytest.raises(ValueError, match="space: is empty"):
        TunerConfig(max_trials=2)
    with pytest.raises(
        ValueError, match=r"algorithm: must be one of \['grid', 'random'\] \(did you mean grid\?\)"
    ):
        TunerConfig(max_trials=2, algorithm="gird", space={"train_steps": [1]})
    with pytest.raises(ValueError, match="distinct values"):
        TunerConfig(max_trials=2, space={"train_steps": [1, 1]})
