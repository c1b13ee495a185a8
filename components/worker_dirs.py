"""Where Beam workers read and write: paths every worker of the configured runner can reach.

Why: RankingDataGen hands its workers pickles, text files between its two passes, the staged
vocabulary, the TransformGraph and the example shards through a work directory, and the
RankingEvaluator's workers write their scores to a prefix and load SavedModels and examples
by path. On the DirectRunner (and on a portable runner whose SDK workers run in this process,
LOOPBACK) the workers are this machine's processes, and the executor's temp dir is fine. On
Dataflow, or a Flink or Spark cluster with DOCKER, EXTERNAL or remote PROCESS workers, a worker
opens a path on its own machine: a directory that exists only on the launcher (a Kubeflow pod's
disk, where TFX's container entrypoint puts the executor's temp dir beside the output metadata
file) is then missing or empty there, and the pipeline fails deep inside a worker, or worse,
writes its files where the launcher never looks.

So with such a runner every path the workers open must be one they reach: an object-store URI
(gs://...), or a path under a directory declared mounted at the same path on the launcher and
on every worker (`--rankpipe_shared_mount=DIR`, repeatable: an NFS or Filestore volume, a GCS
FUSE mount). The work directory is the executor's temp dir when it is an object-store URI
(LocalDagRunner with a gs:// pipeline root), else a fresh directory under Beam's
`--temp_location` (`runner.beam.extra_args`) when the workers reach that; a local temp dir is
never handed to such workers, even under a shared mount: it is the launcher's (on Kubeflow the
pod's disk), and only --temp_location says where the workers may write. Anything else fails
before any work, naming the setting to change. The DirectRunner keeps the executor's temp dir
exactly as before (RankingDataGen's byte-identity test). See docs/datagen.md "Distributed
runners".
"""

from __future__ import annotations

import logging
import os
import re
import uuid
from collections.abc import Mapping, Sequence

from apache_beam.options.pipeline_options import (
    FlinkRunnerOptions,
    GoogleCloudOptions,
    PipelineOptions,
    PortableOptions,
    SparkRunnerOptions,
    StandardOptions,
)
from tfx.dsl.components.base import base_beam_executor

# Runners whose workers are processes or threads of this machine (lower case, without the
# module path and the "Runner" suffix, as apache_beam.runners.runner.create_runner matches).
LOCAL_RUNNERS = frozenset(
    {"direct", "bundlebaseddirect", "switchingdirect", "testdirect", "interactive"}
)
# Portable runners: where their workers run depends on the environment type.
PORTABLE_RUNNERS = frozenset({"portable", "flink", "spark", "prism"})
# Beam's defaults for an unset --environment_type (apache_beam/runners/portability/
# flink_runner.py, spark_runner.py, prism_runner.py default_environment; PortableRunner: DOCKER).
FLINK_LOCAL_MASTERS = ("[local]", "[auto]")
SPARK_LOCAL_MASTER = re.compile(r"^local(\[.+\])?$")
# Schemes that are not shared storage: file:// is this machine's disk, ram:// this process's.
LOCAL_SCHEMES = frozenset({"file", "ram"})
_SCHEME = re.compile(r"^([a-zA-Z][a-zA-Z0-9+.-]*)://")
SETTING = "runner.beam.extra_args"
SHARED_MOUNT_FLAG = "--rankpipe_shared_mount"


class SharedMountOptions(PipelineOptions):
    """rankpipe's one Beam flag, declared to Beam so that the executors' Beam pipelines accept
    it (Beam would warn about and drop an unknown flag). It changes nothing in Beam itself."""

    @classmethod
    def _add_argparse_args(cls, parser) -> None:  # noqa: ANN001  (Beam's argparse wrapper)
        parser.add_argument(
            SHARED_MOUNT_FLAG,
            dest="rankpipe_shared_mount",
            action="append",
            default=None,
            help="A directory mounted at the same path on the launcher and on every Beam "
            "worker (NFS, Filestore, a GCS FUSE mount): rankpipe then gives the workers paths "
            "under it, as it would object-store URIs. Repeatable.",
        )


