"""What a component's executor leaves in memory is collected when its Do ends
(components/process_memory.py)."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator
from pathlib import Path

import pytest

from components import process_memory
from pipelines import component_table
from pipelines.pipeline import import_path

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


def test_a_frozen_heap_keeps_old_objects_out_of_collections_and_frees_new_ones(
    collector_off: None,
) -> None:
    """Inside frozen_heap what was alive before is in the permanent generation (no collection
    traverses it) and a cycle made inside is still freed by release; afterwards the old
    objects are collectable again."""
    before = process_memory.frozen_heap()
    old = _Cycle()
    old_ref = weakref.ref(old)
    with before:
        assert gc.get_freeze_count() > 0
        new_ref = weakref.ref(_Cycle())
        del old
        assert process_memory.release() >= 1
        assert new_ref() is None
        assert old_ref() is not None  # frozen: out of the collection's reach
    assert gc.get_freeze_count() == 0
    process_memory.release()
    assert old_ref() is None


def test_the_local_run_runs_in_a_frozen_heap(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pipelines import local_runner

    monkeypatch.setenv("RANKPIPE_OUTPUTS", str(tmp_path))

    seen: list[int] = []

    class Runner:
        def run(self, pipeline: object) -> None:
            seen.append(gc.get_freeze_count())

    local_runner.run(local_runner.load_config("demo", []), runner=Runner())
    assert seen and seen[0] > 0
    assert gc.get_freeze_count() == 0


def _executor_class(row: component_table.ComponentRow) -> type:
    """The executor LocalDagRunner runs for a row: its replacement, else the class's own."""
    if row.executor_class:
        return import_path(row.executor_class)
    return import_path(row.component_class).EXECUTOR_SPEC.executor_class


def test_every_heavy_component_releases_after_do() -> None:
    """Each heavy row of the component table (a `per_fold` row, the Trainer, is built from the
    same class for every fold branch) runs an executor whose Do is wrapped."""
    wrapped = {
        row.id
        for row in component_table.COMPONENTS
        if getattr(_executor_class(row).Do, "__wrapped__", None) is not None
    }
    assert {*HEAVY, "Tuner", "Pusher"} <= wrapped
