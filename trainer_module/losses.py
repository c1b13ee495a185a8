"""Ranking losses over groups of candidates: scores/labels [B, n] -> per-example loss [B].

Per-example losses are reduced by `reduce_loss` with the GLOBAL number of examples of the
step (all replicas, all accumulated micro-batches), so summing gradients over replicas and
micro-batches gives the gradient of the mean loss whatever the distribution.

Pairs/targets come from the graded labels, so a group needs no fixed layout:
- pairwise_hinge:     mean over pairs (i, j) with label_i > label_j of max(0, margin - s_i + s_j)
- pairwise_logistic:  mean over the same pairs of log(1 + exp(-(s_i - s_j)))   (RankNet)
- pointwise_sigmoid:  mean over candidates of sigmoid cross-entropy; target is 1[label > 0]
                      ("binary") or clip(label / max_label, 0, 1) ("graded")
- listwise_softmax:   softmax cross-entropy over the n candidates with the target distribution
                      proportional to max(label, 0) (one-hot on the positive for 1 + k groups)
- in_batch_softmax:   (dual encoders) each query against EVERY document of the batch: softmax
                      cross-entropy over scale * cosine [b, b * n], the target being its own
                      group's gains as in listwise_softmax; the other groups' documents are extra
                      negatives (sentence-transformers' MultipleNegativesRankingLoss with hard
                      negatives). Its input is the batch's query x document score matrix, not
                      per-group scores: see RankingTask.forward / build_losses.
Groups with no valid pair / no positive contribute 0.
"""

from __future__ import annotations

from collections.abc import Callable

import tensorflow as tf

from trainer_module.config import TrainerConfig
from trainer_module.loss_registry import LOSSES

LossFn = Callable[[tf.Tensor, tf.Tensor], tf.Tensor]


def _pairs(scores: tf.Tensor, labels: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    diff = scores[:, :, None] - scores[:, None, :]  # s_i - s_j
    pair = tf.cast(labels[:, :, None] > labels[:, None, :], scores.dtype)
    return diff, pair


def _mean_over_pairs(values: tf.Tensor, pair: tf.Tensor) -> tf.Tensor:
    return tf.reduce_sum(values * pair, axis=[1, 2]) / tf.maximum(
        tf.reduce_sum(pair, axis=[1, 2]), 1.0
    )


def pairwise_hinge(scores: tf.Tensor, labels: tf.Tensor, margin: float = 1.0) -> tf.Tensor:
    diff, pair = _pairs(scores, labels)
    return _mean_over_pairs(tf.nn.relu(margin - diff), pair)


def pairwise_logistic(scores: tf.Tensor, labels: tf.Tensor) -> tf.Tensor:
    diff, pair = _pairs(scores, labels)
    return _mean_over_pairs(tf.nn.softplus(-diff), pair)


def pointwise_sigmoid(
    scores: tf.Tensor, labels: tf.Tensor, graded: bool = False, max_label: float = 3.0
) -> tf.Tensor:
    if graded:
        target = tf.clip_by_value(labels / max_label, 0.0, 1.0)
    else:
        target = tf.cast(labels > 0, scores.dtype)
    ce = tf.nn.sigmoid_cross_entropy_with_logits(labels=target, logits=scores)
    return tf.reduce_mean(ce, axis=1)


def listwise_softmax(scores: tf.Tensor, labels: tf.Tensor) -> tf.Tensor:
    gains = tf.maximum(labels, 0.0)
    total = tf.reduce_sum(gains, axis=1, keepdims=True)
    target = tf.math.divide_no_nan(gains, total)
    ce = tf.nn.softmax_cross_entropy_with_logits(labels=target, logits=scores)
    return tf.where(total[:, 0] > 0, ce, tf.zeros_like(ce))


def in_batch_softmax(
    similarity: tf.Tensor, labels: tf.Tensor, same_query: tf.Tensor, scale: float = 20.0
) -> tf.Tensor:
    """similarity [b, b * n] (query i vs document j of group g in column g * n + j), labels
    [b, n], same_query [b, b] (bool: groups i and g are samples of the same query) -> [b].

    Another group of the SAME query may hold this query's positives (the datagen draws many
    groups per query), so its documents are masked out rather than counted as negatives.
    """
    b, n = tf.shape(labels)[0], tf.shape(labels)[1]
    own = tf.eye(b, dtype=labels.dtype)
    gains = tf.maximum(labels, 0.0)
    target = tf.reshape(own[:, :, None] * gains[None, :, :], [b, b * n])
    total = tf.reduce_sum(target, axis=1, keepdims=True)
    other_same = tf.logical_and(same_query, tf.logical_not(tf.cast(own, tf.bool)))
    masked = tf.repeat(other_same, n, axis=1)
    logits = tf.where(masked, tf.constant(-1e9, similarity.dtype), similarity * scale)
    ce = tf.nn.softmax_cross_entropy_with_logits(
        labels=tf.math.divide_no_nan(target, total), logits=logits
    )
    return tf.where(total[:, 0] > 0, ce, tf.zeros_like(ce))


def get_loss(cfg: TrainerConfig) -> LossFn:
    """The configured per-example loss: (scores [B, n], labels [B, n]) -> [B] (float32), from
    the registry (loss_registry.py)."""
    if cfg.loss not in LOSSES:
        raise ValueError(f"trainer config: unknown loss {cfg.loss!r}")
    return LOSSES[cfg.loss](cfg)


def reduce_loss(per_example: tf.Tensor, global_examples: tf.Tensor | None = None) -> tf.Tensor:
    """Sum / GLOBAL example count (tf.nn.compute_average_loss), for use inside a replica."""
    return tf.nn.compute_average_loss(per_example, global_batch_size=global_examples)
