"""InterruptGuard and its helpers (pipelines/interrupts.py) in this process and in child
processes, with real signals and no pipeline; `rankpipe run` under real signals is
test_interrupts.py."""

from __future__ import annotations

import io
import logging
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pipelines import interrupts

REPO = Path(__file__).resolve().parents[2]


def _child_python(code: str, timeout: float = 60) -> subprocess.CompletedProcess:
    """Runs `code` in a child python of this checkout; asserts that it exited 0."""
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=timeout
    )
    assert result.returncode == 0, result.stderr
    return result


def test_the_guard_raises_in_the_main_thread_and_restores_the_handlers() -> None:
    before = signal.getsignal(signal.SIGTERM)
    with interrupts.InterruptGuard(where=lambda: "Trainer") as guard:
        with pytest.raises(interrupts.RunInterrupted):
            signal.raise_signal(signal.SIGTERM)
            time.sleep(5)  # (the handler runs first)
        assert (guard.signal_name, guard.exit_code, guard.component) == ("SIGTERM", 143, "Trainer")
    assert signal.getsignal(signal.SIGTERM) is before


def test_a_signal_swallowed_by_a_finalizer_still_stops_the_run_at_the_next_check() -> None:
    """What happened in StatisticsGen: the KeyboardInterrupt raised inside a finalizer, which
    Python reports ("Exception ignored in ...") and drops."""

    class Finalized:
        def __del__(self) -> None:
            signal.raise_signal(signal.SIGINT)  # the handler runs here, in the finalizer

    with interrupts.InterruptGuard() as guard:
        Finalized()  # collected at once: the exception is printed and dropped
        assert guard.interrupted and guard.exit_code == 130
        with pytest.raises(interrupts.RunInterrupted):
            guard.check()  # where RunConsole calls it: a component start, a progress record
        with guard.quiet():
            signal.raise_signal(signal.SIGINT)  # noted, nothing raised: the clean-up runs
            guard.check()


def test_end_child_processes_ends_the_whole_tree() -> None:
    """In a child python (ending this process's own children would hit pytest's)."""
    code = (
        "import subprocess, sys, time\n"
        "from pipelines import interrupts\n"
        "shell = subprocess.Popen(['sh', '-c', 'sleep 60 & sleep 60; :'])\n"
        "time.sleep(0.5)\n"
        "tree = interrupts.descendants(interrupts.os.getpid())\n"
        "assert len(tree) >= 3, tree\n"
        "ended = interrupts.end_child_processes()\n"
        "assert sorted(ended) == sorted(tree), (ended, tree)\n"
        "time.sleep(0.2)\n"
        "alive = [p for p in tree if interrupts._running(p)]\n"
        "assert not alive, alive\n"
    )
    _child_python(code)


def test_a_run_that_does_not_unwind_has_its_late_children_killed_then_is_raised_in_again() -> None:
    """What a loaded host showed once: after the signal the run waited on an SDK worker the
    first SIGTERM did not reach. Here a child born after the signal ignores SIGTERM and the
    main thread waits on it: SIGKILL comes after grace_s; then a main thread still waiting
    (on an event nobody sets) gets RunInterrupted again after as long. In a child python, as
    the escalation ends every descendant of its process."""
    code = (
        "import signal, subprocess, sys, threading, time\n"
        "from pipelines import interrupts\n"
        "with interrupts.InterruptGuard(end_children=True, grace_s=1.0):\n"
        "    try:\n"
        "        signal.raise_signal(signal.SIGTERM); time.sleep(5)\n"
        "    except interrupts.RunInterrupted:\n"
        "        pass\n"
        "    late = subprocess.Popen([sys.executable, '-c', 'import signal, time; "
        "signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(120)'])\n"
        "    start = time.time()\n"
        "    assert late.wait(timeout=60) == -signal.SIGKILL\n"
        "    try:\n"
        "        threading.Event().wait(60)\n"
        "    except interrupts.RunInterrupted:\n"
        "        print(f'raised again after {time.time() - start:.1f} s')\n"
    )
    result = _child_python(code, timeout=90)
    waited = float(result.stdout.split("after ")[1].split(" s")[0])
    assert 1.5 < waited < 30, result.stdout


def test_a_run_that_unwinds_in_time_is_left_alone() -> None:
    """The clean-up (quiet) began before grace_s: no SIGKILL for the children it ends itself."""
    code = (
        "import signal, subprocess, sys, time\n"
        "from pipelines import interrupts\n"
        "with interrupts.InterruptGuard(end_children=True, grace_s=0.5) as guard:\n"
        "    try:\n"
        "        signal.raise_signal(signal.SIGTERM); time.sleep(5)\n"
        "    except interrupts.RunInterrupted:\n"
        "        pass\n"
        "    with guard.quiet():\n"
        "        late = subprocess.Popen(['sleep', '3'])\n"
        "        assert late.wait(timeout=30) == 0\n"
    )
    _child_python(code)


def test_the_console_stops_the_run_at_the_runner_records_after_a_signal(tmp_path: Path) -> None:
    """RunConsole calls the guard's check at TFX's "Component %s is running." record (before
    its line: the component has not started), at a new execution and at a Trainer progress
    record, and keeps the launcher's ExecutionInfo for the clean-up."""
    from absl import logging as absl_logging

    from pipelines import console as console_lib

    out = io.StringIO()
    with interrupts.InterruptGuard() as guard:
        with console_lib.RunConsole(
            str(tmp_path / "run.log"), total=2, out=out, err=io.StringIO(), check=guard.check
        ) as console:
            guard.where = lambda: console.current.name if console.current else None
            absl_logging.info("Component %s is running.", "Trainer")
            absl_logging.info("Going to run a new execution %d", 7)
            info = object()  # what the launcher logs: its ExecutionInfo
            absl_logging.info("Going to run a new execution: %s", info)
            assert console.current.execution_info is info
            with guard.quiet():
                signal.raise_signal(signal.SIGINT)  # noted only: as if swallowed
            assert guard.component == "Trainer"
            progress = {"step": 1, "total": 2, "loss": 1.0, "examples_per_sec": 1, "eta_seconds": 1}
            with pytest.raises(interrupts.RunInterrupted):  # the Trainer's loop stops here
                logging.getLogger("trainer").info("step", extra={"rankpipe_progress": progress})
            with pytest.raises(interrupts.RunInterrupted):
                absl_logging.info("Component %s is running.", "Pusher")
    assert "Pusher" not in out.getvalue()
