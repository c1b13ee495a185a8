"""The log records `rankpipe run`'s console lines come from.

Component start/end come from TFX's own LocalDagRunner log records ("Component %s is running."
/ "... is finished.", and the launcher's "A cached execution %d is used." / "Going to run a new
execution %d"), matched on the record's format string and arguments, not on formatted text. The
launcher's "Going to run a new execution: %s" carries its ExecutionInfo (output, temporary and
stateful dirs), which the interrupt clean-up needs (pipelines/interrupts.py).
That was chosen over wrapping: LocalDagRunner builds its Launcher inside its loop, so wrapping
would mean patching a TFX class for the whole process; the records are part of the pinned TFX
1.16 runner (tfx/orchestration/local/local_dag_runner.py and
tfx/orchestration/portable/launcher.py), cover cached and failed components alike, and a test
(tests/pipelines/test_cli.py) fails if they stop appearing. The Trainer's progress comes from
the structured `extra` field of its log line (trainer_module/training.py), not from its text, and
so does the CorpusEncoder's (components/corpus_encoder/encode.py).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Protocol

_RUNNING = "Component %s is running."
_FINISHED = "Component %s is finished."
_SKIPPED = "Skipping component %s."
_CACHED = "A cached execution %d is used."
_NEW = "Going to run a new execution %d"
_EXECUTOR = "Going to run a new execution: %s"  # its argument: the launcher's ExecutionInfo


@dataclass
class Progress:
    """The Trainer's latest progress record."""

    step: int
    total: int
    loss: float
    examples_per_sec: float
    eta_seconds: float

    def line(self) -> str:
        return (
            f"      Trainer step {self.step}/{self.total}  loss {self.loss:.4f}  "
            f"{self.examples_per_sec:,.0f} ex/s  ETA {duration(self.eta_seconds)}"
        )

    @property
    def finished(self) -> bool:
        return self.step >= self.total


@dataclass
class EncodeProgress:
    """The CorpusEncoder's latest progress record, one encoder in one worker
    (components/corpus_encoder/encode.py): a corpus takes minutes to embed (NFCorpus with MPNet:
    about 18 on 2 cores), and the component's line alone would say "running" all that while."""

    encoder: str  # the checkpoint directory's name
    done: int
    total: int
    texts_per_sec: float
    eta_seconds: float

    def line(self) -> str:
        return (
            f"      CorpusEncoder {self.encoder} {self.done:,}/{self.total:,} texts  "
            f"{self.texts_per_sec:,.1f} texts/s  ETA {duration(self.eta_seconds)}"
        )

    @property
    def finished(self) -> bool:
        return self.done >= self.total


def duration(seconds: float) -> str:
    seconds = max(0, int(round(seconds)))
    return f"{seconds // 60}m{seconds % 60:02d}s" if seconds >= 60 else f"{seconds}s"


class Lines(Protocol):
    """What the records are turned into (pipelines/console/run_console.py RunConsole)."""

    def progress(self, p: Progress | EncodeProgress) -> None: ...
    def started(self, name: str) -> None: ...
    def finished(self, name: str) -> None: ...
    def skipped(self, name: str) -> None: ...
    def execution(self, execution_id: int, cached: bool) -> None: ...
    def executor_started(self, execution_info: Any) -> None: ...


class _ConsoleHandler(logging.Handler):
    """Turns the runner's and the Trainer's log records into console lines."""

    def __init__(self, console: Lines):
        super().__init__(logging.INFO)
        self.console = console

    def emit(self, record: logging.LogRecord) -> None:
        try:
            progress = getattr(record, "rankpipe_progress", None)
            if progress is not None:
                self.console.progress(Progress(**progress))
                return
            encoding = getattr(record, "rankpipe_encode_progress", None)
            if encoding is not None:
                self.console.progress(EncodeProgress(**encoding))
                return
            args = record.args if isinstance(record.args, tuple) else ()
            if len(args) != 1:
                return
            if record.msg == _RUNNING:
                self.console.started(str(args[0]))
            elif record.msg == _FINISHED:
                self.console.finished(str(args[0]))
            elif record.msg == _SKIPPED:
                self.console.skipped(str(args[0]))
            elif record.msg == _CACHED:
                self.console.execution(int(args[0]), cached=True)
            elif record.msg == _NEW:
                self.console.execution(int(args[0]), cached=False)
            elif record.msg == _EXECUTOR:
                self.console.executor_started(args[0])
        except Exception:  # noqa: BLE001  (a console problem must not stop the pipeline)
            self.handleError(record)
