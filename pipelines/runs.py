"""`rankpipe runs [PIPELINE]`: the past runs of a pipeline, read from its SQLite MLMD store.

One row per TFX pipeline run (MLMD context of type `pipeline_run`), newest first: when it
started, the collection (RankingDataGen's `collection` property), the model (the Trainer's
custom_config), the main metric of the candidate vs the first stage, the verdict, the pushed
version and the disk the run's own executions wrote (their output artifacts, as they are now;
not what it reused from the cache). A cached component's execution is recorded in the new run
too (state CACHED, with the reused artifacts as outputs), so a fully cached re-run shows the
figures it reused.

A run stopped by Ctrl-C or SIGTERM shows "interrupted in <component>": `rankpipe run` marks its
pipeline_run context and cancels the unfinished execution (pipelines/interrupts.py). A run
killed without that clean-up (SIGKILL, a crash, the machine going down) left its execution
RUNNING: it shows the same, unless a `rankpipe run` process still has this pipeline's log file
open, then the newest such run shows "running <component>".
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from stat import S_ISLNK

from ml_metadata import metadata_store
from ml_metadata.proto import metadata_store_pb2

from components.ranking_evaluator.constants import BLESSED, MAIN_METRIC
from pipelines.interrupts import INTERRUPTED_PROPERTY
from pipelines.mlmd_read import open_readonly, output_artifacts, prop

FAILED_STATES = (metadata_store_pb2.Execution.FAILED,)
UNFINISHED_STATES = (metadata_store_pb2.Execution.NEW, metadata_store_pb2.Execution.RUNNING)
# pipelines/console/capture.py log_path_for: <pipeline root>/logs/run-<UTC time>-<pid>.log
_LOG_NAME = re.compile(r"run-\d{8}-\d{6}-(\d+)\.log")


@dataclass
class RunRow:
    run_id: str
    started_ms: int
    collection: str = "-"
    model: str = "-"
    main_metric: str | None = None
    candidate: float | None = None
    first_stage: float | None = None
    blessed: bool | None = None
    pushed_version: str | None = None
    failed: str | None = None  # the failed component's type, if one failed
    cached: int = 0  # components reused from the cache
    interrupted: str | None = None  # where Ctrl-C/SIGTERM stopped it (or it was killed)
    running: bool = False  # `interrupted` is still running (a live `rankpipe run`)
    written_bytes: int | None = None  # its executions' outputs on disk (None: not local)

    def cells(self) -> list[str]:
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(self.started_ms / 1000))
        if self.main_metric and self.candidate is not None and self.first_stage is not None:
            delta = self.candidate - self.first_stage
            metric = (
                f"{self.main_metric} {self.candidate:.4f} vs {self.first_stage:.4f} ({delta:+.4f})"
            )
        else:
            metric = "-"
        if self.interrupted and self.running:
            verdict = f"running {self.interrupted}"
        elif self.interrupted:
            verdict = f"interrupted in {self.interrupted}"
        elif self.failed:
            verdict = f"FAILED in {self.failed}"
        elif self.blessed is None:
            verdict = "-"
        else:
            verdict = "blessed" if self.blessed else "not blessed"
        written = "-" if self.written_bytes is None else human_size(self.written_bytes)
        return [
            when,
            self.collection,
            self.model,
            metric,
            verdict,
            self.pushed_version or "-",
            written,
        ]


HEADER = ["when", "collection", "model", "main metric vs first stage", "verdict", "pushed", "wrote"]


def human_size(n: int) -> str:
    """Bytes as du -h would say them, in powers of 1024 (12 KB, 3.4 GB)."""
    if n < 1024:
        return f"{n} B"
    size, unit = n / 1024, "KB"
    for bigger in ("MB", "GB"):
        if size < 1024:
            break
        size, unit = size / 1024, bigger
    return f"{size:.1f} {unit}"


def _file_sizes(
    directory: str, files: list[str], seen: set[tuple[int, int]]
) -> Iterator[tuple[str, int]]:
    """(path, bytes) of the files of one walked directory; symbolic links are not counted, and
    a file hard-linked from another place of the walk (`seen`: its (device, inode) pairs so far;
    the Pusher's archive copy links the Trainer's files) counts once, as du counts it."""
    for name in files:
        path = os.path.join(directory, name)
        stat = os.lstat(path)
        if S_ISLNK(stat.st_mode):
            continue
        if stat.st_nlink > 1:
            if (stat.st_dev, stat.st_ino) in seen:
                continue
            seen.add((stat.st_dev, stat.st_ino))
        yield path, stat.st_size


def tree_sizes(root: str) -> dict[str, int]:
    """Bytes under each directory and file below `root` (root included), by normalised path,
    from one walk (du's answer for every path at once)."""
    sizes: dict[str, int] = {}
    seen: set[tuple[int, int]] = set()
    for directory, subdirs, files in os.walk(root, topdown=False):
        own = dict(_file_sizes(directory, files, seen))
        sizes.update(own)
        subtotal = sum(sizes.get(os.path.join(directory, d), 0) for d in subdirs)
        sizes[directory] = sum(own.values()) + subtotal
    return {os.path.normpath(path): size for path, size in sizes.items()}


def tree_bytes(uri: str, sizes: dict[str, int] | None = None) -> int | None:
    """Bytes under a local file or directory (0 when it is gone), looked up in `sizes`
    (tree_sizes of a directory above it) when given; None for a remote URI (gs://...: listing a
    bucket to size it is not worth a table row)."""
    if "://" in uri:
        return None
    path = os.path.normpath(uri)
    if sizes is not None and path in sizes:
        return sizes[path]
    if os.path.isfile(path):
        return os.path.getsize(path)
    # One total: no per-path table (tree_sizes) to build for it.
    seen: set[tuple[int, int]] = set()
    return sum(size for d, _, files in os.walk(path) for _, size in _file_sizes(d, files, seen))


def open_store(path: str) -> metadata_store.MetadataStore:
    if not os.path.exists(path):
        raise FileNotFoundError(f"{path}: no MLMD store (has this pipeline run here?)")
    return open_readonly(path)


def _json_prop(execution, name: str) -> dict:
    try:
        return json.loads(prop(execution, name) or "{}")
    except ValueError:
        return {}


def _model_label(custom_config: dict) -> str:
    trainer = custom_config.get("trainer") or {}
    if not trainer:
        return "-"
    return f"{trainer.get('model', '?')}, {trainer.get('train_steps', '?')} steps"


def list_runs(
    store: metadata_store.MetadataStore,
    pipeline_root: str | None = None,
    sizes: dict[str, int] | None = None,
) -> list[RunRow]:
    """Every pipeline run in the store, newest first. With `pipeline_root` (where its logs/
    are) the newest unfinished run shows as running while a `rankpipe run` is live there.
    `sizes`: tree_sizes of the pipeline root, so artifacts are not walked again."""
    contexts = store.get_contexts_by_type("pipeline_run")
    rows = []
    for ctx in contexts:
        row = RunRow(run_id=ctx.name, started_ms=ctx.create_time_since_epoch)
        marked = prop(ctx, INTERRUPTED_PROPERTY)  # pipelines/interrupts.py
        unfinished = None
        executions = store.get_executions_by_context(ctx.id)
        type_names = {
            t.id: t.name for t in store.get_execution_types_by_id({e.type_id for e in executions})
        }
        for execution in executions:
            type_name = type_names.get(execution.type_id, "")
            short = type_name.rsplit(".", 1)[-1]
            if execution.last_known_state in FAILED_STATES:
                row.failed = short
            elif execution.last_known_state == metadata_store_pb2.Execution.CANCELED:
                marked = marked or short
            elif execution.last_known_state in UNFINISHED_STATES:
                unfinished = short
            if execution.last_known_state == metadata_store_pb2.Execution.CACHED:
                row.cached += 1
            if short == "RankingDataGen":
                row.collection = _json_prop(execution, "collection").get("name", "-")
            elif short.endswith("Trainer"):  # TFX's, RankingTrainer, the replica Trainers
                row.model = _model_label(_json_prop(execution, "custom_config"))
        artifacts, art_types = output_artifacts(store, [e.id for e in executions])
        row.written_bytes = _written_bytes(store, executions, sizes)
        for artifact in artifacts:
            kind = art_types.get(artifact.type_id)
            if kind == "ModelEvaluation" and prop(artifact, MAIN_METRIC):
                main = prop(artifact, MAIN_METRIC)
                row.main_metric = main
                row.candidate = prop(artifact, f"candidate_{main}")
                row.first_stage = prop(artifact, f"first_stage_{main}")
                row.blessed = prop(artifact, BLESSED) == 1
            elif kind == "PushedModel" and prop(artifact, "pushed") == 1:
                row.pushed_version = str(prop(artifact, "pushed_version"))
        row.interrupted = marked or unfinished
        row.running = not marked and unfinished is not None
        rows.append(row)
    rows.sort(key=lambda r: r.started_ms, reverse=True)
    live = pipeline_root is not None and bool(live_run_pids(pipeline_root))
    newest_running = True
    for row in rows:  # one live process: at most the newest unfinished run is still running
        if row.running:
            row.running = live and newest_running
            newest_running = False
    return rows


def _written_bytes(
    store: metadata_store.MetadataStore, executions: list, sizes: dict[str, int] | None
) -> int | None:
    """Disk of the output artifacts of the run's executions that ran (not CACHED: a cached
    execution's outputs belong to the run that wrote them), from `sizes` where it has them."""
    ran = [e.id for e in executions if e.last_known_state != metadata_store_pb2.Execution.CACHED]
    if not ran:
        return 0
    written = [tree_bytes(a.uri, sizes) for a in output_artifacts(store, ran)[0] if a.uri]
    return None if any(size is None for size in written) else sum(written)  # type: ignore[misc]


def live_run_pids(pipeline_root: str) -> list[int]:
    """The processes that have one of this pipeline's log files open: `rankpipe run`s going on
    now (Linux /proc; none elsewhere). A run killed without clean-up leaves its execution
    RUNNING in MLMD, exactly as a live one: this tells them apart."""
    logs = os.path.join(pipeline_root, "logs")
    try:
        names = os.listdir(logs)
    except OSError:
        return []
    live = []
    for name in names:
        match = _LOG_NAME.fullmatch(name)
        if match is None:
            continue
        pid, path = int(match.group(1)), os.path.realpath(os.path.join(logs, name))
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue  # gone (or not ours to see)
        for fd in fds:
            try:
                if os.readlink(f"/proc/{pid}/fd/{fd}") == path:
                    live.append(pid)
                    break
            except OSError:
                continue
    return live


def format_table(rows: list[RunRow]) -> str:
    table = [HEADER] + [r.cells() for r in rows]
    widths = [max(len(line[i]) for line in table) for i in range(len(HEADER))]
    return "\n".join(
        "  ".join(cell.ljust(w) for cell, w in zip(line, widths)).rstrip() for line in table
    )


def pipelines_under(outputs_dir: str) -> list[str]:
    """Names of the pipelines with an MLMD store under <outputs>/pipelines/."""
    base = os.path.join(outputs_dir, "pipelines")
    if not os.path.isdir(base):
        return []
    return sorted(
        name
        for name in os.listdir(base)
        if os.path.exists(os.path.join(base, name, "metadata.sqlite"))
    )
