"""What a training session reports: TrainResult, written as model_run_dir/train_results.json
(the evaluation report draws its curves from it), and the peak memory it records."""

from __future__ import annotations

import json
import os
import resource
from dataclasses import asdict, dataclass, field

import tensorflow as tf

from rankcore.constants import TRAIN_RESULTS_FILE


@dataclass
class TrainResult:
    steps: int
    best_step: int
    best_metric: float | None
    final_metric: float | None
    validation_metric: str
    examples_per_sec: float
    stopped_early: bool
    peak_host_rss_mb: float
    peak_device_memory_mb: float | None
    wall_seconds: float
    # First-stage score fusion chosen after training (rankcore/fusion.py): mode, alpha,
    # dev metric per alpha. None when fusion is off. Set by run_fn, not by the loop.
    fusion: dict | None = None
    # Training curves (the evaluation report plots them): [step, mean loss of the steps since
    # the previous point] at every log point, and [step, validation metric] at every
    # validation. This session's steps only: a resumed run's curves start at the resume step.
    loss_history: list[list[float]] = field(default_factory=list)
    validation_history: list[list[float]] = field(default_factory=list)
    # Where this session resumed (None: it started from step 0): the checkpoint, its step and
    # each optimizer's iteration count after the restore. Lets a retried execution (and its
    # tests) show that it continued the killed run rather than retraining from scratch,
    # which would end with the same weights and so cannot be told apart from the weights.
    resumed_from: dict | None = None
    # Where run_fn's time went (setup, train, dev_scoring, fusion; in memory also export and
    # total, which come after train_results.json is written). Set by run_fn.
    seconds: dict[str, float] = field(default_factory=dict)
    # What the exported model is, as its recipe describes itself (trainer_module/recipes/:
    # Markdown bullet lines without the "- "), for the model card. Set by run_fn.
    recipe: list[str] = field(default_factory=list)


def peak_host_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # KiB on Linux


def peak_device_memory_mb() -> float | None:
    if not tf.config.list_logical_devices("GPU"):
        return None
    return tf.config.experimental.get_memory_info("GPU:0")["peak"] / 2**20


def write_results(result: TrainResult, model_run_dir: str) -> str:
    tf.io.gfile.makedirs(model_run_dir)
    path = os.path.join(model_run_dir, TRAIN_RESULTS_FILE)
    with tf.io.gfile.GFile(path, "w") as f:
        json.dump(asdict(result), f, indent=2)
    return path
