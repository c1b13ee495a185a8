"""KNRM: kernel pooling over the cosine translation matrix of word embeddings."""

from __future__ import annotations

from typing import Any

import tensorflow as tf
import tf_keras as keras

from trainer_module.config import ConvKnrmConfig, KnrmConfig
from trainer_module.models.kernel_pooling import KernelPooling, token_mask


class Knrm(keras.Model):
    def __init__(self, vocab_size: int, cfg: KnrmConfig, embeddings_initializer: Any, **kwargs):
        super().__init__(**kwargs)
        self.embedding = word_embedding(vocab_size, cfg, embeddings_initializer)
        self.pooling = KernelPooling(cfg.n_kernels, cfg.sigma, cfg.exact_sigma, name="kernels")
        self.score = keras.layers.Dense(1, dtype="float32", name="score")

    def call(self, inputs: tuple[tf.Tensor, tf.Tensor], training: bool = False) -> tf.Tensor:
        query, doc = inputs
        q_mask, d_mask = token_mask(query), token_mask(doc)
        q = tf.math.l2_normalize(tf.cast(self.embedding(query), tf.float32), axis=-1)
        d = tf.math.l2_normalize(tf.cast(self.embedding(doc), tf.float32), axis=-1)
        sim = tf.matmul(q, d, transpose_b=True)  # [B, Lq, Ld] cosine
        return tf.squeeze(self.score(self.pooling(sim, q_mask, d_mask)), axis=-1)


def word_embedding(
    vocab_size: int, cfg: KnrmConfig | ConvKnrmConfig, initializer: Any
) -> keras.layers.Embedding:
    """The word embedding KNRM and Conv-KNRM match with, named "embedding" (the default
    encoder_patterns give it encoder_learning_rate: models/registry.py), frozen unless
    trainable_embeddings."""
    return keras.layers.Embedding(
        vocab_size,
        cfg.embedding_dim,
        embeddings_initializer=initializer,
        trainable=cfg.trainable_embeddings,
        name="embedding",
    )
