"""Ctrl-C (SIGINT) and SIGTERM during `rankpipe run`: stop promptly, leave nothing half-done.

Why this module exists: Python's own KeyboardInterrupt was not enough. It is raised wherever the
main thread happens to be, and when that is a finalizer (a WeakSet callback during Beam's or
TensorFlow's garbage collection) Python prints "Exception ignored in ..." and drops it: the run
went on, trained, evaluated and printed its summary. SIGTERM (`kill`, a CI timeout) ended the
process with no clean-up at all. And TFX's launcher cleans up a failed execution only for an
`Exception` (tfx/orchestration/portable/launcher.py: remove_output_dirs, publish_failed_execution),
so an interrupted one stayed RUNNING in MLMD with its empty output directories (e.g.
`Trainer/model/<id>/`) behind.

So, for the length of the run:
- InterruptGuard records the first signal (and the component running then), sends SIGTERM to
  this process's children (Beam's DirectRunner multi_processing workers: Beam's own clean-up
  joins their threads and waited forever for workers still expecting work) and raises
  RunInterrupted, a KeyboardInterrupt, in the main thread; `check()` raises it again where
  stopping is safe (a component about to start, a new execution about to run, a Trainer
  progress record: RunConsole calls it there), so a swallowed exception still stops the run
  before the next component, and the run never reports success after a signal.
- After the runner has unwound, cancel_unfinished() does for the interrupted execution what
  TFX's failure path does for a failed one, with TFX's own functions (OutputsResolver,
  remove_output_dirs, remove_stateful_working_dir), and records it CANCELED in MLMD (an
  execution that TFX recorded FAILED after the signal, e.g. when its workers were ended,
  too); the
  pipeline_run context gets INTERRUPTED_PROPERTY (the component) for `rankpipe runs`.
  Completed executions are never touched, so the next run of the same config reuses them
  from the cache.
- end_child_processes() ends what is left of this process's children, so none outlives the
  run.
- A run that has not unwound UNWIND_GRACE_S after the signal is waiting on something the
  first SIGTERM did not reach: an SDK worker started after it, or one stuck at start-up whose
  logging channel timed out (seen once on a loaded 2-core host: the run and that worker
  waited 56 minutes). Its descendants then get SIGKILL, and after as long again the signal is
  delivered to the main thread once more, raising RunInterrupted wherever it waits.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

# Custom property of the interrupted run's `pipeline_run` context: the component running when
# the signal came (pipelines/runs.py shows "interrupted in <it>").
INTERRUPTED_PROPERTY = "rankpipe_interrupted_in"
SIGNALS = (signal.SIGINT, signal.SIGTERM)
UNWIND_GRACE_S = 20.0  # seconds from the signal to the SIGKILL of what still runs below us

_log = logging.getLogger("rankpipe")


class RunInterrupted(KeyboardInterrupt):
    """SIGINT or SIGTERM arrived during a run. A KeyboardInterrupt, not an Exception: the
    `except Exception` of libraries (and of the components' own code) must not swallow it."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


class InterruptGuard:
    """Installs SIGINT and SIGTERM handlers in the main thread for the `with` block.

    `where` names the component running now (RunConsole's current one); it is read when the
    first signal arrives, and with `end_children` the process's children get SIGTERM then. A
    second signal raises again (a user pressing Ctrl-C twice wants it to stop); inside
    `quiet()` (the clean-up after the runner unwound) signals are only noted.
    """

    def __init__(
        self,
        where: Callable[[], str | None] = lambda: None,
        end_children: bool = False,
        grace_s: float = UNWIND_GRACE_S,
    ):
        self.where = where
        self.end_children = end_children
        self.grace_s = grace_s
        self._unwound = threading.Event()  # the clean-up (quiet) began, or the guard exited
        self.signum: int | None = None
        self.component: str | None = None
        self.at: float | None = None  # time.time() of the first signal
        self._raising = True
        self._saved: dict[int, Any] = {}

    def __enter__(self) -> InterruptGuard:
        if threading.current_thread() is threading.main_thread():
            for signum in SIGNALS:
                self._saved[signum] = signal.signal(signum, self._handle)
        return self

    def __exit__(self, *exc: object) -> None:
        self._unwound.set()
        for signum, handler in self._saved.items():
            signal.signal(signum, handler)
        self._saved.clear()

    @property
    def interrupted(self) -> bool:
        return self.signum is not None

    @property
    def signal_name(self) -> str:
        """SIGINT or SIGTERM (SIGINT too for a KeyboardInterrupt that no handler of ours saw)."""
        return signal.Signals(self.signum or signal.SIGINT).name

    @property
    def exit_code(self) -> int:
        """The shell's convention for a process ended by a signal: 128 + its number (130 for
        SIGINT, 143 for SIGTERM)."""
        return 128 + (self.signum or signal.SIGINT)

    def _handle(self, signum: int, frame: object) -> None:
        if self.signum is None:
            self.signum, self.at = signum, time.time()
            try:
                self.component = self.where()
            except Exception:  # noqa: BLE001  (naming the component is best effort)
                self.component = None
            if self.end_children:
                _signal_all(descendants(os.getpid()), signal.SIGTERM)  # no waiting in a handler
                threading.Thread(target=self._escalate, name="rankpipe-unwind", daemon=True).start()
        if self._raising:
            raise RunInterrupted(signum)

    def _escalate(self) -> None:
        """After the first signal, in its own thread: SIGKILL for the descendants of a run not
        unwound within grace_s, then the signal again in the main thread (module docstring)."""
        if self._unwound.wait(self.grace_s):
            return
        pids = descendants(os.getpid())
        _log.warning(
            "the run had not stopped %.0f s after %s: SIGKILL to its child processes %s",
            self.grace_s,
            self.signal_name,
            pids,
        )
        _signal_all(pids, signal.SIGKILL)
        if not self._unwound.wait(self.grace_s) and self.signum is not None:
            _log.warning("the run is still waiting: %s again in its main thread", self.signal_name)
            signal.pthread_kill(threading.main_thread().ident or 0, self.signum)

    def check(self) -> None:
        """Raises RunInterrupted in the main thread when a signal came (its first exception
        may have been swallowed); a no-op otherwise, in other threads and inside quiet()."""
        if (
            self.signum is not None
            and self._raising
            and threading.current_thread() is threading.main_thread()
        ):
            raise RunInterrupted(self.signum)

    @contextlib.contextmanager
    def quiet(self) -> Iterator[None]:
        """Signals are noted but raise nothing: for the clean-up, which must not be cut short
        (MLMD writes, directory removal) and takes well under a second."""
        self._unwound.set()
        self._raising = False
        try:
            yield
        finally:
            self._raising = True


@dataclass
class Cancelled:
    """An execution of the interrupted run that had not finished, now CANCELED in MLMD."""

    node_id: str
    execution_id: int
    removed: list[str] = field(default_factory=list)  # the directories removed


def cancel_unfinished(
    ir: Any,
    metadata_path: str,
    component: str | None,
    signal_name: str,
    started: Any = None,
    since: float | None = None,
) -> list[Cancelled]:
    """Cancels the executions of the run of `ir` (the pipeline IR LocalDagRunner ran, its run
    id substituted) that are still NEW or RUNNING in MLMD, or that TFX recorded FAILED at or
    after `since` (the signal's time.time(): they failed of the interrupt, e.g. their Beam
    workers ended), as TFX's launcher would have for a
    failure: removes their output artifact directories, temporary and stateful working
    directories and `.system/executor_execution/<id>/`, then records them CANCELED with the
    signal in the execution result. `started` is the launcher's ExecutionInfo of the execution
    whose executor was started (RunConsole's), for the directories only it knows (a custom
    driver's output URIs, the stateful working dir's random name). Marks the run's
    `pipeline_run` context with INTERRUPTED_PROPERTY = `component` (registering the contexts
    when the interrupt came before the first component registered any)."""
    from ml_metadata.proto import metadata_store_pb2
    from tfx.dsl.compiler import constants
    from tfx.orchestration import metadata
    from tfx.orchestration.portable import outputs_utils
    from tfx.orchestration.portable.mlmd import context_lib, execution_lib
    from tfx.proto.orchestration import execution_result_pb2

    run_id = ir.runtime_spec.pipeline_run_id.field_value.string_value
    nodes = {n.pipeline_node.node_info.id: n.pipeline_node for n in ir.nodes}
    node_by_context = {
        c.name.field_value.string_value: node
        for node in nodes.values()
        for c in node.contexts.contexts
        if c.type.name == constants.NODE_CONTEXT_TYPE_NAME
    }
    cancelled = []
    connection = metadata.sqlite_metadata_connection_config(metadata_path)
    with metadata.Metadata(connection) as m:
        store = m.store
        run = store.get_context_by_type_and_name(constants.PIPELINE_RUN_CONTEXT_TYPE_NAME, run_id)
        if run is None and component in nodes:
            context_lib.prepare_contexts(m, nodes[component].contexts)
            run = store.get_context_by_type_and_name(
                constants.PIPELINE_RUN_CONTEXT_TYPE_NAME, run_id
            )
        if run is None:
            return []
        for execution in store.get_executions_by_context(run.id):
            failed_of_it = (
                since is not None
                and execution.last_known_state == metadata_store_pb2.Execution.FAILED
                and execution.last_update_time_since_epoch >= int(since * 1000)
            )
            if not (execution_lib.is_execution_active(execution) or failed_of_it):
                continue  # finished before the signal (COMPLETE, CACHED, FAILED): untouched
            node = next(
                (
                    node_by_context[c.name]
                    for c in store.get_contexts_by_execution(execution.id)
                    if c.name in node_by_context
                ),
                None,
            )
            removed = []
            if node is not None:
                removed = _remove_execution_dirs(ir, node, execution.id, started, outputs_utils)
            execution.last_known_state = metadata_store_pb2.Execution.CANCELED
            execution_lib.set_execution_result(
                execution_result_pb2.ExecutionResult(
                    code=1,  # google.rpc.Code.CANCELLED
                    result_message=f"interrupted by {signal_name} (rankpipe run)",
                ),
                execution,
            )
            store.put_executions([execution])
            node_id = node.node_info.id if node is not None else "?"
            cancelled.append(Cancelled(node_id, execution.id, removed))
            _log.info("cancelled execution %d of %s, removed %s", execution.id, node_id, removed)
        if component:
            run.custom_properties[INTERRUPTED_PROPERTY].string_value = component
            store.put_contexts([run])
    return cancelled


def _remove_execution_dirs(
    ir: Any, node: Any, execution_id: int, started: Any, outputs_utils: Any
) -> list[str]:
    """The directories TFX made for this execution, removed with TFX's own functions."""
    from tfx.dsl.io import fileio
    from tfx.types.value_artifact import ValueArtifact

    resolver = outputs_utils.OutputsResolver(
        node, ir.pipeline_info, ir.runtime_spec, ir.execution_mode
    )
    outputs = resolver.generate_output_artifacts(execution_id)
    mine = started is not None and started.execution_id == execution_id
    if mine:  # the launcher's own copy: a custom driver may have changed the URIs
        for key, artifacts in started.output_dict.items():
            outputs.setdefault(key, []).extend(artifacts)
    existing: dict[str, list] = {}
    seen = set()
    for key, artifacts in outputs.items():
        for artifact in artifacts:
            if artifact.uri not in seen and fileio.exists(artifact.uri):
                seen.add(artifact.uri)
                existing.setdefault(key, []).append(artifact)
    outputs_utils.remove_output_dirs(existing)
    removed = sorted(seen)
    # A ValueArtifact's URI is <key>/<id>/value, a file in a directory make_output_dirs made
    # for it; remove_output_dirs removes the file only.
    for artifacts in outputs.values():
        for artifact in artifacts:
            parent = os.path.dirname(artifact.uri)
            if (
                isinstance(artifact, ValueArtifact)
                and fileio.isdir(parent)
                and not fileio.listdir(parent)
            ):
                fileio.rmtree(parent)
                removed.append(parent)
    # .system/executor_execution/<id>/ (the executor output file, the temporary dir inside).
    node_dir = outputs_utils.get_node_dir(ir.runtime_spec, node.node_info.id)
    execution_dir = os.path.dirname(outputs_utils.get_executor_output_uri(node_dir, execution_id))
    fileio.rmtree(execution_dir)
    removed.append(execution_dir)
    if mine and started.stateful_working_dir and fileio.exists(started.stateful_working_dir):
        outputs_utils.remove_stateful_working_dir(started.stateful_working_dir)
        removed.append(started.stateful_working_dir)
    return removed


def _children() -> dict[int, list[int]]:
    """Child pids by parent pid, from /proc (empty where there is no /proc)."""
    tree: dict[int, list[int]] = {}
    try:
        pids = [int(p) for p in os.listdir("/proc") if p.isdigit()]
    except OSError:
        return tree
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        # "pid (comm) state ppid ...": comm may hold spaces and parentheses.
        ppid = int(stat[stat.rindex(b")") + 2 :].split()[1])
        tree.setdefault(ppid, []).append(pid)
    return tree


def descendants(pid: int) -> list[int]:
    """The processes below `pid` (children, their children, ...), from /proc."""
    tree, found, todo = _children(), [], [pid]
    while todo:
        for child in tree.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def end_child_processes(timeout_s: float = 3.0) -> list[int]:
    """Ends this process's descendants (Beam's multi_processing workers and their shells)
    still alive: SIGTERM, then SIGKILL after `timeout_s`. Returns the pids it signalled. The
    run exits with os._exit afterwards, which would otherwise leave them running."""
    pids = descendants(os.getpid())
    _signal_all(pids, signal.SIGTERM)
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        alive = [p for p in pids if _running(p)]
        if not alive:
            break
        time.sleep(0.05)
    _signal_all([p for p in pids if _running(p)], signal.SIGKILL)
    for pid in pids:  # reap our own children (zombies otherwise, until os._exit)
        with contextlib.suppress(OSError):
            os.waitpid(pid, os.WNOHANG)
    return pids


def _signal_all(pids: list[int], signum: int) -> None:
    """Sends `signum` to each of `pids`; one that has already ended is skipped."""
    for pid in pids:
        with contextlib.suppress(OSError):
            os.kill(pid, signum)


def _running(pid: int) -> bool:
    """Whether `pid` is alive and not a zombie."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return False
    return stat[stat.rindex(b")") + 2 :].split()[0] != b"Z"


def message(
    component: str | None,
    signal_name: str,
    cancelled: list[Cancelled] | tuple = (),
    log_path: str | None = None,
    cache: bool = True,
    finished: bool = False,
) -> str:
    """The block an interrupted run prints (stderr)."""
    if finished:
        return (
            f"rankpipe: interrupted by {signal_name} after every component finished; "
            "`rankpipe runs` shows the run"
        )
    where = f"in {component}" if component else "before any component ran"
    head = f"rankpipe: interrupted by {signal_name} {where}"
    if cancelled:
        ids = ", ".join(f"{c.node_id} (execution {c.execution_id})" for c in cancelled)
        head += f"; cancelled {ids} and removed its partial outputs"
    again = "run the same command again"
    if cache:
        again += " (the components that finished are reused from the cache)"
    lines = [f"{head}.", f"  resume: {again}"]
    if log_path:
        lines.append(f"  log:    {log_path}")
    return "\n".join(lines)


def after_interrupt(
    guard: InterruptGuard,
    console: Any,
    runner: Any,
    config: Any,
    log_path: str,
    exc: BaseException,
) -> str:
    """What `rankpipe run` does once the runner has unwound from an interrupt: the console
    line, the traceback into the log, Beam's worker processes ended (before the clean-up: they
    may still write into the outputs), the unfinished executions cancelled; returns the block
    to print. `console` is the RunConsole, `runner` the IrKeepingDagRunner (None, or without
    an IR, when the interrupt came before the pipeline was compiled), `config` the
    PipelineConfig."""
    current = console.current
    component = guard.component or (current.name if current is not None else None)
    started = current.execution_info if current is not None else None
    console.fail("interrupted")
    _log.error(
        "run interrupted by %s in %s (unwound %.1f s after the signal):\n%s",
        guard.signal_name,
        component or "no component",
        time.time() - (guard.at or time.time()),
        "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)),
    )
    ended = end_child_processes()
    if ended:
        _log.info("ended child processes %s", ended)
    cancelled: list[Cancelled] = []
    ir = getattr(runner, "ir", None)
    if ir is not None:
        try:
            cancelled = cancel_unfinished(
                ir, config.runner.metadata_path, component, guard.signal_name, started, guard.at
            )
        except Exception:  # noqa: BLE001  (the run stops either way; the log says why)
            _log.exception("cleaning up after the interrupt failed")
    return message(component, guard.signal_name, cancelled, log_path, config.runner.enable_cache)
