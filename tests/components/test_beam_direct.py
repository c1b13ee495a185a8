"""components/beam_direct.py: the DirectRunner's gRPC-worker modes (multi_processing,
multi_threading) without the timed flush of their data plane.

The first test is Beam's flaw itself, on its own stream class and no pipeline: a chunk
written while the timer's flush is inside its callback is never sent. The last test is the
workers' side of it, in a child process with a 4 GB address-space limit (on plain Beam 2.60
the same pipeline lost elements or grew past 4 GB in 9 s, docs/datagen.md "Runners"; the
limit turns a regression into a MemoryError instead of an OOM kill): elements whose encoding
runs Python code, in a bundle longer than Beam's 1 s flush timer, must all arrive.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import apache_beam as beam
from apache_beam.portability import python_urns
from apache_beam.runners.portability.fn_api_runner import fn_runner
from apache_beam.runners.worker import data_plane
from apache_beam.transforms.environments import (
    EmbeddedPythonEnvironment,
    EmbeddedPythonGrpcEnvironment,
)
from tfx.dsl.components.base import base_beam_executor

from components import beam_direct, beam_mode

MT = ["--direct_running_mode=multi_threading", "--direct_num_workers=2"]
MP = ["--direct_running_mode=multi_processing", "--direct_num_workers=2"]
REPO_ROOT = Path(__file__).resolve().parents[2]


def test_beams_timed_flush_drops_what_is_written_while_it_sends() -> None:
    sent: list[bytes] = []
    inside, go_on = threading.Event(), threading.Event()

    def flush_callback(data: bytes) -> None:  # the timer thread, between get() and _clear()
        sent.append(bytes(data))
        inside.set()
        go_on.wait(5)

    stream = data_plane.ClosableOutputStream.create(
        lambda data: sent.append(bytes(data)), flush_callback, 20
    )
    stream.write(b"first chunk;")
    assert inside.wait(5)
    stream.write(b"second chunk;")  # the writer, meanwhile: a whole chunk
    go_on.set()
    time.sleep(0.1)  # the flush empties the buffer
    stream.close()
    assert b"".join(sent) == b"first chunk;"  # the second chunk was never sent
    # With the timer off (NO_TIMED_FLUSH) the stream sends between writes only, on close.
    sent.clear()
    stream = data_plane.ClosableOutputStream.create(
        lambda data: sent.append(bytes(data)), flush_callback, beam_direct.NO_TIMED_FLUSH
    )
    stream.write(b"first chunk;")
    stream.write(b"second chunk;")
    stream.close()
    assert b"".join(sent) == b"first chunk;second chunk;"


def test_runs_on_grpc_workers_means_the_direct_runners_worker_modes_only() -> None:
    for args in (MT, MP, [*MT, "--runner=DirectRunner"], [*MP, "--runner=direct"]):
        assert beam_direct.runs_on_grpc_workers(args), args
    for args in (
        [],  # Beam's default mode is in_memory
        ["--direct_running_mode=in_memory"],
        [*MT, "--runner=PortableRunner", "--job_endpoint=embed"],
        [*MP, "--runner=DataflowRunner", "--project=p"],
    ):
        assert not beam_direct.runs_on_grpc_workers(args), args


def _data_service_time_limits(runner, monkeypatch) -> list[int]:
    """The time limits the runner's data service (its streams to the workers) was built with
    in one small multi_threading run."""
    limits = []

    class Recording(data_plane.BeamFnDataServicer):
        def __init__(self, data_buffer_time_limit_ms=0):
            limits.append(data_buffer_time_limit_ms)
            super().__init__(data_buffer_time_limit_ms)

    monkeypatch.setattr(data_plane, "BeamFnDataServicer", Recording)
    with beam.Pipeline(runner=runner, argv=MT) as p:
        _ = p | beam.Create(range(10)) | beam.Map(lambda x: x + 1)
    return limits


def test_the_runners_own_streams_to_its_workers_have_no_timer(monkeypatch) -> None:
    before = beam_direct.worker_handlers.DATA_BUFFER_TIME_LIMIT_MS
    assert _data_service_time_limits(fn_runner.FnApiRunner(), monkeypatch) == [before] != [-1]
    limits = _data_service_time_limits(beam_direct.DirectFnApiRunner(), monkeypatch)
    assert limits == [beam_direct.NO_TIMED_FLUSH]
    # Beam's value again once the run is over.
    assert beam_direct.worker_handlers.DATA_BUFFER_TIME_LIMIT_MS == before


def _embedded_grpc_payloads(proto) -> list[dict]:
    return [
        json.loads(env.payload)
        for env in proto.components.environments.values()
        if env.urn == python_urns.EMBEDDED_PYTHON_GRPC
    ]


def test_without_timed_flush_switches_the_timer_off_and_keeps_other_settings() -> None:
    for env, expected in (
        (EmbeddedPythonGrpcEnvironment.default(), {}),  # what multi_threading uses
        (EmbeddedPythonGrpcEnvironment(state_cache_size=7), {"state_cache_size": 7}),
        (EmbeddedPythonGrpcEnvironment(data_buffer_time_limit_ms=5), {}),
    ):
        p = beam.Pipeline()
        _ = p | beam.Create([1]) | beam.Map(str)
        proto = p.to_runner_api(default_environment=env)
        beam_direct.without_timed_flush(proto)
        assert _embedded_grpc_payloads(proto) == [
            {**expected, "data_buffer_time_limit_ms": beam_direct.NO_TIMED_FLUSH}
        ]
    # Other environments are left as they are.
    p = beam.Pipeline()
    _ = p | beam.Create([1]) | beam.Map(str)
    proto = p.to_runner_api(default_environment=EmbeddedPythonEnvironment.default())
    before = proto.SerializeToString(deterministic=True)
    beam_direct.without_timed_flush(proto)
    assert proto.SerializeToString(deterministic=True) == before


class _Executor(base_beam_executor.BaseBeamExecutor):
    def Do(self, input_dict, output_dict, exec_properties) -> None:  # noqa: N802
        raise NotImplementedError


def test_pipeline_maker_runs_the_worker_modes_on_the_fixed_runner(monkeypatch) -> None:
    monkeypatch.delenv(beam_mode.THRESHOLD_ENV, raising=False)
    for args, size in ((MT, 1), (MT, 10**12), (MP, 10**12)):  # MT is not moved in process
        executor = _Executor(base_beam_executor.BaseBeamExecutor.Context(beam_pipeline_args=args))
        pipeline = beam_mode.pipeline_maker(executor, size, "test")()
        assert isinstance(pipeline.runner, beam_direct.DirectFnApiRunner), (args, size)
    small = _Executor(base_beam_executor.BaseBeamExecutor.Context(beam_pipeline_args=MP))
    pipeline = beam_mode.pipeline_maker(small, 1, "test")()  # in process: no data plane
    assert not isinstance(pipeline.runner, beam_direct.DirectFnApiRunner)
    injected = _Executor(
        base_beam_executor.BaseBeamExecutor.Context(
            beam_pipeline_args=MT, make_beam_pipeline_fn=lambda: "injected"
        )
    )
    assert beam_mode.pipeline_maker(injected, 1, "test")() == "injected"


_CHILD = textwrap.dedent(
    """
    import resource, sys, time
    resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))
    import apache_beam as beam
    from components.beam_direct import DirectFnApiRunner

    class Slow:  # pickled by Beam's fallback coder: Python code runs mid-element
        def __init__(self, i):
            self.i = i

        def __reduce__(self):
            time.sleep(0.002)
            return (Slow, (self.i,))

    N = 700
    out = sys.argv[1]

    def check(ids):
        got = sorted(i for group in ids for i in group)
        with open(out, "w") as f:
            f.write("ok" if got == list(range(N)) else f"{len(got)} of {N}")

    argv = ["--direct_running_mode=multi_threading", "--direct_num_workers=2"]
    with beam.Pipeline(runner=DirectFnApiRunner(), argv=argv) as p:
        _ = (
            p
            | beam.Create([0])
            | beam.FlatMap(lambda _: ((i % 7, Slow(i)) for i in range(N)))
            | beam.GroupByKey()
            | beam.Map(lambda kv: [s.i for s in kv[1]])  # plain ints from here on
            | beam.combiners.ToList()
            | beam.Map(check)
        )
    """
)


def test_elements_encoded_by_python_code_in_long_bundles_all_arrive(tmp_path: Path) -> None:
    out = tmp_path / "result.txt"
    proc = subprocess.run(
        [sys.executable, "-c", _CHILD, str(out)],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert out.read_text() == "ok"
