"""RankingTask: what to train (model, inputs, loss, one train step); the loop lives in training.py.

Modelled on TF Model Garden's Task: build_model / build_inputs / forward / build_losses /
train_step. What differs between ways of training (the inputs, what the model computes on a
training batch, the losses, the frozen document tower) is the recipe's (trainer_module/recipes/,
chosen once by `recipes.recipe_for`); `train_step` only differentiates and applies.
"""

from __future__ import annotations

import tensorflow as tf
import tf_keras as keras

from trainer_module import losses
from trainer_module.config import TrainerConfig
from trainer_module.optimization import DualOptimizer
from trainer_module.recipes import Recipe, recipe_for
from trainer_module.recipes.base import DocCache


class RankingTask:
    def __init__(
        self,
        cfg: TrainerConfig,
        vocab_size: int,
        max_query_length: int,
        max_doc_length: int,
        vocab: list[str] | None = None,
        recipe: Recipe | None = None,
    ):
        self.cfg = cfg
        self.vocab_size = vocab_size
        self.max_query_length = max_query_length
        self.max_doc_length = max_doc_length
        self.vocab = vocab
        # The recipe that runs (None: the configured one at cfg.train_steps).
        self.recipe = recipe or recipe_for(cfg)

    # -- building blocks (call inside strategy.scope()) -----------------------------------
    def build_model(self) -> keras.Model:
        keras.utils.set_random_seed(self.cfg.seed)  # same initial weights on every (re)run
        return self.recipe.build_model(
            self.vocab_size, self.max_query_length, self.max_doc_length, self.vocab
        )

    def build_optimizer(self, model: keras.Model, total_steps: int) -> DualOptimizer:
        return DualOptimizer(self.cfg, model.trainable_variables, total_steps)

    def build_inputs(
        self,
        strategy: tf.distribute.Strategy,
        file_patterns: list[str],
        embed_doc: object | None = None,
        doc_cache: DocCache | None = None,
        embed_query: object | None = None,
    ) -> tf.distribute.DistributedDataset:
        """Per-replica datasets; each replica gets batch_size / replicas groups per micro-batch
        (what a group is, the recipe says; `embed_doc` and `doc_cache` embed and keep the
        documents of a recipe with a frozen document tower)."""
        replicas = strategy.num_replicas_in_sync
        if self.cfg.batch_size % replicas:
            raise ValueError(
                f"trainer config: batch_size={self.cfg.batch_size} is not divisible by the "
                f"{replicas} replicas"
            )
        lengths = (self.max_query_length, self.max_doc_length)
        return self.recipe.build_inputs(
            strategy, file_patterns, lengths, embed_doc, doc_cache, embed_query
        )

    # -- computation ----------------------------------------------------------------------
    def forward(self, model: keras.Model, batch: dict, training: bool) -> dict[str, tf.Tensor]:
        """Model outputs on a training batch, as the recipe's losses need them."""
        return self.recipe.forward(model, batch, training)

    def build_losses(self, batch: dict, outputs: dict[str, tf.Tensor]) -> tf.Tensor:
        """Per-example losses [b] from `forward`'s outputs."""
        return self.recipe.build_losses(batch, outputs)

    def train_step(
        self,
        model: keras.Model,
        optimizer: DualOptimizer,
        batch: dict,
        loss_scale: tf.Variable | None = None,
    ) -> dict[str, tf.Tensor]:
        """One optimizer step on this replica's batch (run inside strategy.run).

        The batch is split into grad_accumulation_steps strided micro-batches; each micro loss
        is divided by the GLOBAL example count of the whole step, so the summed (and then
        all-reduced) gradient is the gradient of the mean loss over the effective batch.
        """
        ctx = tf.distribute.get_replica_context()
        variables = optimizer.trainable_variables
        accum = self.cfg.grad_accumulation_steps
        local = tf.shape(batch["labels"])[0]
        global_examples = ctx.all_reduce(tf.distribute.ReduceOp.SUM, local)
        total_loss = tf.constant(0.0)
        grads: list[tf.Tensor] | None = None
        for i in range(accum):
            micro = {k: v[i::accum] for k, v in batch.items()} if accum > 1 else batch
            with tf.GradientTape() as tape:
                outputs = self.forward(model, micro, training=True)
                loss = losses.reduce_loss(self.build_losses(micro, outputs), global_examples)
                scaled = loss * loss_scale if loss_scale is not None else loss
            micro_grads = tape.gradient(scaled, variables)
            micro_grads = [
                tf.zeros_like(v) if g is None else g for g, v in zip(micro_grads, variables)
            ]
            if accum > 1:  # sum densely; IndexedSlices cannot be added in place
                micro_grads = [tf.convert_to_tensor(g) for g in micro_grads]
                grads = (
                    micro_grads if grads is None else [a + b for a, b in zip(grads, micro_grads)]
                )
            else:
                grads = micro_grads
            total_loss += loss
        grads = ctx.all_reduce(tf.distribute.ReduceOp.SUM, grads)
        finite = tf.constant(True)
        if loss_scale is not None:
            grads = [g / loss_scale for g in grads]
            finite = tf.reduce_all(
                [tf.reduce_all(tf.math.is_finite(tf.convert_to_tensor(g))) for g in grads]
            )
            # fp16 overflow: apply zeros this step and shrink the scale (no exact skip).
            grads = [tf.where(finite, tf.convert_to_tensor(g), 0.0) for g in grads]
        norm = optimizer.apply(grads)
        return {"loss": total_loss, "grad_norm": norm, "examples": local, "finite": finite}
