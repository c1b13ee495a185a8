"""`rankpipe run`'s console: one line per component as it starts and as it ends (status,
seconds, one key figure read from the artifacts it produced), the Trainer's and the
CorpusEncoder's progress (one updating line on a terminal, a plain line every PROGRESS_EVERY_S
seconds otherwise), then the summary. The lines come from log records (records.py); everything
else goes to the log file (capture.py); the figures are read from MLMD (figures.py). Where those
records mark a safe place to stop (a component about to start, a new execution about to run, a
Trainer progress record) the console calls `check`: pipelines/interrupts.py's guard raises there
when a signal came whose exception was lost (docs/architecture.md, "Interrupts").
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import IO, Any

from pipelines.console.capture import (
    redirect_fds,
    restore_fds,
    restore_logging,
    take_over_logging,
)
from pipelines.console.figures import key_figure
from pipelines.console.records import EncodeProgress, Progress, _ConsoleHandler
from pipelines.mlmd_read import open_readonly

PROGRESS_EVERY_S = 20.0  # plain progress lines when stdout is not a terminal


@dataclass
class _Node:
    name: str
    index: int
    start: float
    execution_id: int | None = None
    cached: bool = False
    execution_info: Any = None  # the launcher's ExecutionInfo, once its executor starts


@dataclass
class RunConsole:
    """Context manager around a run: sets up logging, the log file and the console lines.

    `metadata_path` (the SQLite MLMD store) is read for each finished component's key figure;
    `total` is the number of components, for the [i/n] counter (0: unknown). `check` is
    called where the run may stop (see the module docstring); it raises to stop it.
    """

    log_path: str
    verbose: bool = False
    metadata_path: str | None = None
    total: int = 0
    out: IO[str] | None = None  # the console (default: the original stdout)
    err: IO[str] | None = None  # where errors go (default: the original stderr)
    preamble: str = ""  # written at the top of the log (EarlyCapture.text)
    check: Callable[[], None] | None = None  # raises where the run should stop (interrupts)
    current: _Node | None = None
    failed: str | None = None
    _count: int = 0
    _saved_fds: dict[int, int] = field(default_factory=dict)
    _saved_logging: tuple = ()
    _log_file: IO[str] | None = None
    _progress_shown: bool = False
    _last_progress: float = 0.0
    _lock: threading.RLock = field(default_factory=threading.RLock)
    _store: Any = None

    # -- set-up --------------------------------------------------------------------------
    def __enter__(self) -> RunConsole:
        os.makedirs(os.path.dirname(self.log_path), exist_ok=True)
        # O_APPEND: Python's handler, C++ code and child processes all write to this file.
        fd = os.open(self.log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        self._log_file = os.fdopen(fd, "w", buffering=1, encoding="utf-8", errors="replace")
        self._log_file.write(self.preamble)
        for stream in (sys.stdout, sys.stderr):
            stream.flush()
        if self.out is None:
            self.out = os.fdopen(os.dup(sys.stdout.fileno()), "w", buffering=1)
        if self.err is None:
            self.err = os.fdopen(os.dup(sys.stderr.fileno()), "w", buffering=1)
        self.tty = self.out.isatty() and not self.verbose
        if not self.verbose:
            self._saved_fds = redirect_fds(self._log_file.fileno())
        self._saved_logging = take_over_logging(
            self._log_file, self.err if self.verbose else None, _ConsoleHandler(self)
        )
        logging.getLogger("rankpipe").info("rankpipe log file: %s", self.log_path)
        return self

    def __exit__(self, *exc: object) -> None:
        self._clear_progress()
        restore_logging(self._saved_logging)
        restore_fds(self._saved_fds)
        if self._log_file is not None:
            self._log_file.close()

    # -- lines ---------------------------------------------------------------------------
    def print(self, text: str = "") -> None:
        with self._lock:
            self._clear_progress()
            print(text, file=self.out, flush=True)

    def _prefix(self, index: int) -> str:
        return f"[{index}/{self.total}]" if self.total else f"[{index}]"

    def _check(self) -> None:
        if self.check is not None:
            self.check()

    def started(self, name: str) -> None:
        self._check()  # before the line: a component stopped here has not started
        with self._lock:
            self._count += 1
            self.current = _Node(name, self._count, time.time())
            self.print(f"{self._prefix(self._count):>7} {name:<34} running")

    def execution(self, execution_id: int, cached: bool) -> None:
        if self.current is not None:
            self.current.execution_id, self.current.cached = execution_id, cached
        if not cached:
            self._check()  # registered, nothing made yet: the clean-up cancels it

    def executor_started(self, execution_info: Any) -> None:
        """The launcher is about to make the execution's output dirs and run its executor."""
        if self.current is not None:
            self.current.execution_info = execution_info

    def finished(self, name: str) -> None:
        with self._lock:
            node = self.current if self.current and self.current.name == name else None
            if node is None:
                return
            self.current = None
            status = "cached" if node.cached else "done"
            figure = ""
            if node.execution_id is not None:
                try:
                    figure = key_figure(self._mlmd(), node.execution_id, _figure_of(name))
                except Exception:  # noqa: BLE001  (a missing figure is no failure)
                    logging.getLogger("rankpipe").exception("no key figure for %s", name)
            self.print(
                f"{self._prefix(node.index):>7} {name:<34} {status:<7}"
                f"{time.time() - node.start:>7.1f}s  {figure}".rstrip()
            )

    def skipped(self, name: str) -> None:
        self._count += 1
        self.print(f"{self._prefix(self._count):>7} {name:<34} skipped")

    def fail(self, status: str = "FAILED") -> str | None:
        """Marks the running component failed (or `status`, e.g. "interrupted"); returns its
        name (None: failed outside one)."""
        with self._lock:
            node, self.current = self.current, None
            if node is None:
                return None
            self.failed = node.name
            elapsed = time.time() - node.start
            self.print(f"{self._prefix(node.index):>7} {node.name:<34} {status} {elapsed:>7.1f}s")
            return node.name

    def progress(self, p: Progress | EncodeProgress) -> None:
        if isinstance(p, Progress):
            # The Trainer's loop, between steps (an encoder's record comes from a Beam worker
            # thread, where raising would only lose the record).
            self._check()
        if self.verbose:
            return  # the component's own log line is on the console already
        with self._lock:
            if self.tty:
                self.out.write("\r" + p.line() + "\x1b[K")
                self.out.flush()
                self._progress_shown = True
                return
            now = time.time()
            if now - self._last_progress >= PROGRESS_EVERY_S or p.finished:
                self._last_progress = now
                print(p.line(), file=self.out, flush=True)

    def _clear_progress(self) -> None:
        if self._progress_shown and self.out is not None:
            self.out.write("\r\x1b[K")
            self.out.flush()
            self._progress_shown = False

    def _mlmd(self):
        if self._store is None:
            self._store = open_readonly(self.metadata_path)
        return self._store


def _figure_of(component_id: str):
    """The key figure of a component id (pipelines/component_table.py), None for none."""
    # Imported here: the table imports this package's figures module.
    from pipelines import component_table

    entry = component_table.row_of(component_id)
    return entry.key_figure if entry is not None else None
