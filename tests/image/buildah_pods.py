"""Pods that are containers of the built image, for tests/kfp_local/ (the local KFP
backend, a test tool).

`BuildahPods(image)` is a PodFactory: every task of a LocalKfpBackend run gets a fresh container
of the image (`buildah from`: its own copy of the image's file system, like a pod), which the
backend reaches at `buildah mount`'s path, the launcher's side: it downloads the task's inputs
to /minio/... there before the command and uploads the outputs from there afterwards. The
command is the spec's own command and arguments, run by `buildah run --isolation chroot` as the
image's user (numeric, 1000:1000), in its working directory, with its environment plus the
container spec's env: no host interpreter, no checkout, no path rebasing. What the launcher
created in the pod (the /gcs, /minio, /s3 trees and /tmp/kfp) is handed to that user first, as
the launcher, which runs in the pod as the same user, would have created it.

Why a container per task rather than one per run with its directories reset: a fresh container
is what a pod is (nothing a task writes outside the launcher's paths, e.g. in $HOME or /tmp,
can leak into the next), and on vfs storage `buildah from` of the 3.7 GB image cost 6-47 s per
task (median 18 s; 2 busy cores, 2026-11-24; tests/image/test_image_pipeline.py prints it)
against 47-150 s for the tasks themselves: about a fifth of the run, cheap enough for the
fidelity. (The pod's `root` is the host path of `buildah mount`.)

`volumes` bind-mounts host directories (as a PersistentVolumeClaim mount would, e.g. the push
destination every pod shares) and `files` copies host files into each pod's file system (as a
derived image's COPY would, e.g. a collection under /rankpipe/data).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
import uuid
from pathlib import Path
from typing import IO

BUILDAH = ["buildah", "--storage-driver", "vfs"]
# The launcher's local paths for object-store URIs, and its output parameter files.
LAUNCHER_DIRS = ("gcs", "minio", "s3", "tmp/kfp")


class BuildahError(RuntimeError):
    """buildah failed; the message holds its command and stderr."""


def buildah(*args: str, timeout: float | None = 600) -> str:
    """Runs `buildah --storage-driver vfs ARGS`; returns its stdout."""
    argv = [*BUILDAH, *args]
    if shutil.which(argv[0]) is None:
        raise BuildahError("buildah not found: run `make image` (it installs buildah) first")
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
    if proc.returncode != 0:
        raise BuildahError(f"{' '.join(argv)}: exit {proc.returncode}: {proc.stderr.strip()}")
    return proc.stdout


def image_config(image: str) -> dict:
    """The image's OCI config (`config` of buildah inspect: User, Env, WorkingDir, ...)."""
    return json.loads(buildah("inspect", "--type", "image", image))["OCIv1"]["config"]


def _owner(user: str) -> tuple[int, int]:
    uid, _, gid = user.partition(":")
    if not uid.isdigit() or (gid and not gid.isdigit()):
        raise BuildahError(f"image user {user!r}: expected numeric uid[:gid]")
    return int(uid), int(gid or uid)


class BuildahPod:
    """One task's container (the Pod protocol of tests/kfp_local/pods.py)."""

    rebased = False
    seen_root = Path("/")

    def __init__(
        self,
        image: str,
        name: str,
        user: str,
        volumes: dict[str, str],
        files: dict[str, str],
    ):
        self.name, self.user, self.volumes = name, user, volumes
        self.uid, self.gid = _owner(user)
        t0 = time.perf_counter()
        buildah("from", "--pull-never", "--name", name, image)
        self.from_seconds = time.perf_counter() - t0
        try:
            self.root = Path(buildah("mount", name).strip())
            for source, target in files.items():
                dest = self.root / target.lstrip("/")
                dest.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(source, dest)
        except BaseException:
            self.remove()
            raise

    def _give_launcher_dirs_to_user(self) -> None:
        for directory in LAUNCHER_DIRS:
            top = self.root / directory
            if not top.exists():
                continue
            for parent, dirs, names in os.walk(top):
                for entry in [parent, *(os.path.join(parent, n) for n in dirs + names)]:
                    os.lchown(entry, self.uid, self.gid)

    def run(
        self, argv: list[str], env: dict[str, str], log: IO[bytes], timeout: float | None
    ) -> int:
        self._give_launcher_dirs_to_user()
        command = [*BUILDAH, "run", "--isolation", "chroot", "--user", self.user]
        for key, value in env.items():
            command += ["--env", f"{key}={value}"]
        for source, target in self.volumes.items():
            command += ["--volume", f"{source}:{target}:rw"]
        proc = subprocess.run(
            [*command, self.name, "--", *argv],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            timeout=timeout,
            check=False,
        )
        return proc.returncode

    def remove(self) -> None:
        subprocess.run([*BUILDAH, "rm", self.name], capture_output=True, check=False)


class BuildahPods:
    """PodFactory: a fresh container of `image` per task. Runs as the image's user, which must
    be numeric (as clusters enforcing runAsNonRoot require). `from_seconds` records each pod's
    `buildah from` time."""

    def __init__(
        self,
        image: str,
        volumes: dict[str, str] | None = None,
        files: dict[str, str] | None = None,
    ):
        self.image = image
        self.user = image_config(image).get("User") or "0"
        _owner(self.user)
        self.volumes = dict(volumes or {})
        self.files = dict(files or {})
        self.from_seconds: dict[str, float] = {}
        self.prefix = f"rankpipe-pod-{uuid.uuid4().hex[:8]}"

    def __call__(self, task: str) -> BuildahPod:
        name = f"{self.prefix}-{task.lower()}"
        pod = BuildahPod(self.image, name, self.user, self.volumes, self.files)
        self.from_seconds[task] = pod.from_seconds
        return pod

    def leftover_containers(self) -> list[str]:
        """This factory's containers still in storage (none once every pod was removed)."""
        out = buildah("containers", "--format", "{{.ContainerName}}")
        return [n for n in out.split() if n.startswith(self.prefix)]
