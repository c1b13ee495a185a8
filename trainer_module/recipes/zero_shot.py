"""zero_shot: a pretrained model exported as it is (train_steps 0): no step runs, the dev
split validates it and tunes the fusion. Chosen by train_steps 0 (or TrainArgs num_steps 0),
whatever recipe.type says. The configured recipe still builds the model, its frozen document
tower (with a companion encoder) and the inputs it would train on, so zero-shot of a
frozen-documents config is the same model at step 0: the baseline that training is measured
against, and one value of `train_steps` for the Tuner (trainer_module/tuning.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from trainer_module.config_rules import require
from trainer_module.models.registry import PRETRAINED_MODEL_NAMES
from trainer_module.recipes.base import DocCache, Recipe

if TYPE_CHECKING:
    from collections.abc import Callable

    import numpy as np
    import tensorflow as tf
    import tf_keras as keras

    from rankcore.corpus_vectors import DocumentTower
    from trainer_module.config import TrainerConfig


class ZeroShot(Recipe):
    name = "zero_shot"
    train_data = None  # the train split is not read
    configurable = False  # train_steps 0 chooses it

    def __init__(self, cfg: TrainerConfig, configured: Recipe | None = None) -> None:
        super().__init__(cfg)
        # The recipe.type recipe: its inputs and forward pass are built (the loop is the same
        # at 0 steps), never run.
        self.configured = configured or Recipe(cfg)

    @classmethod
    def check(cls, cfg: TrainerConfig) -> None:
        require(
            cfg.model in PRETRAINED_MODEL_NAMES,
            "train_steps",
            f"must be >= 1 (0 = zero-shot: only pretrained models {list(PRETRAINED_MODEL_NAMES)})",
        )

    def describe(self) -> list[str]:
        # The configured recipe's lines after its first (which says how it trains).
        extra = self.configured.describe()[1:]
        return [f"recipe `{self.name}`: the pretrained checkpoint as it is (no training)", *extra]

    def checkpoint_dirs(self) -> dict[str, str]:
        return self.configured.checkpoint_dirs()

    def companion_weights(self) -> tuple[float, ...]:
        return self.configured.companion_weights()

    def at_companion_weight(
        self, weight: float, own_dims: int
    ) -> tuple[Recipe, Callable[[np.ndarray], np.ndarray]]:
        configured, rescale = self.configured.at_companion_weight(weight, own_dims)
        return ZeroShot(configured.cfg, configured), rescale

    def prepare_export(self, model: keras.Model) -> None:
        self.configured.prepare_export(model)

    def build_model(
        self, vocab_size: int, max_query_length: int, max_doc_length: int, vocab: list[str] | None
    ) -> keras.Model:
        return self.configured.build_model(vocab_size, max_query_length, max_doc_length, vocab)

    def document_tower(
        self, max_doc_length: int, precision: str | None = None
    ) -> DocumentTower | None:
        return self.configured.document_tower(max_doc_length, precision)

    def document_cache(self) -> DocCache | None:
        return self.configured.document_cache()

    def build_inputs(
        self, strategy, file_patterns, lengths, embed_doc=None, doc_cache=None, embed_query=None
    ):
        return self.configured.build_inputs(
            strategy, file_patterns, lengths, embed_doc, doc_cache, embed_query
        )

    def forward(self, model: keras.Model, batch: dict, training: bool) -> dict[str, tf.Tensor]:
        return self.configured.forward(model, batch, training)

    def build_losses(self, batch: dict, outputs: dict[str, tf.Tensor]) -> tf.Tensor:
        return self.configured.build_losses(batch, outputs)
