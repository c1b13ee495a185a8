"""RBF kernel pooling over a query-document similarity matrix (shared by KNRM/Conv-KNRM)."""

from __future__ import annotations

import tensorflow as tf
import tf_keras as keras


def kernel_mus(n_kernels: int) -> list[float]:
    """mu = 1 (exact match) plus n_kernels - 1 soft-match kernels evenly covering [-1, 1]."""
    step = 2.0 / (n_kernels - 1)
    return [1.0] + [1.0 - step / 2 - i * step for i in range(n_kernels - 1)]


class KernelPooling(keras.layers.Layer):
    """[B, Lq, Ld] cosine similarities -> [B, n_kernels] soft-TF features."""

    def __init__(self, n_kernels: int, sigma: float, exact_sigma: float, **kwargs):
        super().__init__(**kwargs)
        self.mus = tf.constant(kernel_mus(n_kernels), tf.float32)
        self.sigmas = tf.constant([exact_sigma] + [sigma] * (n_kernels - 1), tf.float32)

    def call(self, sim: tf.Tensor, q_mask: tf.Tensor, d_mask: tf.Tensor) -> tf.Tensor:
        sim = tf.cast(sim, tf.float32)[..., None]  # [B, Lq, Ld, 1]; kernels need float32
        k = tf.exp(-tf.square(sim - self.mus) / (2.0 * tf.square(self.sigmas)))
        k = k * d_mask[:, None, :, None]  # padded doc positions contribute nothing
        per_query_term = tf.reduce_sum(k, axis=2)  # [B, Lq, K]
        # log-sum soft TF, scaled by 0.01 as in the KNRM paper; padded query terms masked out.
        log_tf = tf.math.log(tf.maximum(per_query_term, 1e-10)) * 0.01
        return tf.reduce_sum(log_tf * q_mask[..., None], axis=1)


def token_mask(ids: tf.Tensor) -> tf.Tensor:
    return tf.cast(tf.not_equal(ids, 0), tf.float32)
