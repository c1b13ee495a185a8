"""What a run of the local KFP backend returns, and its error (see __init__.py)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

DEFAULT_PIPELINE_ROOT = "minio://mlpipeline/v2/artifacts"  # backend/src/v2/config/env.go
REPO_ROOT = Path(__file__).resolve().parents[2]
LOGS_KEY = "executor-logs"


class BackendError(RuntimeError):
    """The backend refused the spec or a task failed; the message is the backend's own."""


@dataclasses.dataclass
class Artifact:
    """An artifact as recorded in MLMD: id, output key, type name (the schema title), URI and
    custom properties (the launcher stores ExecutorOutput metadata as custom properties)."""

    id: int
    key: str
    type_name: str
    uri: str
    custom_properties: dict[str, Any]


@dataclasses.dataclass
class TaskResult:
    name: str
    seconds: float
    returncode: int | None  # None for importer tasks (no container)
    executor_input: dict[str, Any]
    executor_output: dict[str, Any]
    outputs: dict[str, Artifact]
    log: str  # the executor's stdout and stderr
    # Launcher phases, seconds: input download, the command's process, output upload.
    phases: dict[str, float] = dataclasses.field(default_factory=dict)
    # The driver's cache fingerprint ("" when the task's caching is off) and whether the task
    # was served from the cache (driver/container.go: no launcher, the cached execution's
    # outputs reused as they are, same MLMD artifacts).
    fingerprint: str = ""
    cached: bool = False
    started: float = 0.0  # time.time() when the driver began (tasks run in parallel)
    attempts: int = 1  # pods launched (more than 1 when its retryPolicy retried it)
    retry_waits: list[float] = dataclasses.field(default_factory=list)  # backoff before each


@dataclasses.dataclass
class RunResult:
    run_id: str
    pipeline_root: str
    tasks: dict[str, TaskResult]
    seconds: float
