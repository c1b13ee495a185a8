"""KNRM: kernel pooling over the cosine translation matrix of word embeddings."""

from __future__ import annotations

from typing import Any

import tensorflow as tf
import tf_keras as keras

from trainer_module.config import KnrmConfig
from trainer_module.models.kernel_pooling import KernelPooling, token_mask


class Knrm(keras.Model):
    def __init__(self, vocab_size: int, cfg: KnrmConfig, embeddings_initializer: Any, **kwargs):
        super().__init__(**kwargs)
        self.embedding = keras.layers.Embedding(
            vocab_size,
            cfg.embedding_dim,
            embeddings_initializer=embeddings_initializer,
            trainable=cfg.trainable_embeddings,
            name="embedding",
        )
        self.pooling = KernelPooling(cfg.n_kernels, cfg.sigma, cfg.exact_sigma, name="kernels")
        self.score = keras.layers.Dense(1, dtype="float32", name="score")

    def call(self, inputs: tuple[tf.Tensor, tf.Tensor], training: bool = False) -> tf.Tensor:
        query, doc = inputs
        q_mask, d_mask = token_mask(query), token_mask(doc)
        q = tf.math.l2_normalize(tf.cast(self.embedding(query), tf.float32), axis=-1)
        d = tf.math.l2_normalize(tf.cast(self.embedding(doc), tf.float32), axis=-1)
        sim = tf.matmul(q, d, transpose_b=True)  # [B, Lq, Ld] cosine
        return tf.squeeze(self.score(self.pooling(sim, q_mask, d_mask)), axis=-1)