class WorkerPathError(ValueError):
    """A path Beam workers would use is not reachable by them (see the module docstring)."""


def runner_name(beam_args: Sequence[str]) -> str:
    """The configured runner as Beam's create_runner matches it: lower case, no module path,
    no "runner" suffix ("DataflowRunner" -> "dataflow"); "direct" when unset (Beam's default)."""
    runner = PipelineOptions(list(beam_args)).view_as(StandardOptions).runner
    name = (runner or StandardOptions.DEFAULT_RUNNER).rsplit(".", 1)[-1].lower()
    return name[: -len("runner")] if name.endswith("runner") and name != "runner" else name


def environment_type(beam_args: Sequence[str]) -> str | None:
    """The SDK worker environment a portable runner would use (DOCKER, PROCESS, EXTERNAL,
    LOOPBACK, or a URN), with Beam's per-runner default for an unset --environment_type; None
    for runners that are not portable (DirectRunner, Dataflow)."""
    name = runner_name(beam_args)
    if name not in PORTABLE_RUNNERS:
        return None
    options = PipelineOptions(list(beam_args))
    portable = options.view_as(PortableOptions)
    if portable.environment_type:
        return portable.environment_type.upper()
    if not portable.output_executable_path:
        if name == "prism":
            return "LOOPBACK"
        if name == "flink" and options.view_as(FlinkRunnerOptions).flink_master in (
            FLINK_LOCAL_MASTERS
        ):
            return "LOOPBACK"
        if name == "spark" and SPARK_LOCAL_MASTER.match(
            options.view_as(SparkRunnerOptions).spark_master_url or ""
        ):
            return "LOOPBACK"
    return "DOCKER"


def workers_see_local_disk(beam_args: Sequence[str]) -> bool:
    """Whether every Beam worker of these args runs on this machine, outside any container:
    the DirectRunner family; a portable runner with LOOPBACK workers (they run in this
    process), or PROCESS workers started by the embedded job server. Anything else (Dataflow,
    DOCKER or EXTERNAL workers, PROCESS workers of a job server elsewhere, an unknown runner)
    may run elsewhere."""
    name = runner_name(beam_args)
    if name in LOCAL_RUNNERS:
        return True
    env = environment_type(beam_args)
    if env == "LOOPBACK":
        return True
    if env == "PROCESS":
        return PipelineOptions(list(beam_args)).view_as(PortableOptions).job_endpoint == "embed"
    return False


def describe_runner(beam_args: Sequence[str]) -> str:
    """The runner as an error message names it, e.g. "PortableRunner (environment DOCKER)"."""
    runner = PipelineOptions(list(beam_args)).view_as(StandardOptions).runner
    env = environment_type(beam_args)
    label = runner or StandardOptions.DEFAULT_RUNNER
    return f"{label} (environment {env})" if env else label


def is_object_store_uri(path: str) -> bool:
    """Whether `path` is a URI of shared storage (gs://, s3://, hdfs://, ...), as opposed to a
    path of this machine (no scheme, file://, ram://)."""
    match = _SCHEME.match(path)
    return bool(match) and match.group(1).lower() not in LOCAL_SCHEMES


def shared_mounts(beam_args: Sequence[str]) -> list[str]:
    """The directories `--rankpipe_shared_mount` declares (absolute, normalized), in order."""
    mounts = PipelineOptions(list(beam_args)).view_as(SharedMountOptions).rankpipe_shared_mount
    return [os.path.normpath(os.path.abspath(m)) for m in mounts or [] if m]


def reachable_by_workers(path: str, beam_args: Sequence[str]) -> bool:
    """Whether every worker of a distributed runner opens `path` as this machine does: an
    object-store URI, or a local path (not file:// or ram://) under a declared shared mount."""
    if is_object_store_uri(path):
        return True
    if _SCHEME.match(path):
        return False
    local = os.path.normpath(os.path.abspath(path))
    return any(
        local == m or local.startswith(m.rstrip(os.sep) + os.sep) for m in shared_mounts(beam_args)
    )


