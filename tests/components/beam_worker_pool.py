"""A Beam worker pool started apart from the launcher, for the EXTERNAL-environment tests.

What a Flink task manager's or Spark executor's sidecar runs (docs/datagen.md, "Distributed
runners"): `python -m apache_beam.runners.worker.worker_pool_main --service_port=PORT`. A job
submitted with `--runner=PortableRunner --job_endpoint=embed --environment_type=EXTERNAL
--environment_config=localhost:PORT` asks the pool for an SDK worker; the pool starts it as a
process of its own (`python -c ... SdkHarness(...)`), which fetches its work from the job over
the Fn API. So the workers are not this process, nor its children, and they see:

- an environment of their own, as a worker container has: PATH (this interpreter's bin first,
  as the image's), PYTHONPATH (the checkout: the image has the package installed), and HOME,
  TMPDIR and the working directory in `scratch`, a directory the launcher does not use;
- where mount namespaces work here (util-linux `unshare`, as root or in a user namespace; as
  tests/kfp_local/pods.py uses them), the `hidden` directories covered by an empty tmpfs: the
  launcher's own temp dir and working directory and the executors' temp dirs exist for the
  launcher only, as a Kubeflow pod's disk does. The workers then reach the job's files only
  through the paths the job gives them under the shared directories. Without mount namespaces
  the pool still runs apart (env, cwd, scratch), and `isolated` is False.

`worker_pool` always stops the pool and every worker it started (one process group, SIGTERM then
SIGKILL), also when the test fails; a pool that dies or never listens raises WorkerPoolError with
its exit status and the end of its log.
"""

from __future__ import annotations

import contextlib
import functools
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import psutil

REPO_ROOT = Path(__file__).resolve().parents[2]
POOL_MODULE = "apache_beam.runners.worker.worker_pool_main"

# `unshare` (util-linux): a private mount namespace in which each directory before "--" is
# covered by an empty tmpfs, then the command.
_HIDE_AND_EXEC = [
    "unshare",
    "--mount",
    "--propagation",
    "private",
    *([] if os.geteuid() == 0 else ["--map-root-user"]),
    "sh",
    "-c",
    'while [ "$1" != "--" ]; do mount -t tmpfs -o size=1m rankpipe-hidden "$1" || exit 125; '
    'shift; done; shift; exec "$@"',
    "rankpipe-worker-pool",
]


class WorkerPoolError(RuntimeError):
    """The worker pool did not start, or died: its exit status and the end of its log."""


@functools.cache
def mount_namespaces_work() -> bool:
    """Whether `unshare` can hide a directory from a process here (see _HIDE_AND_EXEC)."""
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "probe").write_text("")
        try:
            proc = subprocess.run(
                [*_HIDE_AND_EXEC, tmp, "--", "sh", "-c", f'test ! -e "{tmp}/probe"'],
                capture_output=True,
                timeout=30,
            )
        except (OSError, subprocess.TimeoutExpired):
            return False
        return proc.returncode == 0


def free_port() -> int:
    """A TCP port nothing listens on now (the pool binds it a moment later)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("", 0))
        return s.getsockname()[1]


def worker_env(scratch: Path) -> dict[str, str]:
    """The pool's and its workers' whole environment (nothing of the launcher's)."""
    return {
        "PATH": os.pathsep.join(
            [os.path.dirname(sys.executable), "/usr/local/bin", "/usr/bin", "/bin"]
        ),
        "PYTHONPATH": str(REPO_ROOT),
        "HOME": str(scratch / "home"),
        "TMPDIR": str(scratch / "tmp"),
        "LANG": "C.UTF-8",
    }


@dataclass
class WorkerPool:
    """A running pool: its address for --environment_config, its log, its process."""

    port: int
    process: subprocess.Popen
    log_path: Path
    scratch: Path
    isolated: bool  # the `hidden` directories are really hidden from the workers

    @property
    def beam_args(self) -> list[str]:
        """The Beam args of a job whose SDK workers this pool starts."""
        return [
            "--runner=PortableRunner",
            "--job_endpoint=embed",
            "--environment_type=EXTERNAL",
            f"--environment_config=localhost:{self.port}",
        ]

    def log_tail(self, chars: int = 4000) -> str:
        text = self.log_path.read_text(errors="replace") if self.log_path.exists() else ""
        return text[-chars:]

    def check_alive(self) -> None:
        """Raises WorkerPoolError when the pool process has ended."""
        code = self.process.poll()
        if code is not None:
            raise WorkerPoolError(
                f"the Beam worker pool (localhost:{self.port}) exited with status {code}; "
                f"its log ({self.log_path}) ends:\n{self.log_tail()}"
            )

    def processes(self) -> list[psutil.Process]:
        """The pool process and every process it started (its SDK workers) still running."""
        try:
            pool = psutil.Process(self.process.pid)
            return [pool, *pool.children(recursive=True)]
        except psutil.NoSuchProcess:
            return []

    def stop(self, timeout: float = 15) -> None:
        """Ends the pool and its workers (their process group): SIGTERM, then SIGKILL."""
        members = self.processes()
        for sig in (signal.SIGTERM, signal.SIGKILL):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, sig)
            _, alive = psutil.wait_procs(members, timeout=timeout)
            if not alive:
                break
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=timeout)


def _listening(pid: int, port: int) -> bool:
    try:
        connections = psutil.Process(pid).net_connections(kind="tcp")
    except psutil.NoSuchProcess:
        return False
    except psutil.AccessDenied:  # a user namespace may keep its sockets from us: try the port
        with contextlib.suppress(OSError), socket.create_connection(("localhost", port), 1):
            return True
        return False
    return any(c.status == psutil.CONN_LISTEN and c.laddr.port == port for c in connections)


@contextlib.contextmanager
def worker_pool(
    scratch: Path, hidden: Sequence[Path] = (), start_timeout: float = 180
) -> Iterator[WorkerPool]:
    """Starts a worker pool (see the module docstring) and yields it once it listens; stops it
    and its workers on the way out, whatever happened."""
    for sub in ("home", "tmp"):
        (scratch / sub).mkdir(parents=True, exist_ok=True)
    port = free_port()
    argv = [sys.executable, "-m", POOL_MODULE, f"--service_port={port}"]
    isolated = bool(hidden) and mount_namespaces_work()
    if isolated:
        for path in hidden:
            Path(path).mkdir(parents=True, exist_ok=True)
        argv = [*_HIDE_AND_EXEC, *map(str, hidden), "--", *argv]
    log_path = scratch / "worker-pool.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=worker_env(scratch),
            cwd=scratch,
            start_new_session=True,  # its own process group: stop() ends the workers too
        )
    pool = WorkerPool(port, process, log_path, scratch, isolated)
    try:
        deadline = time.monotonic() + start_timeout
        while not _listening(process.pid, port):
            pool.check_alive()
            if time.monotonic() > deadline:
                raise WorkerPoolError(
                    f"the Beam worker pool did not listen on localhost:{port} within "
                    f"{start_timeout:.0f} s; its log ends:\n{pool.log_tail()}"
                )
            time.sleep(0.2)
        yield pool
    finally:
        pool.stop()
