"""in_batch: a dual encoder trained with in-batch negatives (sentence-transformers'
MultipleNegativesRankingLoss): each query of a batch against every document of the batch (its
own group's positive and first-stage negatives, and all other groups' documents), softmax
cross-entropy on cosine * in_batch_scale (trainer_module/losses.py in_batch_softmax)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from trainer_module.config_rules import require
from trainer_module.models.registry import offers_towers
from trainer_module.recipes.base import Recipe

if TYPE_CHECKING:
    import tensorflow as tf
    import tf_keras as keras

    from trainer_module.config import TrainerConfig


class InBatch(Recipe):
    name = "in_batch"

    @classmethod
    def check(cls, cfg: TrainerConfig) -> None:
        require(
            offers_towers(cfg.model),
            "recipe.type",
            "in_batch needs a model with separate query and document towers "
            f"(model: dual_encoder; it scores queries and documents apart), got model={cfg.model}",
        )

    @classmethod
    def check_any(cls, cfg: TrainerConfig) -> None:
        require(
            cfg.loss != "in_batch_softmax",
            "loss",
            "in_batch_softmax is now recipe.type: in_batch (the recipe owns its loss; remove loss)",
        )

    def describe(self) -> list[str]:
        return [
            f"recipe `{self.name}`: each query against every document of its batch, softmax "
            f"over cosine * {self.cfg.in_batch_scale:g}"
        ]

    def forward(self, model: keras.Model, batch: dict, training: bool) -> dict[str, tf.Tensor]:
        """The batch's query x document cosine matrix [b, b * n], and which pairs of rows share
        a query (their documents are not negatives of each other)."""
        import tensorflow as tf

        docs = batch["docs"]
        flat_docs = tf.reshape(docs, [-1, tf.shape(docs)[2]])
        queries = model.embed_query(batch["query"], training=training)  # [b, H], L2-normalised
        documents = model.embed_doc(flat_docs, training=training)  # [b * n, H]
        query = batch["query"]  # padded to one width within the batch
        same_query = tf.reduce_all(tf.equal(query[:, None, :], query[None, :, :]), axis=-1)
        return {
            "scores": tf.matmul(queries, documents, transpose_b=True),  # cosine [b, b * n]
            "same_query": same_query,
        }

    def build_losses(self, batch: dict, outputs: dict[str, tf.Tensor]) -> tf.Tensor:
        from trainer_module import losses

        return losses.in_batch_softmax(
            outputs["scores"], batch["labels"], outputs["same_query"], self.cfg.in_batch_scale
        )
