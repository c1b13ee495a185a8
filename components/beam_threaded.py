"""The DirectRunner's `multi_threading` mode without Beam's timed flush of worker output.

Why: in `multi_threading` mode Beam 2.60's FnApiRunner runs its SDK workers as threads of this
process that talk to it over gRPC (EmbeddedPythonGrpcEnvironment), and their output streams
flush on a timer (`data_buffer_time_limit_ms`, 1000 ms when the environment does not say, and
0 cannot switch it off: the worker handler reads `config or 1000`). The timer runs in its own
thread and flushes without holding off the thread that is writing (TimeBasedBufferingClosable
OutputStream takes its lock in flush() only; write() takes none): a flush that lands while an
element is being encoded sends half an element (or drops bytes written between its get() and
_clear()). Encoding an element runs Python code whenever the element needs pickling (our
Groups, numpy token ids, Counters, tf.Transform's batches), so the other thread does get the
GIL in the middle of one. The runner then stores and decodes each message on its own
(GroupingBuffer.append) or deals whole messages out to the two workers (ListBuffer.partition),
so the cut element becomes garbage: a lost element (issue 18's `KeyError: 0` in BuildExample:
a document's token ids never reached the join) or a garbage length that the decoder allocates
(the 22 GB OOM kills). It needs a bundle open longer than the 1 s timer, a GIL switch inside an
element's encoding and the timer firing there, hence rare on an idle machine and frequent
under load; with the timer at 5 ms both of 2 runs blew up (docs/datagen.md, "Runners").

`multi_processing` workers (sdk_worker_main: `data_buffer_time_limit_ms` 0 unless an
experiment sets it) and the portable runner's LOOPBACK workers (worker pool: -1) flush only
between elements, and `in_memory` has no data plane: only `multi_threading` has the timer.

MultiThreadingRunner is that mode with the workers' timed flush off (-1, the value Beam's own
worker pool uses for "off"): their output goes out when 10 MB are buffered or the bundle ends,
always between elements. Everything else (two worker threads, gRPC, bundle splitting between
them) is Beam's `multi_threading` as it is. Not Beam patched: only the environment's payload in
the pipeline proto this runner is given.
"""

from __future__ import annotations

import json

from apache_beam.options.pipeline_options import DirectOptions, PipelineOptions, StandardOptions
from apache_beam.portability import python_urns
from apache_beam.portability.api import beam_runner_api_pb2
from apache_beam.runners.portability.fn_api_runner import fn_runner
from apache_beam.transforms.environments import EmbeddedPythonGrpcEnvironment

# Beam's "no timed flush" (worker_pool_main starts its workers with it); 0 means "default".
NO_TIMED_FLUSH = -1


def runs_multi_threaded(beam_args: list[str]) -> bool:
    """Whether these args run the DirectRunner in its `multi_threading` mode."""
    options = PipelineOptions(list(beam_args))
    runner = options.view_as(StandardOptions).runner
    mode = options.view_as(DirectOptions).direct_running_mode
    return runner in (None, "DirectRunner", "direct") and mode == "multi_threading"


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


class MultiThreadingRunner(fn_runner.FnApiRunner):
    """FnApiRunner for `--direct_running_mode=multi_threading` whose worker threads flush
    their output only between elements (see the module docstring)."""

    def run_via_runner_api(
        self, pipeline_proto: beam_runner_api_pb2.Pipeline, options: PipelineOptions
    ) -> fn_runner.RunnerResult:
        without_timed_flush(pipeline_proto)
        return super().run_via_runner_api(pipeline_proto, options)
