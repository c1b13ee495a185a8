"""Ctrl-C (SIGINT) and SIGTERM during `rankpipe run` (pipelines/interrupts.py).

The end-to-end part is one chain of real `rankpipe run demo` processes under one outputs
directory, each sent a real signal while one component runs, in pipeline order: each run
resumes from the cache where the previous one stopped, so reaching the next component costs
the process start and a few cached components, not a whole run, and the chain itself checks
the resume. A last run without a signal must complete, reusing what every interrupted run
finished. After each interrupted run the test records what the process printed, its exit
code, the MLMD store, the directories under the pipeline root and the processes it left; the
per-component tests assert on those records.

Quick components (ImportSchemaGen, ExampleValidator, ExampleGate, Pusher: a fraction of a
second) may be over before the signal lands: the run then stops in a later component, and the
tests assert what MLMD says happened, not what was aimed at. The RankingEvaluator run makes
Beam start its multi_processing workers ($RANKPIPE_IN_PROCESS_BELOW_MB=0; every Beam component
before it is cached by then, so only its own pipeline pays their start-up) and gets SIGTERM
once they exist, to check that none outlives the run.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from ml_metadata import metadata_store
from ml_metadata.proto import metadata_store_pb2

from pipelines import interrupts, runs

REPO = Path(__file__).resolve().parents[2]
PIPELINE = "rankpipe-demo"
# The demo pipeline's components in the order LocalDagRunner runs them.
ORDER = [
    "ImportSchemaGen",
    "RankingDataGen",
    "StatisticsGen",
    "ExampleValidator",
    "ExampleGate",
    "Trainer",
    "RankingEvaluator",
    "Pusher",
]
# Components that run for seconds: the signal sent as they start lands in them.
LONG = {"RankingDataGen", "StatisticsGen", "Trainer", "RankingEvaluator"}
SIGNALS = {"RankingEvaluator": signal.SIGTERM}  # the others get SIGINT
WITH_WORKERS = "RankingEvaluator"  # signalled once Beam's multi_processing workers run
SETTINGS = ["trainer.train_steps=120"]  # a shorter Trainer: progress at step 50, then 100
TAG_ENV = "RANKPIPE_INTERRUPT_TEST_TAG"  # marks the chain's processes and their children
# A run alive this long has hung (a Beam worker stuck at start-up once kept one for 56 min): it
# is killed with its process tree and the link fails, instead of blocking the suite.
RUN_DEADLINE_S = 600
State = metadata_store_pb2.Execution
DONE_STATES = (State.COMPLETE, State.CACHED)


@dataclass
class Execution:
    id: int
    node: str
    state: int
    run: str  # the pipeline_run context's name


@dataclass
class Link:
    """One `rankpipe run demo` of the chain and what it left."""

    target: str | None  # the component the signal was aimed at (None: no signal)
    signum: int | None
    finished_before: set[str]  # components with a COMPLETE/CACHED execution before this run
    returncode: int
    stdout: str
    stderr: str
    stop_s: float  # from the signal to the process's exit
    executions: list[Execution] = field(default_factory=list)
    leftovers: list[str] = field(default_factory=list)  # dirs of unfinished executions
    stateful_dirs: list[str] = field(default_factory=list)
    missing_outputs: list[str] = field(default_factory=list)  # of finished executions
    runs_table: str = ""
    workers_seen: list[int] = field(default_factory=list)
    survivors: list[str] = field(default_factory=list)

    @property
    def run(self) -> list[Execution]:
        """This process's own executions (the newest pipeline_run)."""
        newest = max((e.run for e in self.executions), default=None)
        return [e for e in self.executions if e.run == newest]

    def console_status(self, component: str) -> str | None:
        found = re.search(
            rf"^ *\[\d+/\d+\] {component} +(done|cached|interrupted)", self.stdout, re.M
        )
        return found.group(1) if found else None


def _store(root: Path) -> metadata_store.MetadataStore:
    config = metadata_store_pb2.ConnectionConfig()
    config.sqlite.filename_uri = str(root / "metadata.sqlite")
    config.sqlite.connection_mode = metadata_store_pb2.SqliteMetadataSourceConfig.READONLY
    return metadata_store.MetadataStore(config)


