"""The DirectRunner's `multi_processing` and `multi_threading` modes without Beam's timed flush
of the data plane, which loses elements.

Why: in both modes Beam 2.60's FnApiRunner talks to its SDK workers (processes, or threads of
this process) over gRPC, and the streams that carry the elements can flush on a timer
(TimeBasedBufferingClosableOutputStream, apache_beam/runners/worker/data_plane.py). The timer
runs in its own thread and flushes without holding off the thread that writes: flush() takes
its lock, write() takes none, and flush() runs Python code (the send queue's callback) between
reading the buffer (`get()`) and emptying it (`_clear()`). Whatever the writer adds in that
window is emptied with the rest and never sent: `tests/components/test_beam_direct.py` shows
it on Beam's class with no pipeline at all. Where the writer encodes elements one by one, the
flush can also land in the middle of one and send half of it. Two streams have the timer:
- the runner's own streams to every gRPC worker, in both modes: `worker_handlers.GrpcServer`
  builds its data service with DATA_BUFFER_TIME_LIMIT_MS (1000 ms, a module constant no
  option sets). The runner writes a bundle's input as whole encoded chunks (a ListBuffer's
  partition, a GroupingBuffer's groups), so a chunk written in the window is lost whole, and
  nothing downstream can tell (CHANGELOG.md has what it cost us). It needs a bundle whose input
  takes the runner longer than the timer to write and a thread switch inside the flush: rare
  on an idle process, more frequent in the pipeline's busy one.
- the `multi_threading` workers' output streams: EmbeddedPythonGrpcEnvironment's
  `data_buffer_time_limit_ms` (1000 ms when the environment does not say, and 0 cannot switch
  it off: the worker handler reads `config or 1000`). Here the writer encodes element by
  element, and encoding runs Python code whenever an element needs pickling (our Groups, numpy
  token ids, tf.Transform's batches), so the flush can cut an element in two: a lost element
  (a `KeyError: 0` in BuildExample) or a garbage length that the decoder allocates
  (the 22 GB OOM kills; docs/datagen.md, "Runners").
`multi_processing` workers' own output streams (sdk_worker_main: `data_buffer_time_limit_ms` 0
unless an experiment sets it) and the portable runner's LOOPBACK workers (worker pool: -1)
flush only between elements, and `in_memory` has no data plane.

DirectFnApiRunner is the FnApiRunner the DirectRunner uses for these modes, with both timers
off (-1, the value Beam's own worker pool uses for "off"): every stream sends when 10 MB are
buffered between elements (the workers) or when the bundle's input is written (the runner), so
nothing is sent half-written or dropped. Everything else (workers, gRPC, how bundles are dealt
out to them) is Beam's. Beam is not patched: the workers' setting is the environment's payload
in the pipeline proto this runner is given, and the runner's is the module constant Beam reads
when it builds its data service, set for the runner's own run only (`_runner_side_timer_off`).
The cost: the runner sends a bundle's input as one message instead of one per second, so a
worker's part of a stage's input must stay under gRPC's 2 GB (a part of ours is at most a few
hundred MB: NFCorpus's 305,331 train examples are about 800 MB in all, dealt to 2 workers).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator

from apache_beam.options.pipeline_options import DirectOptions, PipelineOptions, StandardOptions
from apache_beam.portability import python_urns
from apache_beam.portability.api import beam_runner_api_pb2
from apache_beam.runners.portability.fn_api_runner import fn_runner, worker_handlers
from apache_beam.transforms.environments import EmbeddedPythonGrpcEnvironment

# Beam's "no timed flush" (worker_pool_main starts its workers with it); 0 means "default".
NO_TIMED_FLUSH = -1
# The DirectRunner's modes that run on gRPC workers, hence on DirectFnApiRunner.
GRPC_MODES = ("multi_processing", "multi_threading")


def runs_on_grpc_workers(beam_args: list[str]) -> bool:
    """Whether these args run the DirectRunner in a mode with gRPC workers (GRPC_MODES)."""
    options = PipelineOptions(list(beam_args))
    runner = options.view_as(StandardOptions).runner
    mode = options.view_as(DirectOptions).direct_running_mode
    return runner in (None, "DirectRunner", "direct") and mode in GRPC_MODES


def without_timed_flush(pipeline_proto: beam_runner_api_pb2.Pipeline) -> None:
    """Sets `data_buffer_time_limit_ms` to NO_TIMED_FLUSH in every embedded gRPC (the
    multi_threading workers') environment of the pipeline proto, keeping its other settings."""
    for env in pipeline_proto.components.environments.values():
        if env.urn != python_urns.EMBEDDED_PYTHON_GRPC:
            continue
        payload = env.payload.decode("utf-8")
        config = EmbeddedPythonGrpcEnvironment.parse_config(payload) if payload else {}
        config["data_buffer_time_limit_ms"] = NO_TIMED_FLUSH
        env.payload = json.dumps(config).encode("utf-8")


@contextlib.contextmanager
def _runner_side_timer_off() -> Iterator[None]:
    """Beam builds the runner's data service (worker_handlers.GrpcServer, created when a run
    starts its first gRPC worker) with the module's DATA_BUFFER_TIME_LIMIT_MS: NO_TIMED_FLUSH
    for the run, Beam's value again after it. Our components run their pipelines one at a time
    in a process (LocalDagRunner runs one component at a time), so a save and restore is
    enough."""
    beam_value = worker_handlers.DATA_BUFFER_TIME_LIMIT_MS
    worker_handlers.DATA_BUFFER_TIME_LIMIT_MS = NO_TIMED_FLUSH
    try:
        yield
    finally:
        worker_handlers.DATA_BUFFER_TIME_LIMIT_MS = beam_value


class DirectFnApiRunner(fn_runner.FnApiRunner):
    """FnApiRunner for `--direct_running_mode=multi_processing|multi_threading` whose data
    streams, the runner's and the workers', flush only between elements (module docstring)."""

    def run_via_runner_api(
        self, pipeline_proto: beam_runner_api_pb2.Pipeline, options: PipelineOptions
    ) -> fn_runner.RunnerResult:
        without_timed_flush(pipeline_proto)
        with _runner_side_timer_off():
            return super().run_via_runner_api(pipeline_proto, options)
