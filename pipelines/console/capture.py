"""Where `rankpipe run`'s output goes: the log file, and the file descriptors pointed at it.

Python logging (TFX, absl, Beam, ours) and warnings go to the log file at full verbosity. What
C++ code (TensorFlow, gRPC) and child processes (Beam's multi_processing workers) write to
stdout/stderr never passes through Python's logging, so the file descriptors 1 and 2 themselves
are pointed at the log file for the duration of the run (os.dup2); the console keeps duplicates
of the original descriptors. With --verbose nothing is redirected.
"""

from __future__ import annotations

import logging
import os
import sys
import tempfile
import time
from typing import IO

LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s %(message)s"


def log_path_for(pipeline_root: str) -> str:
    """A new log file name under the pipeline root (a local temp dir for remote roots)."""
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    base = pipeline_root if "://" not in pipeline_root else os.path.join("/tmp", "rankpipe-logs")
    return os.path.join(base, "logs", f"run-{stamp}-{os.getpid()}.log")


def redirect_fds(fileno: int) -> dict[int, int]:
    """Points fds 1 and 2 at `fileno`; returns duplicates of the originals for restore_fds."""
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    saved = {}
    for target in (1, 2):
        saved[target] = os.dup(target)
        os.dup2(fileno, target)
    return saved


def restore_fds(saved: dict[int, int]) -> None:
    """Points fds 1 and 2 back where redirect_fds found them (and empties `saved`)."""
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    for target, fd in saved.items():
        os.dup2(fd, target)
        os.close(fd)
    saved.clear()


class EarlyCapture:
    """Points fds 1 and 2 at a temporary file until the log file is known (loading the config
    imports TensorFlow, which prints its start-up lines from C++); `text` then goes at the top
    of the log. A no-op with `enabled=False` (--verbose)."""

    def __init__(self, enabled: bool = True):
        self.enabled = enabled
        self.text = ""
        self._saved: dict[int, int] = {}

    def __enter__(self) -> EarlyCapture:
        if self.enabled:
            self._file = tempfile.TemporaryFile()
            self._saved = redirect_fds(self._file.fileno())
        return self

    def __exit__(self, *exc: object) -> None:
        if not self.enabled:
            return
        restore_fds(self._saved)
        self._file.seek(0)
        self.text = self._file.read().decode("utf-8", "replace")
        self._file.close()


def take_over_logging(
    log_file: IO[str], console: IO[str] | None, extra: logging.Handler
) -> tuple[int, list[logging.Handler]]:
    """Sends every log record (INFO and up) and warning to `log_file`, to `console` as well when
    given (--verbose), and to `extra`; returns the root logger's level and handlers before."""
    root = logging.getLogger()
    saved = (root.level, list(root.handlers))
    for handler in list(root.handlers):  # absl's and basicConfig's stderr handlers
        root.removeHandler(handler)
    root.setLevel(logging.INFO)
    for stream in (log_file, console):
        if stream is not None:
            handler = logging.StreamHandler(stream)
            handler.setFormatter(logging.Formatter(LOG_FORMAT))
            root.addHandler(handler)
    root.addHandler(extra)
    logging.captureWarnings(True)
    # TFX's Beam executors parse absl's flags (base_beam_executor), which sets the "absl"
    # logger to the --verbosity flag's level, WARNING by default: the runner's INFO
    # records (component start/end) would vanish from the first Beam component on.
    # Setting the flag itself survives that re-parse.
    from absl import logging as absl_logging

    absl_logging.set_verbosity(absl_logging.INFO)
    return saved


def restore_logging(saved: tuple[int, list[logging.Handler]]) -> None:
    """Gives the root logger back the level and handlers take_over_logging found."""
    root = logging.getLogger()
    for handler in list(root.handlers):
        root.removeHandler(handler)
    level, handlers = saved
    root.setLevel(level)
    for handler in handlers:
        root.addHandler(handler)
    logging.captureWarnings(False)
