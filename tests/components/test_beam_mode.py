"""components/beam_mode.py: which Beam args a component runs with for a small or large input,
and that the choice never reaches other runners or an explicit mode. Also the real thing: an
executor given multi_processing args makes an in-process pipeline for a small input."""

from __future__ import annotations

from pathlib import Path

import apache_beam as beam
import pytest
from apache_beam.options.pipeline_options import DirectOptions
from tfx.dsl.components.base import base_beam_executor

from components import beam_direct, beam_mode

MP = ["--direct_running_mode=multi_processing", "--direct_num_workers=2"]
MB = 1 << 20


@pytest.fixture(autouse=True)
def default_threshold(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(beam_mode.THRESHOLD_ENV, raising=False)


def test_small_input_on_multi_processing_runs_in_process() -> None:
    assert beam_mode.runs_in_process(MP, 1 * MB)
    args = beam_mode.beam_pipeline_args_for(MP, 1 * MB)
    assert args == [*MP, *beam_mode.IN_PROCESS_ARGS]  # the last value of a flag wins
    options = beam.Pipeline(argv=args).options.view_as(DirectOptions)
    assert (options.direct_running_mode, options.direct_num_workers) == ("in_memory", 1)


def test_large_input_other_runners_and_other_modes_keep_their_args() -> None:
    big = int(beam_mode.IN_PROCESS_BELOW_MB * MB)
    for args, size in (
        (MP, big),
        (["--direct_running_mode=in_memory"], MB),
        (["--direct_running_mode=multi_threading", "--direct_num_workers=2"], MB),
        ([*MP, "--runner=DataflowRunner", "--project=p"], MB),
        ([*MP, "--runner", "PortableRunner", "--job_endpoint=embed"], MB),
        ([], MB),  # Beam's default mode is in_memory already
    ):
        assert not beam_mode.runs_in_process(args, size), args
        assert beam_mode.beam_pipeline_args_for(args, size) == args
    assert beam_mode.runs_in_process([*MP, "--runner=DirectRunner"], MB)


def test_the_environment_sets_or_switches_off_the_threshold(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(beam_mode.THRESHOLD_ENV, "0")
    assert not beam_mode.runs_in_process(MP, 0)
    monkeypatch.setenv(beam_mode.THRESHOLD_ENV, "100")
    assert beam_mode.runs_in_process(MP, 99 * MB)
    assert not beam_mode.runs_in_process(MP, 100 * MB)


def test_input_bytes_sums_globs_and_counts_what_is_missing_as_zero(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_bytes(b"x" * 10)
    (tmp_path / "b.txt").write_bytes(b"x" * 5)
    patterns = [str(tmp_path / "*.txt"), str(tmp_path / "missing" / "*"), "/no/such/file"]
    assert beam_mode.input_bytes(patterns) == 15


class _Executor(base_beam_executor.BaseBeamExecutor):
    def Do(self, input_dict, output_dict, exec_properties) -> None:  # noqa: N802
        raise NotImplementedError


def _executor(args: list[str], make=None) -> base_beam_executor.BaseBeamExecutor:
    context = base_beam_executor.BaseBeamExecutor.Context(
        beam_pipeline_args=args, make_beam_pipeline_fn=make
    )
    return _Executor(context)


def test_pipeline_maker_makes_in_process_pipelines_for_small_inputs_only() -> None:
    # The --sdk_container_image flag keeps TFX from building its staging package here.
    args = [*MP, "--sdk_container_image=unused-by-the-direct-runner"]
    executor = _executor(args)
    small = beam_mode.pipeline_maker(executor, MB, "test")()
    assert small.options.view_as(DirectOptions).direct_running_mode == "in_memory"
    # A large one keeps multi_processing, on the runner without the timed data-plane flush.
    large = beam_mode.pipeline_maker(executor, 10**12, "test")()
    assert isinstance(large.runner, beam_direct.DirectFnApiRunner)
    assert large.options.view_as(DirectOptions).direct_running_mode == "multi_processing"
    # A factory injected into the executor (tests, other orchestrators) is always kept.
    injected = _executor(args, make=lambda: "injected")
    assert beam_mode.pipeline_maker(injected, MB, "test")() == "injected"
