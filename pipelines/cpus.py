"""How many CPUs this process may use: the container's CPU quota, not the node's core count.

Why: `runner.beam.direct_num_workers: 0` used to mean "one Beam worker per CPU", and Beam's
DirectRunner itself turns 0 into `multiprocessing.cpu_count()`
(apache_beam/runners/portability/fn_api_runner/fn_runner.py, FnApiRunner.run_pipeline). In a
Kubernetes pod that is the node's core count (64 on a large node), not the pod's CPU limit, so a
Beam step started that many worker processes, each importing TensorFlow, against the pod's
memory limit: OOM kills, and CPU throttling on top. A CPU limit reaches the container as a CFS
quota in its cgroup (Kubernetes: `resources.limits.cpu` -> `cpu.max` on cgroup v2,
`cpu.cfs_quota_us` / `cpu.cfs_period_us` on cgroup v1; see the kernel's
Documentation/admin-guide/cgroup-v2.rst, "cpu.max", and scheduler/sched-bwc.rst), and a CPU set
(`taskset`, the static CPU manager policy) reaches it as the scheduler affinity. This module
reads both; it is standard library only, so the executors' entrypoint
(pipelines/kfp_entrypoint.py) can call it at run time, in the pod.

Only the container's own cgroup files are read (`/sys/fs/cgroup/cpu.max`, or
`/sys/fs/cgroup/cpu{,,cpuacct}/cpu.cfs_*` on v1), which is what a container sees: with cgroup v2
runtimes give containers a private cgroup namespace, and with v1 they mount the container's own
hierarchy there. A quota set on an ancestor cgroup only (outside any container) is not seen.
"""

from __future__ import annotations

import math
import os

# cgroup v1 mounts the cpu controller under either name (cpu,cpuacct is a symlink on most hosts).
_V1_DIRS = ("sys/fs/cgroup/cpu", "sys/fs/cgroup/cpu,cpuacct")


def _read(path: str) -> str | None:
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return None


def _ratio(quota: str, period: str) -> float | None:
    try:
        q, p = int(quota), int(period)
    except ValueError:  # "max" (v2: no quota) or an unreadable value
        return None
    return q / p if q > 0 and p > 0 else None  # v1 writes -1 for no quota


def _cgroup_quota(root: str) -> float | None:
    """The CPU quota in CPUs (quota / period), or None when no quota is set or readable."""
    v2 = _read(os.path.join(root, "sys/fs/cgroup/cpu.max"))
    if v2 is not None:  # cgroup v2: "QUOTA PERIOD" or "max PERIOD"
        parts = v2.split()
        return _ratio(parts[0], parts[1]) if len(parts) == 2 else None
    for directory in _V1_DIRS:
        quota = _read(os.path.join(root, directory, "cpu.cfs_quota_us"))
        period = _read(os.path.join(root, directory, "cpu.cfs_period_us"))
        if quota is not None and period is not None:
            return _ratio(quota, period)
    return None


def available_cpus(root: str = "/") -> int:
    """The number of CPUs this process can use: ceil(cgroup CPU quota / period) when a quota is
    set (cgroup v2 `cpu.max` "QUOTA PERIOD", else cgroup v1 `cpu.cfs_quota_us` /
    `cpu.cfs_period_us`), at most the CPUs in this process's affinity mask
    (`os.sched_getaffinity`, else `os.cpu_count()`), and at least 1.

    `root` is where the cgroup filesystem's `sys/fs/cgroup` is looked up (tests pass a directory
    of fake files); the affinity is always this process's own.
    """
    try:
        usable = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not on Linux
        usable = os.cpu_count() or 1
    quota = _cgroup_quota(root)
    if quota is not None:
        usable = min(usable, math.ceil(quota))
    return max(1, usable)