def check_worker_paths(beam_args: Sequence[str], paths: Mapping[str, str], what: str) -> None:
    """Refuses, with a runner whose workers may not see this machine's disk, any of `paths`
    (name -> path the workers will open) that they do not reach (reachable_by_workers: an
    object-store URI or a path under a declared shared mount). Nothing to check on the
    DirectRunner."""
    if workers_see_local_disk(beam_args):
        return
    local = {
        name: path
        for name, path in paths.items()
        if path and not reachable_by_workers(path, beam_args)
    }
    if local:
        listed = "; ".join(f"{name}: {path}" for name, path in local.items())
        raise WorkerPathError(
            f"{what}: the Beam runner {describe_runner(beam_args)} runs workers that may not "
            f"see this machine's disk, and they would open paths of this machine ({listed}). "
            "Give them as object-store URIs (gs://...) every worker can read, or under a "
            f"directory every worker mounts at the same path ({SHARED_MOUNT_FLAG}=DIR in "
            f"{SETTING}), or run Beam on this machine (remove --runner from {SETTING}). On "
            "Kubeflow, input artifacts are the launcher's local copies, so a distributed runner "
            "cannot read them (docs/datagen.md, 'Distributed runners')."
        )


def choose_work_dir(beam_args: Sequence[str], tmp_dir: str, name: str, what: str) -> str:
    """The directory `what` (a component) should give its Beam workers, `name` inside it:

    - workers on this machine (workers_see_local_disk): `tmp_dir`/`name`, as always;
    - otherwise `tmp_dir`/`name` when `tmp_dir` is an object-store URI; else a fresh
      `<--temp_location>/rankpipe/<name>-<id>` when the workers reach Beam's --temp_location
      (an object-store URI, or a path under a --rankpipe_shared_mount); a local `tmp_dir` is
      the launcher's own, never given to them (see the module docstring);
    - otherwise WorkerPathError naming runner.beam.extra_args and --temp_location.
    """
    if workers_see_local_disk(beam_args) or is_object_store_uri(tmp_dir):
        return os.path.join(tmp_dir, name)
    temp_location = PipelineOptions(list(beam_args)).view_as(GoogleCloudOptions).temp_location
    if temp_location and reachable_by_workers(temp_location, beam_args):
        work_dir = os.path.join(temp_location, "rankpipe", f"{name}-{uuid.uuid4().hex[:12]}")
        logging.info(
            "%s: the executor's temp dir %s is local and the Beam runner %s may run workers "
            "elsewhere: work directory %s (--temp_location)",
            what,
            tmp_dir,
            describe_runner(beam_args),
            work_dir,
        )
        return work_dir
    found = (
        f"--temp_location={temp_location}, not an object-store URI or under a {SHARED_MOUNT_FLAG}"
        if temp_location
        else ("no --temp_location")
    )
    raise WorkerPathError(
        f"{what}: the Beam runner {describe_runner(beam_args)} runs workers that may not see "
        f"this machine's disk, and the executor's temp dir {tmp_dir} is a local path ({found}). "
        f"Add --temp_location=gs://BUCKET/DIR (an object store every worker can read and "
        f"write; or a directory under one given as {SHARED_MOUNT_FLAG}=DIR, mounted at the "
        f"same path on every worker) to {SETTING}, or run Beam on this machine (remove "
        f"--runner from {SETTING}). See docs/datagen.md, 'Distributed runners'."
    )


def work_dir(
    executor: base_beam_executor.BaseBeamExecutor,
    name: str,
    what: str,
    reads: Mapping[str, str] | None = None,
) -> str:
    """choose_work_dir for a Beam executor (its Beam args and temp dir), after
    check_worker_paths on `reads` (name -> path its workers will read)."""
    args = list(executor._beam_pipeline_args or [])  # noqa: SLF001  (BaseBeamExecutor's own)
    if reads:
        check_worker_paths(args, reads, what)
    return choose_work_dir(args, executor._get_tmp_dir(), name, what)  # noqa: SLF001
