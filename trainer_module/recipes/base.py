"""Recipe: one way of training a reranker, owning its inputs, forward pass, losses and what it
adds to the export, as a TF Model Garden Task owns them for its config.

RankingTask (trainer_module/task.py) builds the model and the optimizer and runs the step;
everything that differs between recipes is here, so no line outside a recipe's own module
branches on which recipe runs. A recipe is chosen by `trainer.recipe.type` (registry.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

if TYPE_CHECKING:
    from collections.abc import Callable

    import numpy as np
    import tensorflow as tf
    import tf_keras as keras

    from rankcore.corpus_vectors import DocumentTower, QueryTower
    from trainer_module.config import TrainerConfig

# token ids of a document (cut) -> its vector: the frozen document vectors a recipe trains on.
DocCache = dict[tuple[int, ...], "np.ndarray"]


class Recipe:
    """The sampled-groups behaviour by default; each recipe overrides what it changes."""

    # The registry's name of the recipe (trainer.recipe.type, or zero_shot).
    name: ClassVar[str] = ""
    # The train split it reads: "groups" (datagen.sampling.mode pairwise/listwise/pointwise),
    # "lists" (datagen.sampling.mode: lists, each query's whole candidate list) or None (no
    # training: the train split is not read).
    train_data: ClassVar[str | None] = "groups"
    # Chosen by `trainer.recipe.type` (False: chosen otherwise, as zero_shot by the steps).
    configurable: ClassVar[bool] = True

    def __init__(self, cfg: TrainerConfig) -> None:
        self.cfg = cfg

    # -- configuration --------------------------------------------------------------------
    @classmethod
    def check(cls, cfg: TrainerConfig) -> None:
        """This recipe's cross-field rules over the Trainer's config (ValueError naming the
        key and the fix); run by TrainerConfig.__post_init__ when the recipe is chosen."""

    @classmethod
    def check_any(cls, cfg: TrainerConfig) -> None:
        """Rules about keys this recipe took over, run whichever recipe is chosen (a value
        that moved into it fails with its new place)."""

    def checkpoint_dirs(self) -> dict[str, str]:
        """{config key: checkpoint directory} the recipe reads beyond the model's own
        (pipelines/config_checks.py checks they exist before any component runs)."""
        return {}

    def describe(self) -> list[str]:
        """What the exported model is, in Markdown bullet lines (without the "- "), for the
        model card (the Trainer writes them into train_results.json)."""
        return [f"recipe `{self.name}`"]

    # -- serving choices made after training -----------------------------------------------
    def companion_weights(self) -> tuple[float, ...]:
        """The weights of a frozen companion's share of the served score to choose among on
        the dev queries after training (run_fn.choose_companion_weight); empty: none."""
        return ()

    def at_companion_weight(
        self, weight: float, own_dims: int
    ) -> tuple[Recipe, Callable[[np.ndarray], np.ndarray]]:
        """(this recipe serving at companion weight `weight`, the map from a vector the
        trained model serves now to the one it serves then), for a recipe with
        companion_weights."""
        raise NotImplementedError(f"recipe {self.name} has no companion weight to choose")

    def prepare_export(self, model: keras.Model) -> None:
        """Sets on the trained `model` what this recipe serves that training leaves open (the
        companion weight chosen after training): run before the export traces the model."""

    # -- model and data -------------------------------------------------------------------
    def build_model(
        self, vocab_size: int, max_query_length: int, max_doc_length: int, vocab: list[str] | None
    ) -> keras.Model:
        """The configured model (trainer_module/models/registry.py), variables created."""
        from trainer_module.models import build_model

        return build_model(self.cfg, vocab_size, max_query_length, max_doc_length, vocab)

    def document_tower(
        self, max_doc_length: int, precision: str | None = None
    ) -> DocumentTower | None:
        """The frozen document tower the recipe trains against (its vectors come from the
        corpus-vectors artifact when there is one, and the export names it), None if none.
        `precision`: the Trainer's policy name (None: the one the config chooses)."""
        return None

    def query_tower(
        self, own_dims: int, max_query_length: int, precision: str, complete: bool = True
    ) -> QueryTower | None:
        """What the model serves for a query beside its trained tower when its documents are
        frozen (rankcore QueryTower: `own_dims` of its own, then the frozen parts'), under the
        Trainer's `precision`; None when its documents are not (every vector is its own).
        `complete`: the export answers with the whole vector (else the trained part only)."""
        return None

    def document_cache(self) -> DocCache | None:
        """A new cache of frozen document vectors (token ids -> vector) when the recipe trains
        against fixed ones (document_tower), None when the document tower trains."""
        return None

    def build_inputs(
        self,
        strategy: tf.distribute.Strategy,
        file_patterns: list[str],
        lengths: tuple[int, int],
        embed_doc: object | None = None,
        doc_cache: DocCache | None = None,
        embed_query: object | None = None,
    ) -> tf.distribute.DistributedDataset:
        """Per-replica datasets of the train split's groups, batch_size / replicas groups per
        micro-batch. `lengths` = (max_query_length, max_doc_length); a recipe with a frozen
        document tower embeds its lists with `embed_doc` / `embed_query` (the model's towers
        before training)."""
        from trainer_module import inputs

        cfg = self.cfg
        group_size = inputs.peek_group_size(file_patterns)

        def dataset_fn(ctx: tf.distribute.InputContext) -> tf.data.Dataset:
            return inputs.make_train_dataset(
                file_patterns,
                cfg,
                lengths[0],
                lengths[1],
                group_size,
                ctx.get_per_replica_batch_size(cfg.batch_size),
                ctx,
            )

        return strategy.distribute_datasets_from_function(dataset_fn)

    # -- computation ----------------------------------------------------------------------
    def forward(self, model: keras.Model, batch: dict, training: bool) -> dict[str, tf.Tensor]:
        """Model outputs on a training batch, as build_losses needs them: per-group scores."""
        return {"scores": score_groups(model, batch, training)}

    def build_losses(self, batch: dict, outputs: dict[str, tf.Tensor]) -> tf.Tensor:
        """Per-example losses [b] from `forward`'s outputs (the configured group loss)."""
        from trainer_module import losses

        return losses.get_loss(self.cfg)(outputs["scores"], batch["labels"])


def score_groups(model: keras.Model, batch: dict, training: bool) -> tf.Tensor:
    """query [b, Lq], docs [b, n, Ld] -> scores [b, n] (float32)."""
    import tensorflow as tf

    docs = batch["docs"]
    n = tf.shape(docs)[1]
    flat_docs = tf.reshape(docs, [-1, tf.shape(docs)[2]])
    queries = tf.repeat(batch["query"], n, axis=0)
    scores = model((queries, flat_docs), training=training)
    return tf.reshape(tf.cast(scores, tf.float32), [-1, n])
