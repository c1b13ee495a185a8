"""pipelines/cpus.py: Beam's worker count follows the container's CPU quota (cgroup v2 and v1),
with fake cgroup files under a temporary root, and pipeline_args uses it for 0 workers."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pipelines import config as config_lib
from pipelines.cpus import available_cpus

# What this process may use when no quota applies (the upper bound of every answer).
USABLE = len(os.sched_getaffinity(0))


def _v2(root: Path, text: str) -> Path:
    path = root / "sys/fs/cgroup/cpu.max"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text + "\n")
    return root


def _v1(root: Path, quota: int, period: int, directory: str = "cpu") -> Path:
    path = root / "sys/fs/cgroup" / directory
    path.mkdir(parents=True, exist_ok=True)
    (path / "cpu.cfs_quota_us").write_text(f"{quota}\n")
    (path / "cpu.cfs_period_us").write_text(f"{period}\n")
    return root


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("100000 100000", 1),  # limits.cpu: 1
        ("50000 100000", 1),  # 500m: at least one worker
        ("150000 100000", 2),  # 1.5 CPUs: rounded up
        ("10000000 100000", USABLE),  # 100 CPUs: at most what the affinity allows
        ("max 100000", USABLE),  # no limit
    ],
)
def test_cgroup_v2_cpu_max(tmp_path: Path, text: str, expected: int) -> None:
    assert available_cpus(str(_v2(tmp_path, text))) == min(expected, USABLE)


@pytest.mark.parametrize(
    ("quota", "period", "directory", "expected"),
    [
        (100000, 100000, "cpu", 1),
        (250000, 100000, "cpu,cpuacct", 3),
        (-1, 100000, "cpu", USABLE),  # v1's "no quota"
    ],
)
def test_cgroup_v1_cfs_quota(
    tmp_path: Path, quota: int, period: int, directory: str, expected: int
) -> None:
    assert available_cpus(str(_v1(tmp_path, quota, period, directory))) == min(expected, USABLE)


def test_v2_is_read_before_v1_and_bad_files_mean_no_quota(tmp_path: Path) -> None:
    _v1(tmp_path, 100000, 100000)
    assert available_cpus(str(_v2(tmp_path, "max 100000"))) == USABLE
    assert available_cpus(str(_v2(tmp_path, "garbage"))) == USABLE
    assert available_cpus(str(tmp_path / "no-cgroup-files")) == USABLE


def test_zero_workers_resolve_to_the_quota_locally_and_stay_zero_for_kubeflow(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    beam = config_lib.BeamConfig(direct_running_mode="multi_processing", direct_num_workers=0)
    monkeypatch.setattr(config_lib, "available_cpus", lambda: 1)  # e.g. a 1-CPU container
    assert "--direct_num_workers=1" in beam.pipeline_args()
    # Compiled for Kubeflow: resolved in the pod by the entrypoint, not on this machine.
    assert "--direct_num_workers=0" in beam.pipeline_args(resolve_workers=False)
    explicit = config_lib.BeamConfig(direct_num_workers=4)
    assert "--direct_num_workers=4" in explicit.pipeline_args()


def test_direct_runner_args_keep_tfx_from_building_its_staging_package() -> None:
    # TFX's BaseBeamExecutor builds an sdist of TFX (48 MB copied to /tmp, never removed) for
    # every Beam component unless a dependency flag is set; the DirectRunner needs none.
    args = config_lib.BeamConfig(direct_num_workers=2).pipeline_args()
    assert args[-1] == config_lib.DIRECT_RUNNER_NO_STAGING
    from tfx.utils import dependency_utils

    assert dependency_utils.make_beam_dependency_flags(args) == args  # built nothing
    for extra in (
        ["--runner=DataflowRunner", "--project=p"],
        ["--runner", "FlinkRunner"],
        ["--setup_file=./setup.py"],
        ["--extra_package", "dist/x.tar.gz"],
    ):
        beam = config_lib.BeamConfig(direct_num_workers=2, extra_args=extra)
        assert config_lib.DIRECT_RUNNER_NO_STAGING not in beam.pipeline_args(), extra
    explicit = config_lib.BeamConfig(direct_num_workers=2, extra_args=["--runner=DirectRunner"])
    assert explicit.pipeline_args()[-1] == config_lib.DIRECT_RUNNER_NO_STAGING
