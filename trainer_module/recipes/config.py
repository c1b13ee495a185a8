"""The `trainer.recipe` section: which training recipe runs, and that recipe's own options.

A one-of section, as TF Model Garden picks a Task by its config: `type` names the recipe
(the names of trainer_module/recipes/registry.py), and only the chosen recipe's subsection
may be set (a subsection of another recipe is refused, naming `type`, rather than ignored).
Plain dataclasses without TensorFlow, so the pipeline config loads without it.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields

from trainer_module.config_rules import choice, require, training_only
from trainer_module.recipes.registry import RECIPES

# The recipes a config can choose, from the registry (zero_shot is no `type`: train_steps 0
# runs it, trainer_module/recipes/zero_shot.py).
RECIPE_TYPES = tuple(name for name, cls in RECIPES.items() if cls.configurable)
# recipe.frozen_documents.train_score: what the list loss scores.
TRAIN_SCORES = ("own", "served")


@dataclass
class FrozenDocumentsConfig:
    """Options of `type: frozen_documents` (docs/trainer.md "Frozen documents")."""

    # A second sentence encoder (all-mpnet-base-v2: ${RANKPIPE_MPNET}; an MPNet or BERT
    # checkpoint whose WordPiece vocabulary is the dual encoder's), run as it is (zero-shot,
    # frozen): every vector the model serves is [sqrt(1 - w) * its own, sqrt(w) * the
    # companion's], so a score is (1 - w) * its cosine + w * the companion's, w =
    # companion_weight. Training scores with the model's own tower alone (docs/trainer.md
    # "Companion encoder").
    companion_checkpoint_dir: str | None = None
    # The companion's share w of the cosine, in (0, 1): 0.5 averages the two cosines.
    companion_weight: float = 0.5
    # Weights to choose w from after training, on the dev queries, as the fusion's alpha is
    # (run_fn.choose_companion_weight): the trained model's dev vectors rescaled to each, with
    # the fusion (and feedback) chosen for each; a tie keeps the earlier. Empty: w is
    # companion_weight. Training scores the tower's own cosine, which no w changes, so one
    # training serves every w (needs train_score: own and a companion). Not with
    # cross-validation fold branches: each would choose its own w, and a fold model takes its
    # frozen parts from the served model (tuner.space can search companion_weight instead).
    companion_weights: list[float] = field(default_factory=list)
    # What the list loss scores: `own`, the query tower's own cosine (the tower learns to rank
    # alone); `served`, the score the model serves, (1 - w) * its cosine + w * the frozen
    # companion's, so the tower learns what the companion misses (needs a companion).
    train_score: str = training_only("own")

    def __post_init__(self) -> None:
        require(
            0.0 < self.companion_weight < 1.0,
            "recipe.frozen_documents.companion_weight",
            "must be in (0, 1)",
        )
        choice(self.train_score, "recipe.frozen_documents.train_score", TRAIN_SCORES)
        key = "recipe.frozen_documents.companion_weights"
        require(
            all(0.0 < w < 1.0 for w in self.companion_weights),
            key,
            f"each must be in (0, 1), got {self.companion_weights}",
        )
        require(
            not self.companion_weights or bool(self.companion_checkpoint_dir),
            key,
            "weigh a companion encoder: set recipe.frozen_documents.companion_checkpoint_dir, "
            "or remove companion_weights",
        )
        require(
            not self.companion_weights or self.train_score == "own",
            key,
            "with train_score: served the weight is part of what trains, so it cannot be "
            "chosen after training: use train_score: own, or search companion_weight with "
            "tuner.space",
        )
        require(
            self.train_score == "own" or bool(self.companion_checkpoint_dir),
            "recipe.frozen_documents.train_score",
            "served scores the model's cosine with its companion's: set "
            "recipe.frozen_documents.companion_checkpoint_dir, or train_score: own",
        )


@dataclass
class RecipeConfig:
    """How the Trainer trains (docs/trainer.md "Recipes"). train_steps 0 runs zero-shot (the
    pretrained model exported as it is) whatever `type` says, except frozen_documents."""

    # sampled_groups: the groups RankingDataGen sampled (pairwise, listwise, pointwise), scored
    # by `loss`. in_batch (dual_encoder): each query against every document of the batch,
    # softmax cross-entropy on cosine * in_batch_scale (sentence-transformers'
    # MultipleNegativesRankingLoss). frozen_documents (dual_encoder): the query tower alone
    # trains, each train query against its whole candidate list of the checkpoint's document
    # vectors (ADORE; needs datagen.sampling.mode: lists and loss: listwise_softmax).
    type: str = "sampled_groups"
    frozen_documents: FrozenDocumentsConfig = field(default_factory=FrozenDocumentsConfig)

    def __post_init__(self) -> None:
        choice(self.type, "recipe.type", RECIPE_TYPES)
        for section in fields(self):
            if section.name == "type" or section.name == self.type:
                continue
            value = getattr(self, section.name)
            require(
                value == type(value)(),
                f"recipe.{section.name}",
                f"is read by recipe.type: {section.name} only, and recipe.type is {self.type}: "
                f"remove it, or set recipe.type: {section.name}",
            )
