"""Training recipes (docs/trainer.md "Recipes"): one class per way of training, chosen by
`trainer.recipe.type` (registry.py)."""

from trainer_module.recipes.base import Recipe
from trainer_module.recipes.registry import (
    RECIPES,
    check_config,
    check_moved,
    corpus_tower,
    recipe_for,
)

__all__ = ["RECIPES", "Recipe", "check_config", "check_moved", "corpus_tower", "recipe_for"]
