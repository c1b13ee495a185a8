"""components/beam_threaded.py: the DirectRunner's multi_threading mode without the workers'
timed output flush (issue 18).

The last test is the mechanism itself, in a child process with a 4 GB address-space limit (on
plain Beam 2.60 the same pipeline lost elements or grew past 4 GB in 9 s, docs/datagen.md
"Runners"; the limit turns a regression into a MemoryError instead of an OOM kill): elements
whose encoding runs Python code, in a bundle longer than Beam's 1 s flush timer, must all
arrive.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import apache_beam as beam
from apache_beam.portability import python_urns
from apache_beam.transforms.environments import (
    EmbeddedPythonEnvironment,
    EmbeddedPythonGrpcEnvironment,
)
from tfx.dsl.components.base import base_beam_executor

from components import beam_mode, beam_threaded

MT = ["--direct_running_mode=multi_threading", "--direct_num_workers=2"]
REPO_ROOT = Path(__file__).resolve().parents[2]


def test_runs_multi_threaded_means_the_direct_runners_thread_mode_only() -> None:
    assert beam_threaded.runs_multi_threaded(MT)
    assert beam_threaded.runs_multi_threaded([*MT, "--runner=DirectRunner"])
    for args in (
        [],
        ["--direct_running_mode=in_memory"],
        ["--direct_running_mode=multi_processing", "--direct_num_workers=2"],
        [*MT, "--runner=PortableRunner", "--job_endpoint=embed"],
        [*MT, "--runner=DataflowRunner", "--project=p"],
    ):
        assert not beam_threaded.runs_multi_threaded(args), args


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
        beam_threaded.without_timed_flush(proto)
        assert _embedded_grpc_payloads(proto) == [
            {**expected, "data_buffer_time_limit_ms": beam_threaded.NO_TIMED_FLUSH}
        ]
    # Other environments are left as they are.
    p = beam.Pipeline()
    _ = p | beam.Create([1]) | beam.Map(str)
    proto = p.to_runner_api(default_environment=EmbeddedPythonEnvironment.default())
    before = proto.SerializeToString(deterministic=True)
    beam_threaded.without_timed_flush(proto)
    assert proto.SerializeToString(deterministic=True) == before


class _Executor(base_beam_executor.BaseBeamExecutor):
    def Do(self, input_dict, output_dict, exec_properties) -> None:  # noqa: N802
        raise NotImplementedError


def test_pipeline_maker_runs_multi_threading_on_the_fixed_runner(monkeypatch) -> None:
    monkeypatch.delenv(beam_mode.THRESHOLD_ENV, raising=False)
    for size in (1, 10**12):  # small inputs are not moved in process from multi_threading
        executor = _Executor(base_beam_executor.BaseBeamExecutor.Context(beam_pipeline_args=MT))
        pipeline = beam_mode.pipeline_maker(executor, size, "test")()
        assert isinstance(pipeline.runner, beam_threaded.MultiThreadingRunner)
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
    from components.beam_threaded import MultiThreadingRunner

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
    with beam.Pipeline(runner=MultiThreadingRunner(), argv=argv) as p:
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
