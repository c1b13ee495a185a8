"""Small inputs run their Beam pipeline in process (DirectRunner `in_memory`).

Why: on the DirectRunner, `multi_processing` (the default, runner.beam.direct_running_mode)
starts a Python process per worker, and each imports TensorFlow and, in the evaluator, loads the
SavedModel, for every Beam pipeline a component runs (RankingDataGen runs two). On the demo
collection or Cranfield that start-up is a large part of the component, while the work is
seconds; in process, TensorFlow's own threads still use every core for the model. Large inputs
keep the configured mode, where the workers pay off. Measured in docs/speed.md ("The
pipeline's own cost").

Only what is ours: RankingDataGen and the RankingEvaluator call `beam_pipeline_args_for`
with the size of their input. It never changes an output byte: RankingDataGen writes the same
bytes on every runner and mode (its byte-identity test), and the evaluator's runs are made from
per-example scores. Other runners (Dataflow, Flink, Spark, portable) and an explicit
`in_memory`/`multi_threading` keep their mode; `pipeline_maker` runs `multi_processing` and
`multi_threading` on beam_direct.DirectFnApiRunner (Beam's modes without the timed flush of
their data plane, which lost elements or cut them in two: components/beam_direct.py).

`$RANKPIPE_IN_PROCESS_BELOW_MB` sets the threshold (default IN_PROCESS_BELOW_MB; 0 turns it
off, e.g. to measure or test `multi_processing` itself on small data).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterable

import apache_beam as beam
import tensorflow as tf
from apache_beam.options.pipeline_options import DirectOptions, PipelineOptions, StandardOptions
from tfx.dsl.components.base import base_beam_executor

from components import beam_direct

# Inputs (bytes on disk, as written: gzip examples, raw collection files) below this many MiB.
# Cranfield's collection is 1.6 MB, its test examples about 1 MB; the evaluator ran a 10x
# Cranfield split (38,710 candidates, ~10 MB) faster in process than on 2 workers
# (docs/evaluator.md "Performance").
IN_PROCESS_BELOW_MB = 16.0
THRESHOLD_ENV = "RANKPIPE_IN_PROCESS_BELOW_MB"
IN_PROCESS_ARGS = ("--direct_running_mode=in_memory", "--direct_num_workers=1")


def threshold_bytes() -> float:
    """The threshold in bytes: $RANKPIPE_IN_PROCESS_BELOW_MB, else IN_PROCESS_BELOW_MB."""
    value = os.environ.get(THRESHOLD_ENV, "").strip()
    return float(value or IN_PROCESS_BELOW_MB) * (1 << 20)


def input_bytes(patterns: Iterable[str]) -> int:
    """Total size of the files the patterns (paths or globs, any tf.io.gfile URI) match; what
    cannot be read counts 0 (the component reports a missing input itself)."""
    total = 0
    for pattern in patterns:
        try:
            total += sum(tf.io.gfile.stat(path).length for path in tf.io.gfile.glob(pattern))
        except (tf.errors.OpError, OSError):
            pass
    return total


def runs_in_process(beam_args: list[str], size: int) -> bool:
    """Whether a pipeline with these args on an input of `size` bytes should run in process:
    the DirectRunner in multi_processing mode and the input below threshold_bytes()."""
    options = PipelineOptions(list(beam_args))
    runner = options.view_as(StandardOptions).runner
    if runner not in (None, "DirectRunner", "direct"):
        return False
    if options.view_as(DirectOptions).direct_running_mode != "multi_processing":
        return False
    return size < threshold_bytes()


def beam_pipeline_args_for(beam_args: list[str], size: int) -> list[str]:
    """The args to run a pipeline with for an input of `size` bytes: `beam_args`, with
    IN_PROCESS_ARGS appended (the last value of a flag wins) when runs_in_process."""
    if runs_in_process(beam_args, size):
        return [*beam_args, *IN_PROCESS_ARGS]
    return list(beam_args)


def in_process_args(
    executor: base_beam_executor.BaseBeamExecutor, size: int, what: str
) -> list[str] | None:
    """The Beam args the executor should run an input of `size` bytes in process with, or
    None to keep its own (large input, another runner or mode, or a pipeline factory injected
    into the executor, as tests do). Logs the choice."""
    args = _own_args(executor)
    if args is None or not runs_in_process(args, size):
        return None
    logging.info(
        "%s: %.1f MB of input, below %s MB: Beam runs in process (%s)",
        what,
        size / (1 << 20),
        f"{threshold_bytes() / (1 << 20):g}",
        " ".join(IN_PROCESS_ARGS),
    )
    return beam_pipeline_args_for(args, size)


def _own_args(executor: base_beam_executor.BaseBeamExecutor) -> list[str] | None:
    """The executor's Beam args (BaseBeamExecutor's own), or None when a pipeline factory was
    injected into it (as tests do): then its pipelines are left alone."""
    if executor._make_beam_pipeline_fn is not None:  # noqa: SLF001
        return None
    return list(executor._beam_pipeline_args or [])  # noqa: SLF001


def chooses_in_process(executor: base_beam_executor.BaseBeamExecutor, size: int) -> bool:
    """Whether in_process_args / pipeline_maker run an input of `size` bytes in process (what
    the RankingEvaluator records as `scoring_phases.in_process`); logs nothing."""
    args = _own_args(executor)
    return args is not None and runs_in_process(args, size)


def pipeline_maker(
    executor: base_beam_executor.BaseBeamExecutor, size: int, what: str
) -> Callable[[], beam.Pipeline]:
    """What the executor should make its Beam pipelines with for an input of `size` bytes:
    its own `_make_beam_pipeline`, a pipeline with `in_process_args`, or, on the DirectRunner's
    `multi_processing` and `multi_threading` modes, one on beam_direct.DirectFnApiRunner (those
    modes without the timed data-plane flush that loses elements)."""
    args = in_process_args(executor, size, what)
    if args is not None:
        return lambda: beam.Pipeline(argv=args)
    own_args = _own_args(executor)
    if own_args is not None and beam_direct.runs_on_grpc_workers(own_args):
        logging.info("%s: Beam's gRPC workers without the timed data-plane flush", what)
        return lambda: beam.Pipeline(runner=beam_direct.DirectFnApiRunner(), argv=own_args)
    return executor._make_beam_pipeline  # noqa: SLF001
