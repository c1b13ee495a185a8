"""Conv-KNRM: kernel pooling over cross-matched n-gram (1..max_ngram) representations."""

from __future__ import annotations

from typing import Any

import tensorflow as tf
import tf_keras as keras

from trainer_module.config import ConvKnrmConfig
from trainer_module.models.kernel_pooling import KernelPooling, token_mask
from trainer_module.models.knrm import word_embedding


class ConvKnrm(keras.Model):
    def __init__(self, vocab_size: int, cfg: ConvKnrmConfig, embeddings_initializer: Any, **kwargs):
        super().__init__(**kwargs)
        self.max_ngram = cfg.max_ngram
        self.embedding = word_embedding(vocab_size, cfg, embeddings_initializer)
        self.convs = [
            keras.layers.Conv1D(cfg.filters, h, activation="relu", name=f"ngram_conv_{h}")
            for h in range(1, cfg.max_ngram + 1)
        ]
        self.pooling = KernelPooling(cfg.n_kernels, cfg.sigma, cfg.exact_sigma, name="kernels")
        self.score = keras.layers.Dense(1, dtype="float32", name="score")

    def _ngrams(self, ids: tf.Tensor) -> list[tf.Tensor]:
        mask = token_mask(ids)
        # Zero the pad embeddings and right-pad by h-1 so n-gram i covers tokens i..i+h-1
        # whatever the batch padding is: outputs at real positions are padding-invariant.
        x = self.embedding(ids) * tf.cast(mask, self.compute_dtype)[..., None]
        out = []
        for h, conv in enumerate(self.convs, start=1):
            y = conv(tf.pad(x, [[0, 0], [0, h - 1], [0, 0]]))
            y = tf.math.l2_normalize(tf.cast(y, tf.float32), axis=-1) * mask[..., None]
            out.append(y)
        return out

    def call(self, inputs: tuple[tf.Tensor, tf.Tensor], training: bool = False) -> tf.Tensor:
        query, doc = inputs
        q_mask, d_mask = token_mask(query), token_mask(doc)
        q_grams, d_grams = self._ngrams(query), self._ngrams(doc)
        feats = [
            self.pooling(tf.matmul(q, d, transpose_b=True), q_mask, d_mask)
            for q in q_grams
            for d in d_grams
        ]
        return tf.squeeze(self.score(tf.concat(feats, axis=-1)), axis=-1)
