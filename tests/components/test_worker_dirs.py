"""components/worker_dirs.py: which runners' workers see this machine's disk, and the work
directory a component gives its Beam workers: unchanged on the DirectRunner, an object-store
one on a runner whose workers may be elsewhere (or one under a directory declared mounted on
every worker), and an error naming the setting when there is none (a Kubeflow pod's local temp
dir and no --temp_location). Also through the executors:
RankingDataGen and StatisticsGen refuse before any Beam work."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
from tfx.dsl.components.base import base_beam_executor
from tfx.types import standard_artifacts

from components import statistics_gen, worker_dirs

DIRECT = ["--direct_running_mode=multi_processing", "--direct_num_workers=2"]
# --sdk_container_image also keeps TFX from building an sdist of itself for the workers.
DATAFLOW = [
    "--runner=DataflowRunner",
    "--project=p",
    "--region=europe-west1",
    "--sdk_container_image=europe-docker.pkg.dev/p/rankpipe/rankpipe:1",
]
FLINK_CLUSTER = [
    "--runner=PortableRunner",
    "--job_endpoint=flink-jobserver:8099",
    "--environment_type=DOCKER",
    "--environment_config=europe-docker.pkg.dev/p/rankpipe/rankpipe:1",
]
POD_TMP = "/tmp/kfp_outputs/.temp"  # where TFX's Kubeflow entrypoint puts the executor tmp dir

LOCAL = {
    "no runner (Beam's default)": DIRECT,
    "DirectRunner": ["--runner=DirectRunner"],
    "direct": ["--runner", "direct"],
    "BundleBasedDirectRunner": ["--runner=BundleBasedDirectRunner"],
    "SwitchingDirectRunner": [
        "--runner=apache_beam.runners.direct.direct_runner.SwitchingDirectRunner"
    ],
    "portable, embedded job server, LOOPBACK (CI's)": [
        "--runner=PortableRunner",
        "--job_endpoint=embed",
        "--environment_type=LOOPBACK",
    ],
    "portable, embedded job server, PROCESS": [
        "--runner=PortableRunner",
        "--job_endpoint=embed",
        "--environment_type=PROCESS",
        '--environment_config={"command": "python -m apache_beam.runners.worker.sdk_worker_main"}',
    ],
    "Flink, local master (LOOPBACK by default)": ["--runner=FlinkRunner"],
    "Flink cluster, LOOPBACK": [
        "--runner=FlinkRunner",
        "--flink_master=flink:8081",
        "--environment_type=LOOPBACK",
    ],
    "Spark, local master (LOOPBACK by default)": ["--runner=SparkRunner"],
    "Prism (LOOPBACK by default)": ["--runner=PrismRunner"],
}
REMOTE = {
    "Dataflow": DATAFLOW,
    "Flink job server, DOCKER": FLINK_CLUSTER,
    "portable, embedded job server, DOCKER": ["--runner=PortableRunner", "--job_endpoint=embed"],
    "Spark job server, EXTERNAL": [
        "--runner=PortableRunner",
        "--job_endpoint=spark-jobserver:8099",
        "--environment_type=EXTERNAL",
        "--environment_config=localhost:50000",
    ],
    "job server elsewhere, PROCESS": [
        "--runner=PortableRunner",
        "--job_endpoint=jobserver:8099",
        "--environment_type=PROCESS",
    ],
    "Flink cluster (DOCKER by default)": ["--runner=FlinkRunner", "--flink_master=flink:8081"],
    "Spark cluster (DOCKER by default)": [
        "--runner=SparkRunner",
        "--spark_master_url=spark://spark:7077",
    ],
    "an unknown runner": ["--runner=my.module.MyRunner"],
}


@pytest.mark.parametrize("case", sorted(LOCAL))
def test_runners_whose_workers_see_this_machine(case: str) -> None:
    assert worker_dirs.workers_see_local_disk(LOCAL[case])


@pytest.mark.parametrize("case", sorted(REMOTE))
def test_runners_whose_workers_may_be_elsewhere(case: str) -> None:
    assert not worker_dirs.workers_see_local_disk(REMOTE[case])


def test_object_store_uris() -> None:
    for uri in ("gs://b/p", "s3://b/p", "hdfs://nn/p", "GS://b"):
        assert worker_dirs.is_object_store_uri(uri), uri
    for path in ("/tmp/x", "relative/x", "file:///tmp/x", "ram://x", "/gcs/b/p", "C:\\x"):
        assert not worker_dirs.is_object_store_uri(path), path


def test_direct_runner_keeps_the_executor_tmp_dir() -> None:
    for args in LOCAL.values():
        got = worker_dirs.choose_work_dir(args, POD_TMP, "ranking_datagen", "RankingDataGen")
        assert got == f"{POD_TMP}/ranking_datagen"
    # Even with a --temp_location: the DirectRunner's work dir is what it always was.
    args = [*DIRECT, "--temp_location=gs://b/tmp"]
    assert worker_dirs.choose_work_dir(args, "/t", "w", "X") == "/t/w"


def test_remote_runner_with_an_object_store_tmp_dir_keeps_it() -> None:
    # LocalDagRunner with a gs:// pipeline root: the executor tmp dir is under it.
    tmp = "gs://b/root/RankingDataGen/.system/executor_execution/7/.temp/7"
    got = worker_dirs.choose_work_dir(DATAFLOW, tmp, "ranking_datagen", "RankingDataGen")
    assert got == f"{tmp}/ranking_datagen"


@pytest.mark.parametrize("case", sorted(REMOTE))
def test_remote_runner_with_a_pod_local_tmp_dir_uses_temp_location(case: str) -> None:
    args = [*REMOTE[case], "--temp_location=gs://b/beam-tmp"]
    first = worker_dirs.choose_work_dir(args, POD_TMP, "ranking_datagen", "RankingDataGen")
    second = worker_dirs.choose_work_dir(args, POD_TMP, "ranking_datagen", "RankingDataGen")
    assert re.fullmatch(r"gs://b/beam-tmp/rankpipe/ranking_datagen-[0-9a-f]{12}", first)
    assert first != second  # --temp_location is shared by runs: one directory per execution


@pytest.mark.parametrize("temp_location", [None, "/mnt/tmp", "file:///mnt/tmp"])
def test_remote_runner_with_a_pod_local_tmp_dir_and_no_object_store_is_refused(
    temp_location: str | None,
) -> None:
    args = [*FLINK_CLUSTER] + ([f"--temp_location={temp_location}"] if temp_location else [])
    with pytest.raises(worker_dirs.WorkerPathError) as error:
        worker_dirs.choose_work_dir(args, POD_TMP, "ranking_datagen", "RankingDataGen")
    message = str(error.value)
    assert message.startswith("RankingDataGen: the Beam runner PortableRunner (environment DOCKER)")
    assert POD_TMP in message
    assert "--temp_location=gs://" in message and "runner.beam.extra_args" in message
    if temp_location:
        assert f"--temp_location={temp_location}, not an object-store URI" in message


def test_paths_workers_read() -> None:
    reads = {"collection.documents": "/data/corpus.jsonl", "other": "gs://b/x"}
    worker_dirs.check_worker_paths(DIRECT, reads, "RankingDataGen")  # fine on this machine
    worker_dirs.check_worker_paths(DATAFLOW, {"collection.documents": "gs://b/c/*.jsonl"}, "X")
    with pytest.raises(worker_dirs.WorkerPathError) as error:
        worker_dirs.check_worker_paths(DATAFLOW, reads, "RankingDataGen")
    message = str(error.value)
    assert "collection.documents: /data/corpus.jsonl" in message
    assert "gs://b/x" not in message
    assert message.startswith("RankingDataGen: the Beam runner DataflowRunner runs workers")


# A Beam worker pool started apart from the launcher (worker_pool_main), its workers mounting
# /mnt/shared and /data at the same paths as the launcher (tests/components/test_external_workers.py
# runs one).
EXTERNAL = [
    "--runner=PortableRunner",
    "--job_endpoint=embed",
    "--environment_type=EXTERNAL",
    "--environment_config=localhost:50000",
    "--rankpipe_shared_mount=/mnt/shared",
    "--rankpipe_shared_mount=/data/",
]


def test_shared_mounts_are_reachable_by_workers() -> None:
    assert worker_dirs.shared_mounts(EXTERNAL) == ["/mnt/shared", "/data"]
    assert worker_dirs.shared_mounts(FLINK_CLUSTER) == []
    for path in ("/mnt/shared", "/mnt/shared/root/x", "/data/c/corpus.jsonl", "gs://b/x"):
        assert worker_dirs.reachable_by_workers(path, EXTERNAL), path
    for path in ("/mnt/shared-other/x", "/mnt", "/mnt/shared/../x", "file:///mnt/shared/x", "x"):
        assert not worker_dirs.reachable_by_workers(path, EXTERNAL), path
    assert not worker_dirs.reachable_by_workers("/mnt/shared/x", FLINK_CLUSTER)
    reads = {"collection.documents": "/data/corpus.jsonl", "examples": "/mnt/shared/root/e"}
    worker_dirs.check_worker_paths(EXTERNAL, reads, "X")
    with pytest.raises(worker_dirs.WorkerPathError) as error:
        worker_dirs.check_worker_paths(EXTERNAL, {**reads, "model": "/home/me/model"}, "X")
    message = str(error.value)
    assert "PortableRunner (environment EXTERNAL)" in message
    assert "(model: /home/me/model)" in message and "--rankpipe_shared_mount=DIR" in message


def test_external_workers_write_under_temp_location_on_a_shared_mount() -> None:
    args = [*EXTERNAL, "--temp_location=/mnt/shared/beam-tmp"]
    got = worker_dirs.choose_work_dir(args, POD_TMP, "ranking_datagen", "RankingDataGen")
    assert re.fullmatch(r"/mnt/shared/beam-tmp/rankpipe/ranking_datagen-[0-9a-f]{12}", got)
    # The executor's temp dir is the launcher's own, even under a shared mount (LocalDagRunner
    # puts it under the pipeline root): only --temp_location says where workers may write.
    tmp = "/mnt/shared/root/RankingDataGen/.system/executor_execution/7/.temp/7"
    assert worker_dirs.choose_work_dir(args, tmp, "w", "X").startswith("/mnt/shared/beam-tmp/")
    for temp_location in (None, "/tmp/beam", "file:///mnt/shared/beam-tmp"):
        flags = [f"--temp_location={temp_location}"] if temp_location else []
        with pytest.raises(worker_dirs.WorkerPathError, match=r"--rankpipe_shared_mount=DIR"):
            worker_dirs.choose_work_dir([*EXTERNAL, *flags], tmp, "w", "X")


class _Executor(base_beam_executor.BaseBeamExecutor):
    def Do(self, input_dict, output_dict, exec_properties) -> None:  # noqa: N802  (TFX's)
        raise NotImplementedError


def _context(tmp_path: Path, args: list[str]) -> base_beam_executor.BaseBeamExecutor.Context:
    return base_beam_executor.BaseBeamExecutor.Context(
        beam_pipeline_args=args, tmp_dir=str(tmp_path / "pod" / ".temp"), unique_id="1"
    )


def test_executor_work_dir(tmp_path: Path) -> None:
    # (the image flag keeps TFX from building an sdist of itself, as pipelines/config.py does)
    executor = _Executor(_context(tmp_path, [*DIRECT, "--sdk_container_image=unused"]))
    tmp = executor._get_tmp_dir()  # noqa: SLF001
    assert tmp.startswith(str(tmp_path / "pod" / ".temp"))
    assert worker_dirs.work_dir(executor, "w", "X", {"m": "/local/model"}) == os.path.join(tmp, "w")
    executor = _Executor(_context(tmp_path, [*DATAFLOW, "--temp_location=gs://b/t"]))
    assert worker_dirs.work_dir(executor, "w", "X", {"m": "gs://b/model"}).startswith(
        "gs://b/t/rankpipe/w-"
    )
    with pytest.raises(worker_dirs.WorkerPathError, match=r"m: /local/model"):
        worker_dirs.work_dir(executor, "w", "X", {"m": "/local/model"})


def test_ranking_datagen_refuses_before_any_work(tmp_path: Path) -> None:
    """On Kubeflow: a pod-local temp dir, a distributed runner."""
    from components.ranking_datagen.executor import OUTPUT_KEYS, Executor

    outputs = {}
    for name in OUTPUT_KEYS:
        artifact = standard_artifacts.Examples()  # the type does not matter before any work
        artifact.uri = str(tmp_path / "out" / name)
        outputs[name] = [artifact]
    collection = {"documents": str(tmp_path / "docs.jsonl"), "queries": "q", "qrels": "r"}
    props = {"collection": json.dumps(collection), "datagen": json.dumps({})}
    args = [*FLINK_CLUSTER, "--temp_location=gs://b/t"]
    with pytest.raises(worker_dirs.WorkerPathError, match=r"collection\.documents: /"):
        Executor(_context(tmp_path, args)).Do({}, outputs, props)
    # Documents in an object store, but no --temp_location for the work directory.
    props["collection"] = json.dumps({**collection, "documents": "gs://b/docs.jsonl"})
    with pytest.raises(worker_dirs.WorkerPathError, match=r"--temp_location=gs://"):
        Executor(_context(tmp_path, FLINK_CLUSTER)).Do({}, outputs, props)
    assert not (tmp_path / "out").exists()


def test_statistics_gen_refuses_local_artifacts_on_a_distributed_runner(tmp_path: Path) -> None:
    examples = standard_artifacts.Examples()
    examples.uri = str(tmp_path / "examples")
    statistics = standard_artifacts.ExampleStatistics()
    statistics.uri = str(tmp_path / "statistics")
    with pytest.raises(worker_dirs.WorkerPathError, match=r"examples: /.*statistics: /"):
        statistics_gen.Executor(_context(tmp_path, DATAFLOW)).Do(
            {"examples": [examples]}, {"statistics": [statistics]}, {}
        )
