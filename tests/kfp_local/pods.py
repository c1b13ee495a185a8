"""Where the local KFP backend runs a task's container: the Pod protocol, and HostPod, a
directory of this machine (see __init__.py; tests/image/buildah_pods.py has the image's pods)."""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import IO, Protocol

from pipelines import kfp_entrypoint


class Pod(Protocol):
    """One task's container: a fresh file system that the backend (the launcher's side) reads
    and writes at `root`, and in which `run` executes the command."""

    # Where this process sees the pod's "/".
    root: Path
    # Where the command sees the pod's "/": "/" in a real container; for host pods a path of
    # this machine, the same for every task (as /minio/<key> is the same string in every pod:
    # an evaluation that names the model's local path still names it in the Pusher's pod).
    seen_root: Path
    # True: the command sees this machine's file system, so the launcher's local paths it is
    # given are rebased under `root` and `python` is this interpreter (HostPods). False: the
    # command sees `root` as "/" and gets the spec's command and paths unchanged.
    rebased: bool

    def run(
        self, argv: list[str], env: dict[str, str], log: IO[bytes], timeout: float | None
    ) -> int:
        """Runs argv with the container spec's `env` added to the pod's own environment, stdout
        and stderr to `log`; returns the exit status (subprocess.TimeoutExpired past timeout)."""
        ...

    def remove(self) -> None:
        """Called once the launcher has uploaded the task's outputs."""
        ...


PodFactory = Callable[[str], Pod]  # task name -> a fresh pod for it


class HostPod:
    """A directory of this machine standing for the pod's file system; the command runs as a
    subprocess of this machine with `env` and `cwd` (the default pods, see the docstring).

    With `seen_root` elsewhere than `root`, the command runs in a mount namespace of its own
    (util-linux `unshare`) where `root` is bind-mounted at `seen_root`: every task sees its
    files at the same path, yet tasks running at once each have their own file system.
    """

    rebased = True

    def __init__(self, root: Path, env: dict[str, str], cwd: str, seen_root: Path | None = None):
        shutil.rmtree(root, ignore_errors=True)
        root.mkdir(parents=True)
        self.root, self.env, self.cwd = root, env, cwd
        self.seen_root = seen_root or root
        if self.seen_root != self.root:
            self.seen_root.mkdir(parents=True, exist_ok=True)

    def run(
        self, argv: list[str], env: dict[str, str], log: IO[bytes], timeout: float | None
    ) -> int:
        # The pod sees "/" at `seen_root`; pipelines.kfp_entrypoint reads this.
        full_env = dict(self.env, **{kfp_entrypoint.LOCAL_ROOT_ENV: str(self.seen_root)}, **env)
        if self.seen_root != self.root:
            argv = [*_BIND_AND_EXEC, str(self.root), str(self.seen_root), *argv]
        return subprocess.run(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=full_env,
            cwd=self.cwd,
            timeout=timeout,
            check=False,
        ).returncode

    def remove(self) -> None:
        """Kept, as the task left it, for inspection (replaced when the task runs again)."""


# `unshare` (util-linux): a private mount namespace (as root, or a user namespace where
# unprivileged ones are allowed) in which $1 is bind-mounted on $2, then the command.
_BIND_AND_EXEC = [
    "unshare",
    "--mount",
    "--propagation",
    "private",
    *([] if os.geteuid() == 0 else ["--map-root-user"]),
    "sh",
    "-c",
    'mount --bind "$1" "$2" || exit 125; shift 2; exec "$@"',
    "rankpipe-pod",
]


@functools.cache
def mount_namespaces_work() -> bool:
    """Whether HostPods can give parallel tasks one path each (see HostPod)."""
    with tempfile.TemporaryDirectory() as tmp:
        a, b = Path(tmp, "a"), Path(tmp, "b")
        a.mkdir()
        b.mkdir()
        (a / "probe").write_text("")
        try:
            proc = subprocess.run(
                [*_BIND_AND_EXEC, str(a), str(b), "test", "-e", str(b / "probe")],
                capture_output=True,
                timeout=30,
            )
        except (OSError, subprocess.TimeoutExpired):
            return False
        return proc.returncode == 0
