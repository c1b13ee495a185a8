"""The Tuner in the pipeline: one per branch on that branch's train and dev splits only (never
the split it is evaluated on), its choice wired into the Trainer, in the Kubeflow spec, its
config checked before anything runs, and a real LocalDagRunner run whose Trainer trains what
its Tuner chose."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from test_kubeflow_runner import cluster_overrides

from pipelines import kubeflow_runner
from pipelines.component_table import corpus_encoders
from pipelines.config import load_config
from pipelines.pipeline import create_components
from rankcore import folds
from rankcore.config_loader import ConfigError

TUNER = ["tuner.max_trials=2", "tuner.space={train_steps: [10, 20]}"]
FOLDS = ["evaluator.cross_validation.folds=3", "datagen.split.num_folds=3"]


def _splits(component, key: str) -> list[str]:
    return json.loads(component.exec_properties[key])["splits"]


@pytest.mark.parametrize("cross_validation", [False, True])
def test_each_tuner_reads_its_trainers_train_and_dev_splits_only(cross_validation: bool) -> None:
    overrides = TUNER + (FOLDS if cross_validation else [])
    built = {c.id: c for c in create_components(load_config("demo", overrides, check_inputs=False))}
    branches = [None, 0, 1, 2] if cross_validation else [None]
    for fold in branches:
        tuner = built["Tuner" if fold is None else folds.node_id("Tuner", fold)]
        trainer = built["Trainer" if fold is None else folds.node_id("Trainer", fold)]
        read = _splits(tuner, "train_args") + _splits(tuner, "eval_args")
        assert read == _splits(trainer, "train_args") + _splits(trainer, "eval_args")
        # The judgments it reads (the qrels artifact's per-split files): its dev splits' only.
        for component in (tuner, trainer):
            custom = json.loads(component.exec_properties["custom_config"])
            assert custom["dev_splits"] == _splits(component, "eval_args"), component.id
            assert component.inputs["qrels"].producer_component_id == "RankingDataGen"
        read += custom["dev_splits"]
        # The evaluated queries: the test split, or the fold this branch's model ranks.
        evaluated = "test" if not cross_validation else folds.split_name(fold, folds.EVAL)
        assert evaluated not in read, (tuner.id, read)
        channel = trainer.inputs["hyperparameters"]
        assert channel.producer_component_id == tuner.id
    if not cross_validation:
        assert not any(node.startswith("Tuner_fold") for node in built)


def test_without_max_trials_there_is_no_tuner() -> None:
    built = {c.id: c for c in create_components(load_config("demo", check_inputs=False))}
    assert "Tuner" not in built
    assert "hyperparameters" not in built["Trainer"].inputs


def test_the_tuner_is_in_the_kubeflow_spec_before_its_trainer() -> None:
    config = load_config("demo", cluster_overrides("demo") + TUNER + FOLDS, check_inputs=False)
    tasks = kubeflow_runner.build_pipeline_job(config)["pipelineSpec"]["root"]["dag"]["tasks"]
    for fold in (None, 0, 1, 2):
        tuner = "Tuner" if fold is None else folds.node_id("Tuner", fold)
        trainer = "Trainer" if fold is None else folds.node_id("Trainer", fold)
        assert tuner in tasks
        source = tasks[trainer]["inputs"]["artifacts"]["hyperparameters"]["taskOutputArtifact"]
        assert source == {"producerTask": tuner, "outputArtifactKey": "best_hyperparameters"}


@pytest.mark.parametrize(
    "setting, message",
    [
        (
            "tuner.space={train_stesp: [10, 20]}",
            "tuner.space.train_stesp: no such key (did you mean train_steps?)",
        ),
        (
            "tuner.space={recipe.type: [sampled_groups, in_batch]}",
            "tuner.space combination {'recipe.type': 'in_batch'}: ",
        ),
        ("tuner.space={}", "tuner.space: is empty"),
        (
            "tuner.space={dual_encoder.checkpoint_dir: [/nonexistent/ckpt]}",
            "tuner.space.dual_encoder.checkpoint_dir[0]: /nonexistent/ckpt does not exist",
        ),
    ],
)
def test_a_space_that_cannot_run_is_refused_naming_the_key(setting: str, message: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_config("demo", ["tuner.max_trials=2", setting], check_inputs="exist" in message)
    assert message in str(info.value)


def test_the_corpus_is_encoded_for_every_tower_the_space_may_train(shared_data: Path) -> None:
    """A space that turns the companion on: the CorpusEncoder embeds it too (each once)."""
    base = load_config(
        "cranfield",
        ["trainer.recipe.frozen_documents.companion_checkpoint_dir=null"],
        check_inputs=False,
    )
    tuned = load_config(
        "cranfield",
        [
            "trainer.recipe.frozen_documents.companion_checkpoint_dir=null",
            "tuner.max_trials=2",
            "tuner.space={recipe.frozen_documents.companion_checkpoint_dir: "
            "[null, '${RANKPIPE_MPNET}']}",
        ],
        check_inputs=False,
    )
    assert len(corpus_encoders(base)) == 1
    specs = corpus_encoders(tuned)
    assert len(specs) == 2
    # The space's path was expanded as the key itself would be.
    mpnet = tuned.tuner.space["recipe.frozen_documents.companion_checkpoint_dir"][1]
    assert os.path.isabs(mpnet) and "${" not in mpnet
    assert specs[1].checkpoint_dir == mpnet


def test_a_real_run_trains_what_its_tuner_chose(tmp_path: Path, monkeypatch) -> None:
    """`rankpipe run demo` with a Tuner of two trials under LocalDagRunner: the Tuner writes
    best_hyperparameters through TFX's artifact, and the Trainer trains that many steps (not
    the trainer section's) and says so on the model card."""
    from pipelines import cli

    monkeypatch.setenv("RANKPIPE_OUTPUTS", str(tmp_path))
    code = cli.main(
        [
            "run",
            "demo",
            "--set",
            "trainer.train_steps=60",
            "--set",
            "trainer.checkpoint_every=30",
            "--set",
            "trainer.validate_every=30",
            "--set",
            "tuner.max_trials=2",
            "--set",
            "tuner.space={train_steps: [30, 90]}",
        ]
    )
    assert code == 0
    root = tmp_path / "pipelines" / "rankpipe-demo"
    (best_file,) = root.glob("Tuner/best_hyperparameters/*/best_hyperparameters.txt")
    best = json.loads(best_file.read_text())
    assert len(best["rankpipe_trials"]) == 2
    steps = json.loads(best["values"]["train_steps"])
    (results,) = root.glob("Trainer/model_run/*/train_results.json")
    assert json.loads(results.read_text())["steps"] == steps
    (card,) = (tmp_path / "serving" / "rankpipe-demo").glob("*/model_card.md")
    assert f"`train_steps: {steps}`" in card.read_text()