def _executions(root: Path) -> list[Execution]:
    store = _store(root)
    types = {t.id: t.name for t in store.get_context_types()}
    result = []
    for execution in store.get_executions():
        contexts = store.get_contexts_by_execution(execution.id)
        by_type = {types[c.type_id]: c.name for c in contexts}
        node = by_type.get("node", "").rsplit(".", 1)[-1]
        result.append(
            Execution(execution.id, node, execution.last_known_state, by_type["pipeline_run"])
        )
    return result


def _leftovers(root: Path, executions: list[Execution]) -> list[str]:
    """Directories under the pipeline root that belong to an execution not COMPLETE/CACHED:
    <node>/<output key>/<id> and <node>/.system/executor_execution/<id>."""
    found = []
    for e in executions:
        if e.state in DONE_STATES:
            continue
        node_dir = root / e.node
        candidates = [node_dir / ".system" / "executor_execution" / str(e.id)]
        if node_dir.is_dir():
            candidates += [key / str(e.id) for key in node_dir.iterdir() if key.name != ".system"]
        found += [str(p) for p in candidates if p.exists()]
    return found


def _missing_outputs(root: Path, executions: list[Execution]) -> list[str]:
    """Output artifact URIs of COMPLETE executions that are gone (must never happen)."""
    store = _store(root)
    complete = [e.id for e in executions if e.state == State.COMPLETE]
    events = store.get_events_by_execution_ids(complete) if complete else []
    ids = [e.artifact_id for e in events if e.type == metadata_store_pb2.Event.OUTPUT]
    return [a.uri for a in store.get_artifacts_by_id(ids) if not os.path.exists(a.uri)]


