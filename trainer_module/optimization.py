"""Two AdamW optimizers (encoder vs the rest), warmup + decay schedules, clipping, freezing.

Variables are grouped by regex over their names (`re.search`): frozen (freeze_patterns) get no
gradient at all; encoder (encoder_patterns) are updated with encoder_learning_rate; the rest
with learning_rate. Both schedules warm up linearly over warmup_steps and then decay to the
last step. Gradients are clipped by ONE global norm over both groups, after the cross-replica
all-reduce, so clipping is the same with any number of replicas.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import tensorflow as tf
import tf_keras as keras

from trainer_module.config import TrainerConfig


class WarmupDecay(keras.optimizers.schedules.LearningRateSchedule):
    """lr(step), step = optimizer steps taken (0-based).

    warmup:      peak * (step + 1) / warmup_steps                       for step < warmup_steps
    then with p = (step - warmup_steps) / (total_steps - warmup_steps) clipped to [0, 1]:
    linear:      end + (peak - end) * (1 - p)
    cosine:      end + (peak - end) * (1 + cos(pi * p)) / 2
    exponential: peak * decay_rate ** p          (decay_rate = factor reached at the last step)
    with end = peak * end_fraction.
    """

    def __init__(
        self,
        peak: float,
        warmup_steps: int,
        total_steps: int,
        decay: str,
        end_fraction: float = 0.0,
        decay_rate: float = 0.01,
    ):
        self.peak = peak
        self.warmup_steps = warmup_steps
        self.total_steps = total_steps
        self.decay = decay
        self.end_fraction = end_fraction
        self.decay_rate = decay_rate

    def __call__(self, step: tf.Tensor) -> tf.Tensor:
        step = tf.cast(step, tf.float32)
        peak, end = self.peak, self.peak * self.end_fraction
        span = float(max(1, self.total_steps - self.warmup_steps))
        p = tf.clip_by_value((step - self.warmup_steps) / span, 0.0, 1.0)
        if self.decay == "linear":
            decayed = end + (peak - end) * (1.0 - p)
        elif self.decay == "cosine":
            decayed = end + (peak - end) * 0.5 * (1.0 + tf.cos(math.pi * p))
        elif self.decay == "exponential":
            decayed = peak * tf.pow(self.decay_rate, p)
        else:
            raise ValueError(f"unknown decay {self.decay!r}")
        if self.warmup_steps == 0:
            return decayed
        warm = peak * (step + 1.0) / float(self.warmup_steps)
        return tf.where(step < self.warmup_steps, warm, decayed)

    def get_config(self) -> dict:
        return dict(vars(self))


@dataclass
class VariableGroups:
    encoder: list[tf.Variable]
    rest: list[tf.Variable]
    frozen: list[tf.Variable]


def _matches(name: str, patterns: list[str]) -> bool:
    return any(re.search(p, name) for p in patterns)


def split_variables(
    variables: list[tf.Variable], encoder_patterns: list[str], freeze_patterns: list[str]
) -> VariableGroups:
    groups = VariableGroups([], [], [])
    for v in variables:
        if _matches(v.name, freeze_patterns):
            groups.frozen.append(v)
        elif _matches(v.name, encoder_patterns):
            groups.encoder.append(v)
        else:
            groups.rest.append(v)
    return groups


def _adamw(cfg: TrainerConfig, schedule: WarmupDecay, name: str) -> keras.optimizers.AdamW:
    opt = keras.optimizers.AdamW(
        learning_rate=schedule, weight_decay=cfg.weight_decay, epsilon=cfg.adam_epsilon, name=name
    )
    opt.exclude_from_weight_decay(var_names=list(cfg.weight_decay_exclude))
    return opt


def _dedup(grad: tf.Tensor | tf.IndexedSlices) -> tf.Tensor | tf.IndexedSlices:
    """Sums the rows of repeated indices of a sparse (embedding) gradient.

    Embedding gradients list one row per looked-up token (and all-reduce concatenates the
    replicas'), so without this the global norm would square the parts, not their sum.
    """
    if not isinstance(grad, tf.IndexedSlices):
        return grad
    indices, positions = tf.unique(grad.indices)
    values = tf.math.unsorted_segment_sum(grad.values, positions, tf.size(indices))
    return tf.IndexedSlices(values, indices, grad.dense_shape)


class DualOptimizer:
    """AdamW(encoder_learning_rate) on encoder variables + AdamW(learning_rate) on the rest.

    Create inside the strategy scope: the optimizers' variables are built immediately so a
    checkpoint restores into them before the first step.
    """

    def __init__(self, cfg: TrainerConfig, variables: list[tf.Variable], total_steps: int):
        self.clip_norm = cfg.clip_norm
        self.groups = split_variables(variables, cfg.encoder_patterns, cfg.freeze_patterns)
        if not (self.groups.encoder or self.groups.rest):
            raise ValueError("trainer config: freeze_patterns freeze every trainable variable")

        def schedule(peak: float) -> WarmupDecay:
            return WarmupDecay(
                peak,
                cfg.warmup_steps,
                total_steps,
                cfg.decay,
                cfg.end_learning_rate_fraction,
                cfg.exponential_decay_rate,
            )

        self.encoder_optimizer: keras.optimizers.AdamW | None = None
        self.optimizer: keras.optimizers.AdamW | None = None
        if self.groups.encoder:
            self.encoder_optimizer = _adamw(
                cfg, schedule(cfg.encoder_learning_rate), "encoder_adamw"
            )
            self.encoder_optimizer.build(self.groups.encoder)
        if self.groups.rest:
            self.optimizer = _adamw(cfg, schedule(cfg.learning_rate), "adamw")
            self.optimizer.build(self.groups.rest)

    @property
    def trainable_variables(self) -> list[tf.Variable]:
        """Variables that receive gradients, in the order `apply` expects them."""
        return self.groups.encoder + self.groups.rest

    def apply(self, grads: list[tf.Tensor]) -> tf.Tensor:
        """Clips all-reduced gradients by global norm and applies them. Returns the norm."""
        grads = [_dedup(g) for g in grads]
        norm = tf.linalg.global_norm(grads)
        if self.clip_norm > 0:
            grads, _ = tf.clip_by_global_norm(grads, self.clip_norm, use_norm=norm)
        n_enc = len(self.groups.encoder)
        for opt, g, v in (
            (self.encoder_optimizer, grads[:n_enc], self.groups.encoder),
            (self.optimizer, grads[n_enc:], self.groups.rest),
        ):
            if opt is not None:
                # Already summed over replicas by the caller (before clipping).
                opt.apply_gradients(zip(g, v), skip_gradients_aggregation=True)
        return norm

    def learning_rates(self) -> dict[str, tf.Tensor]:
        """Learning rate each optimizer applied in its latest step (its first, before any)."""
        out = {}
        for key, opt in (
            ("encoder_learning_rate", self.encoder_optimizer),
            ("learning_rate", self.optimizer),
        ):
            if opt is not None:
                out[key] = opt._learning_rate(tf.maximum(opt.iterations - 1, 0))
        return out

    def checkpoint_items(self) -> dict[str, keras.optimizers.AdamW]:
        items = {}
        if self.encoder_optimizer is not None:
            items["encoder_optimizer"] = self.encoder_optimizer
        if self.optimizer is not None:
            items["optimizer"] = self.optimizer
        return items
