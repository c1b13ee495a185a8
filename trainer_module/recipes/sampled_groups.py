"""sampled_groups: the groups RankingDataGen sampled (pairwise, listwise, pointwise), each
scored by the model and the configured `loss` (trainer_module/loss_registry.py)."""

from __future__ import annotations

from trainer_module.recipes.base import Recipe


class SampledGroups(Recipe):
    """Every model; the default recipe (all of it is Recipe's default behaviour)."""

    name = "sampled_groups"

    def describe(self) -> list[str]:
        return [f"recipe `{self.name}`: the sampled train groups, loss `{self.cfg.loss}`"]