def _tagged_processes(tag: str) -> list[str]:
    """Live (not zombie) processes whose environment carries the tag: the chain's runs and
    everything they started."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            environ = Path(f"/proc/{pid}/environ").read_bytes()
            stat = Path(f"/proc/{pid}/stat").read_bytes()
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")
        except OSError:
            continue
        if f"{TAG_ENV}={tag}".encode() in environ.split(b"\0"):
            if stat[stat.rindex(b")") + 2 :].split()[0] != b"Z":
                found.append(f"{pid} {cmdline.decode(errors='replace')[:120]}")
    return found


def _workers(pid: int) -> list[int]:
    """Beam SDK worker processes below `pid`."""
    found = []
    for child in interrupts.descendants(pid):
        try:
            if b"sdk_worker_main" in Path(f"/proc/{child}/cmdline").read_bytes():
                found.append(child)
        except OSError:
            continue
    return found


def _output_dirs(root: Path, component: str) -> set[Path]:
    """<root>/<component>/<output key>/<execution id> directories there are now."""
    return {p for p in root.glob(f"{component}/*/*") if p.parent.name != ".system"}


def _kill_tree(pid: int, hung: threading.Event) -> None:
    """SIGKILL to `pid` and every process below it (the watchdog of a hung run), `hung` set."""
    hung.set()
    for target in [*interrupts.descendants(pid), pid]:
        try:
            os.kill(target, signal.SIGKILL)
        except ProcessLookupError:
            continue


def _wait(condition: Callable[[], bool], proc: subprocess.Popen, timeout_s: float = 120) -> None:
    deadline = time.time() + timeout_s
    while not condition() and time.time() < deadline and proc.poll() is None:
        time.sleep(0.05)


def _run(outputs: Path, tag: str, target: str | None, signum: int | None) -> Link:
    """One `rankpipe run demo`; with a target, `signum` is sent when it is running: a quick
    component as its line appears, a LONG one once its executor has made its output dirs, the
    Trainer at its first progress line, WITH_WORKERS once Beam's workers run."""
    env = dict(os.environ, RANKPIPE_OUTPUTS=str(outputs), **{TAG_ENV: tag})
    if target == WITH_WORKERS:
        env["RANKPIPE_IN_PROCESS_BELOW_MB"] = "0"  # Beam's multi_processing workers
    root = outputs / "pipelines" / PIPELINE
    before = _executions(root) if (root / "metadata.sqlite").exists() else []
    finished_before = {e.node for e in before if e.state in DONE_STATES}
    dirs_before = _output_dirs(root, target) if target else set()
    argv = [sys.executable, "-m", "pipelines.cli", "run", "demo"]
    for setting in SETTINGS:
        argv += ["--set", setting]
    stderr_path = outputs / f"stderr-{target}.txt"
    with stderr_path.open("w") as stderr:
        proc = subprocess.Popen(
            argv, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=stderr, text=True
        )
        lines, sent_at, workers = [], None, []
        hung = threading.Event()
        watchdog = threading.Timer(RUN_DEADLINE_S, _kill_tree, [proc.pid, hung])
        watchdog.start()
        ready = (
            re.compile(r"^ +Trainer step \d+/")
            if target == "Trainer"
            else re.compile(rf"^ *\[\d+/\d+\] {target} +running$")
        )
        for line in proc.stdout:
            lines.append(line)
            if target is None or sent_at is not None or not ready.match(line):
                continue
            if target == WITH_WORKERS:

                def workers_run() -> bool:
                    workers[:] = _workers(proc.pid)
                    return bool(workers)

                _wait(workers_run, proc)
            elif target in LONG:
                _wait(lambda: bool(_output_dirs(root, target) - dirs_before), proc)
            os.kill(proc.pid, signum)
            sent_at = time.time()
        returncode = proc.wait(timeout=RUN_DEADLINE_S + 60)
        watchdog.cancel()
    if hung.is_set():
        pytest.fail(
            f"rankpipe run demo (signal {signum} to {target}) was still running after "
            f"{RUN_DEADLINE_S} s and was killed; its last lines:\n{''.join(lines[-20:])}"
            f"\nits stderr: {stderr_path}"
        )
    stop_s = time.time() - sent_at if sent_at else 0.0
    output, stderr_text = "".join(lines), stderr_path.read_text()
    link = Link(target, signum, finished_before, returncode, output, stderr_text, stop_s)
    link.workers_seen = workers
    if not (root / "metadata.sqlite").exists():
        return link
    link.executions = _executions(root)
    link.leftovers = _leftovers(root, link.executions)
    link.stateful_dirs = [str(p) for p in root.glob("*/.system/stateful_working_dir/*")]
    link.missing_outputs = _missing_outputs(root, link.executions)
    table = subprocess.run(
        [sys.executable, "-m", "pipelines.cli", "runs", PIPELINE],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    link.runs_table = table.stdout + table.stderr
    deadline = time.time() + 5
    link.survivors = _tagged_processes(tag)
    while link.survivors and time.time() < deadline:
        time.sleep(0.2)
        link.survivors = _tagged_processes(tag)
    return link


@dataclass
class Chain:
    links: dict[str, Link]  # by target
    final: Link
    started: float = 0.0


@pytest.fixture(scope="module")
def chain(tmp_path_factory: pytest.TempPathFactory) -> Chain:
    outputs = tmp_path_factory.mktemp("interrupts") / "outputs"
    outputs.mkdir()
    tag = uuid.uuid4().hex
    links = {}
    for target in ORDER:
        done = {e.node for link in links.values() for e in link.run if e.state in DONE_STATES}
        if target in done:
            continue  # a signal aimed earlier landed after it: it finished (test skips it)
        links[target] = _run(outputs, tag, target, SIGNALS.get(target, signal.SIGINT))
    return Chain(links, _run(outputs, tag, None, None))


def _interrupted_in(link: Link) -> str:
    head = link.stderr.splitlines()[0] if link.stderr else ""
    found = re.match(r"rankpipe: interrupted by SIG(?:INT|TERM) in (\w+)", head)
    assert found, link.stderr
    return found.group(1)


@pytest.mark.e2e
@pytest.mark.parametrize("component", ORDER)
def test_a_signal_stops_the_run_and_leaves_nothing_half_done(chain: Chain, component: str) -> None:
    link = chain.links.get(component)
    if link is None:
        pytest.skip(f"{component} finished before an earlier run's signal landed")
    signum = SIGNALS.get(component, signal.SIGINT)
    # Stopped promptly, with the shell's exit code for the signal, and no success reported.
    assert link.returncode == 128 + signum, (link.returncode, link.stdout, link.stderr)
    assert link.stop_s < 30, link.stop_s
    assert "finished." not in link.stdout and "Total time" not in link.stdout, link.stdout
    assert "Traceback" not in link.stderr and "Exception ignored" not in link.stderr
    stopped = _interrupted_in(link)
    assert stopped in ORDER[ORDER.index(component) :], stopped
    if component in LONG:
        assert stopped == component
    # MLMD says exactly where: the cancelled execution, or none when the component had
    # finished (or not yet registered one) when the signal came; nothing left RUNNING.
    run = link.run
    assert not [e for e in link.executions if e.state in (State.NEW, State.RUNNING)]
    cancelled = [e.node for e in run if e.state == State.CANCELED]
    assert cancelled in ([stopped], []), cancelled
    if not cancelled:
        assert all(e.state in DONE_STATES for e in run if e.node == stopped), run
    if cancelled:
        assert link.console_status(stopped) == "interrupted", link.stdout
    # Nothing of the unfinished execution is left; nothing finished was removed.
    assert link.leftovers == [], link.leftovers
    assert link.stateful_dirs == [], link.stateful_dirs
    assert link.missing_outputs == [], link.missing_outputs
    # The run resumed: what earlier runs finished came from the cache, the rest ran again.
    for before in ORDER[: ORDER.index(component)]:
        status = link.console_status(before)
        expected = "cached" if before in link.finished_before else "done"
        assert status == expected, (before, status, link.stdout)
    newest = link.runs_table.splitlines()[2]
    assert f"interrupted in {stopped}" in newest, link.runs_table
    # No process of the run outlived it (Beam's workers included).
    assert link.survivors == [], link.survivors
    if component == WITH_WORKERS:
        assert link.workers_seen, "Beam's multi_processing workers never started"


@pytest.mark.e2e
def test_the_run_after_the_interrupts_completes_from_the_cache(chain: Chain) -> None:
    final = chain.final
    assert final.returncode == 0, (final.stdout, final.stderr)
    assert "finished." in final.stdout
    statuses = {c: final.console_status(c) for c in ORDER}
    assert list(statuses) == re.findall(r"^ *\[\d+/\d+\] (\w+) +running$", final.stdout, re.M)
    assert final.finished_before, "no interrupted run finished a component"
    for component, status in statuses.items():
        expected = "cached" if component in final.finished_before else "done"
        assert status == expected, (component, final.stdout)
    assert not [e for e in final.executions if e.state in (State.NEW, State.RUNNING)]
    rows = final.runs_table.splitlines()[2:]
    assert len(rows) == len(chain.links) + 1
    assert "interrupted" not in rows[0] and "blessed" in rows[0], final.runs_table
    assert all("interrupted in " in row for row in rows[1:]), final.runs_table
    assert final.survivors == []


def test_runs_tells_interrupted_killed_and_running_apart(tmp_path: Path) -> None:
    """`rankpipe runs` verdicts from a real SQLite MLMD store: the interrupt marker, a
    CANCELED execution, a RUNNING one of a dead process and of a live one."""
    root = tmp_path / "pipelines" / "p"
    (root / "logs").mkdir(parents=True)
    config = metadata_store_pb2.ConnectionConfig()
    config.sqlite.filename_uri = str(root / "metadata.sqlite")
    store = metadata_store.MetadataStore(config)
    run_type = store.put_context_type(metadata_store_pb2.ContextType(name="pipeline_run"))
    trainer = store.put_execution_type(metadata_store_pb2.ExecutionType(name="x.Trainer"))
    stats = store.put_execution_type(metadata_store_pb2.ExecutionType(name="x.StatisticsGen"))

    def add_run(name: str, type_id: int, state: int, marker: str | None = None) -> None:
        context = metadata_store_pb2.Context(type_id=run_type, name=name)
        if marker:
            context.custom_properties[interrupts.INTERRUPTED_PROPERTY].string_value = marker
        (context_id,) = store.put_contexts([context])
        (execution_id,) = store.put_executions(
            [metadata_store_pb2.Execution(type_id=type_id, last_known_state=state)]
        )
        store.put_attributions_and_associations(
            [], [metadata_store_pb2.Association(context_id=context_id, execution_id=execution_id)]
        )
        time.sleep(0.01)  # distinct create times: newest first

    add_run("marked", stats, State.COMPLETE, marker="StatisticsGen")
    add_run("cancelled", trainer, State.CANCELED)
    add_run("killed", stats, State.RUNNING)
    add_run("live", trainer, State.RUNNING)

    def verdicts() -> dict[str, str]:
        rows = runs.list_runs(runs.open_store(str(root / "metadata.sqlite")), str(root))
        return {row.run_id: row.cells()[4] for row in rows}

    expected = {
        "marked": "interrupted in StatisticsGen",
        "cancelled": "interrupted in Trainer",
        "killed": "interrupted in StatisticsGen",
        "live": "interrupted in Trainer",  # no live process: killed too
    }
    assert verdicts() == expected
    # This process holding a log file of the pipeline open is a live `rankpipe run`: the
    # newest unfinished run is running; the older one was still killed.
    with (root / "logs" / f"run-20260101-000000-{os.getpid()}.log").open("w"):
        assert verdicts() == {**expected, "live": "running Trainer"}
