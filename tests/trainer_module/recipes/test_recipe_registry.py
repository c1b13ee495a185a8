"""The recipes (trainer_module/recipes/): each registered under its config name, each owning
its cross-field rules, the one-of `trainer.recipe` section, the keys that moved into it, and
the frozen document tower the pipeline's CorpusEncoder embeds for."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import trainer_testdata

from rankcore import config_loader
from rankcore.config_loader import ConfigError
from rankcore.corpus_vectors import DocumentTower, EncoderSpec
from rankcore.encoders.hf_checkpoint import CHECKPOINT_FILES
from trainer_module.config import TrainerConfig
from trainer_module.recipes import RECIPES, corpus_tower, recipe_for
from trainer_module.recipes.config import RECIPE_TYPES
from trainer_module.recipes.frozen_documents import FrozenDocuments
from trainer_module.recipes.in_batch import InBatch
from trainer_module.recipes.sampled_groups import SampledGroups
from trainer_module.recipes.zero_shot import ZeroShot


def _dual(checkpoint: str = "/ckpt/minilm", **overrides) -> TrainerConfig:
    base = {"model": "dual_encoder", "dual_encoder": {"checkpoint_dir": checkpoint}}
    return trainer_testdata.small_config(**{**base, **overrides})


def _frozen(checkpoint: str = "/ckpt/minilm", **frozen) -> TrainerConfig:
    return _dual(
        checkpoint,
        loss="listwise_softmax",
        recipe={"type": "frozen_documents", "frozen_documents": frozen},
    )


@pytest.mark.parametrize(
    ("name", "cls", "config"),
    [
        ("sampled_groups", SampledGroups, lambda: trainer_testdata.small_config()),
        ("in_batch", InBatch, lambda: _dual(recipe={"type": "in_batch"})),
        ("frozen_documents", FrozenDocuments, _frozen),
        ("zero_shot", ZeroShot, lambda: _dual(train_steps=0)),
    ],
)
def test_each_recipe_is_registered_and_chosen_by_its_config(name, cls, config):
    assert RECIPES[name] is cls and cls.name == name
    recipe = recipe_for(config())
    assert type(recipe) is cls
    assert recipe.describe()[0].startswith(f"recipe `{name}`")


def test_the_config_types_are_the_registry_s_and_zero_shot_is_chosen_by_the_steps():
    assert RECIPE_TYPES == ("sampled_groups", "in_batch", "frozen_documents")
    cfg = _dual(recipe={"type": "in_batch"})
    zero = recipe_for(cfg, steps=0)  # TrainArgs num_steps 0
    assert type(zero) is ZeroShot and type(zero.configured) is InBatch
    assert zero.train_data is None and zero.document_tower(10) is None


def test_sampled_groups_refuses_the_in_batch_loss_with_its_new_place():
    with pytest.raises(ValueError, match="loss in_batch_softmax is now recipe.type: in_batch"):
        trainer_testdata.small_config(loss="in_batch_softmax")


def test_in_batch_needs_a_model_with_towers():
    with pytest.raises(ValueError, match="recipe.type in_batch needs a model with separate"):
        trainer_testdata.small_config(model="transformer", recipe={"type": "in_batch"})


def test_frozen_documents_rules_are_its_own():
    with pytest.raises(ValueError, match="needs model=dual_encoder and loss=listwise_softmax"):
        _dual(recipe={"type": "frozen_documents"})  # the default loss, pairwise_hinge
    with pytest.raises(ValueError, match="needs model=dual_encoder and loss=listwise_softmax"):
        trainer_testdata.small_config(loss="listwise_softmax", recipe={"type": "frozen_documents"})
    # At 0 steps it is zero-shot of the same model: the frozen tower (and companion) stay.
    zero = _dual(loss="listwise_softmax", train_steps=0, recipe={"type": "frozen_documents"})
    assert isinstance(recipe_for(zero), ZeroShot)
    assert recipe_for(zero).document_tower(16, "float32") is not None
    with pytest.raises(ValueError, match="companion_weight must be in"):
        _frozen(companion_weight=1.0)
    assert (
        _frozen(companion_checkpoint_dir="/ckpt/mpnet").recipe.frozen_documents.companion_weight
        == 0.5
    )


def test_zero_shot_needs_a_pretrained_model():
    with pytest.raises(ValueError, match=r"train_steps must be >= 1 \(0 = zero-shot: only"):
        trainer_testdata.small_config(train_steps=0)


def test_the_recipe_section_is_one_of():
    """Only the chosen recipe's subsection may be set: another recipe's is refused, naming
    recipe.type, instead of being silently ignored."""
    with pytest.raises(ConfigError, match="recipe.frozen_documents is read by recipe.type"):
        _dual(recipe={"type": "in_batch", "frozen_documents": {"companion_weight": 0.3}})
    with pytest.raises(ConfigError, match=r"recipe.type must be one of .*did you mean"):
        _dual(recipe={"type": "frozen_document"})


@pytest.mark.parametrize(
    ("old", "value", "new"),
    [
        ("frozen_documents", True, "recipe.type: frozen_documents"),
        (
            "companion_checkpoint_dir",
            "/ckpt/mpnet",
            "recipe.frozen_documents.companion_checkpoint_dir",
        ),
        ("companion_weight", 0.3, "recipe.frozen_documents.companion_weight"),
    ],
)
def test_a_moved_key_fails_with_its_new_name(old, value, new):
    data = {"model": "dual_encoder", "dual_encoder": {"checkpoint_dir": "/c", old: value}}
    with pytest.raises(ConfigError, match=f"dual_encoder.{old} is now {new}$"):
        TrainerConfig.from_dict(data)
    # In the pipeline file, under `trainer.`, and as a --set.
    with pytest.raises(ConfigError, match=f"trainer.dual_encoder.{old} is now trainer.{new}$"):
        config_loader.build(TrainerConfig, data, "p.yaml", "trainer.")
    with pytest.raises(
        ConfigError, match=f"--set dual_encoder.{old}: dual_encoder.{old} is now {new}"
    ):
        config_loader.check_key(TrainerConfig, f"dual_encoder.{old}")


def _checkpoint(directory: Path, content: bytes) -> str:
    directory.mkdir()
    for name in CHECKPOINT_FILES:
        (directory / name).write_bytes(content + name.encode())
    return str(directory)


def test_corpus_tower_is_the_frozen_tower_the_trainer_embeds(tmp_path):
    """corpus_tower (what the pipeline's CorpusEncoder runs) is the tower DualEncoder.embed_doc
    computes: the checkpoint alone, or [sqrt(1 - w) own, sqrt(w) companion]; under the policy
    the Trainer sets for the config (float32 on CPU with mixed_precision auto or off)."""
    own = _checkpoint(tmp_path / "own", b"own")
    companion = _checkpoint(tmp_path / "companion", b"companion")
    assert corpus_tower(trainer_testdata.small_config(), 32) is None
    assert corpus_tower(_dual(own, recipe={"type": "in_batch"}), 32) is None
    assert corpus_tower(_dual(own, train_steps=0), 32) is None
    alone = corpus_tower(_frozen(own), 32)
    assert alone == DocumentTower(((EncoderSpec(own, 32, "float32"), 1.0),))
    tower = corpus_tower(_frozen(own, companion_checkpoint_dir=companion, companion_weight=0.3), 32)
    assert tower == DocumentTower.with_companion(
        EncoderSpec(own, 32, "float32"), EncoderSpec(companion, 32, "float32"), 0.3
    )
    assert [s for _, s in tower.parts] == [math.sqrt(0.7), math.sqrt(0.3)]
    # The Trainer passes its policy name: under bfloat16 the keys are others.
    bf16 = recipe_for(_frozen(own)).document_tower(32, "mixed_bfloat16")
    assert bf16.keys() != alone.keys()
    # The recipe names the checkpoints it reads beyond the model's, for the input checks.
    with_companion = _frozen(own, companion_checkpoint_dir=companion)
    assert recipe_for(with_companion).checkpoint_dirs() == {
        "recipe.frozen_documents.companion_checkpoint_dir": companion
    }
