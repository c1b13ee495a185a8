"""What a component's executor leaves in memory is collected when its Do ends
(components/process_memory.py)."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator
from pathlib import Path

import pytest

from components import process_memory
from pipelines.config import load_config
from pipelines.pipeline import create_components

# Components that build models or run Beam over the collection; ImportSchemaGen,
# ExampleValidator and ExampleGate hold nothing large.
HEAVY = ("CorpusEncoder", "RankingDataGen", "StatisticsGen", "Trainer", "RankingEvaluator")


class _Cycle:
    """A model's shape in miniature: objects that reference each other, freed only by a full
    collection."""

    def __init__(self) -> None:
        self.me = self
        self.payload = bytearray(1 << 20)


@pytest.fixture
def collector_off() -> Iterator[None]:
    """Python's automatic collector off, so only released_after can free a cycle."""
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def test_a_cycle_left_by_do_is_freed_when_it_returns(collector_off: None) -> None:
    refs: list[weakref.ref] = []

    @process_memory.released_after
    def do() -> str:
        refs.append(weakref.ref(_Cycle()))
        assert refs[0]() is not None  # alive until the collection
        return "done"

    assert do() == "done"
    assert refs[0]() is None


def test_a_cycle_left_by_a_failing_do_is_freed_and_the_error_kept(collector_off: None) -> None:
    refs: list[weakref.ref] = []

    @process_memory.released_after
    def do() -> None:
        refs.append(weakref.ref(_Cycle()))
        raise RuntimeError("the component failed")

    with pytest.raises(RuntimeError, match="the component failed"):
        do()
    assert refs[0]() is None


def test_release_reports_what_it_collected(collector_off: None) -> None:
    for _ in range(3):
        _Cycle()
    assert process_memory.release() >= 3


def test_every_heavy_component_of_a_run_releases_after_do(shared_data: Path) -> None:
    """The executors LocalDagRunner runs for cranfield.yaml (the Trainer's fold copies too):
    each heavy one's Do is wrapped."""
    components = create_components(load_config("cranfield"))
    wrapped = {
        c.id
        for c in components
        if getattr(c.executor_spec.executor_class.Do, "__wrapped__", None) is not None
    }
    trainers = [c.id for c in components if c.id.startswith("Trainer")]
    assert len(trainers) == 6  # the served model's and five folds'
    assert {*HEAVY, *trainers, "Pusher"} <= wrapped
