"""The recipe registry: `trainer.recipe.type` -> Recipe class, and the one place a recipe is
chosen (`recipe_for`: train_steps 0 runs zero_shot)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from trainer_module.recipes.base import Recipe
from trainer_module.recipes.frozen_documents import FrozenDocuments
from trainer_module.recipes.in_batch import InBatch
from trainer_module.recipes.sampled_groups import SampledGroups
from trainer_module.recipes.zero_shot import ZeroShot

if TYPE_CHECKING:
    from rankcore.corpus_vectors import DocumentTower
    from trainer_module.config import TrainerConfig

# The one list of recipes: `trainer.recipe.type` takes its names from here.
RECIPES: dict[str, type[Recipe]] = {
    cls.name: cls for cls in (SampledGroups, InBatch, FrozenDocuments, ZeroShot)
}


def recipe_for(cfg: TrainerConfig, steps: int | None = None) -> Recipe:
    """The recipe that runs `cfg` for `steps` optimizer steps (None: cfg.train_steps): the
    configured one, or zero_shot (wrapping it) at 0 steps."""
    configured = RECIPES[cfg.recipe.type](cfg)
    steps = cfg.train_steps if steps is None else steps
    return ZeroShot(cfg, configured) if steps == 0 else configured


def check_moved(cfg: TrainerConfig) -> None:
    """Every recipe's rules about values it took over (TrainerConfig.__post_init__, first)."""
    for cls in RECIPES.values():
        cls.check_any(cfg)


def check_config(cfg: TrainerConfig) -> None:
    """The chosen recipe's rules (and zero_shot's at train_steps 0): TrainerConfig.__post_init__
    runs this last."""
    RECIPES[cfg.recipe.type].check(cfg)
    if cfg.train_steps == 0:
        ZeroShot.check(cfg)


def corpus_tower(
    cfg: TrainerConfig, max_doc_length: int, precision: str | None = None
) -> DocumentTower | None:
    """The frozen document tower the configured recipe trains against (None if none): the
    encoders the pipeline's CorpusEncoder must run for this Trainer. `precision` None: the
    policy the Trainer chooses for the config (hardware.precision_policy), so the pipeline's
    keys and the Trainer's agree."""
    return recipe_for(cfg).document_tower(max_doc_length, precision)
