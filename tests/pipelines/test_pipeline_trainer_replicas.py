"""`rankpipe compile` with runner.kubeflow.trainer_replicas: the Trainer task runs the TFJob
executor (open-source KFP) or TFX's Vertex AI Trainer extension (worker_pool_specs), with the
replicas' settings in its custom_config; a local run keeps the plain Trainer."""

from __future__ import annotations

import json

import pytest
from test_kubeflow_runner import cluster_overrides

from pipelines import kubeflow_runner, pipeline
from pipelines.config import load_config
from rankcore.config_loader import ConfigError


def _trainer_task(overrides: list[str], fmt: str = "yaml") -> tuple[list[str], dict]:
    config = load_config("demo", [*cluster_overrides("demo"), *overrides], check_inputs=False)
    spec = kubeflow_runner.build_pipeline_job(config, fmt)["pipelineSpec"]
    task = spec["root"]["dag"]["tasks"]["Trainer"]
    label = spec["components"][task["componentRef"]["name"]]["executorLabel"]
    args = spec["deploymentSpec"]["executors"][label]["container"]["args"]
    custom = json.loads(task["inputs"]["parameters"]["custom_config"]["runtimeValue"]["constant"])
    return args, custom


def _executor(args: list[str]) -> str:
    return args[args.index("--executor_class_path") + 1]


def test_tfjob_replicas_compile_to_the_tfjob_executor() -> None:
    args, custom = _trainer_task(
        [
            "runner.kubeflow.trainer_replicas={count: 4, staging_dir: gs://bucket/staging, "
            "cpu_limit: '8', memory_limit: 32G}"
        ]
    )
    assert _executor(args) == "components.trainer_replicas.executor.TFJobTrainerExecutor"
    job = custom["rankpipe_tfjob"]
    assert job["image"] == "registry.example/rankpipe:1.0"
    assert job["pipeline_name"] == "rankpipe-demo"
    assert job["replicas"]["count"] == 4 and job["replicas"]["staging_dir"] == "gs://bucket/staging"
    assert custom["trainer"]["batch_size"] == 32  # the global batch, unchanged


def test_vertex_replicas_compile_to_tfx_vertex_trainer_extension() -> None:
    from tfx.extensions.google_cloud_ai_platform import constants
    from tfx.extensions.google_cloud_ai_platform.trainer import executor as vertex_executor

    args, custom = _trainer_task(
        [
            "runner.kubeflow.trainer_replicas={count: 4, backend: vertex, vertex_project: proj, "
            "vertex_region: europe-west4, vertex_machine_type: n1-highmem-8, "
            "accelerator_type: NVIDIA_TESLA_T4}"
        ],
        fmt="vertex",
    )
    assert _executor(args) == "components.trainer_replicas.vertex.VertexTrainerExecutor"
    assert custom[constants.ENABLE_VERTEX_KEY] is True
    assert custom[constants.VERTEX_REGION_KEY] == "europe-west4"
    training = custom[vertex_executor.TRAINING_ARGS_KEY]
    assert training["project"] == "proj"
    pools = training["job_spec"]["worker_pool_specs"]
    assert [p["replica_count"] for p in pools] == [1, 3]  # chief, workers
    for pool in pools:
        assert pool["container_spec"] == {"image_uri": "registry.example/rankpipe:1.0"}
        assert pool["machine_spec"] == {
            "machine_type": "n1-highmem-8",
            "accelerator_type": "NVIDIA_TESLA_T4",
            "accelerator_count": 1,
        }
    # TFX's extension runs this class in every pool (its container command).
    from components.trainer_replicas import replica, vertex

    assert vertex.VertexTrainerExecutor()._GetExecutorClass() is replica.ReplicaExecutor


def test_one_replica_or_a_local_run_keeps_the_plain_trainer() -> None:
    args, custom = _trainer_task([])
    assert "rankpipe_tfjob" not in custom
    # The RankingTrainer's executor: TFX's GenericExecutor that hands the run_fn the corpus
    # vectors' URI (components/ranking_trainer).
    assert _executor(args) == "components.ranking_trainer.executor.Executor"
    config = load_config(
        "demo",
        [
            "runner.kubeflow.trainer_replicas={count: 2, staging_dir: gs://bucket/staging}",
            "collection.demo.enabled=false",
        ],
        check_inputs=False,
    )
    trainer = next(c for c in pipeline.create_components(config) if c.id == "Trainer")
    assert type(trainer).__module__ == "components.ranking_trainer.component"


def test_a_global_batch_the_replicas_cannot_share_is_a_config_error() -> None:
    replicas = "runner.kubeflow.trainer_replicas={count: 3, staging_dir: gs://bucket/staging}"
    with pytest.raises(ConfigError, match=r"trainer.batch_size=32 .*trainer_replicas.count=3"):
        _trainer_task([replicas])


def test_replicated_trainers_of_every_fold_read_the_corpus_vectors() -> None:
    """Cranfield with TFJob replicas: each fold's Trainer task (the TFJob executor, whose
    replicas get every input staged) takes the CorpusEncoder's artifact."""
    replicas = "runner.kubeflow.trainer_replicas={count: 2, staging_dir: gs://bucket/staging}"
    config = load_config(
        "cranfield", [*cluster_overrides("cranfield"), replicas, "trainer.batch_size=16"], False
    )
    spec = kubeflow_runner.build_pipeline_job(config, "yaml")["pipelineSpec"]
    tasks = spec["root"]["dag"]["tasks"]
    trainers = [name for name in tasks if name.startswith("Trainer")]
    assert len(trainers) == 6
    for name in trainers:
        source = tasks[name]["inputs"]["artifacts"]["corpus_vectors"]["taskOutputArtifact"]
        assert source == {"outputArtifactKey": "corpus_vectors", "producerTask": "CorpusEncoder"}
        label = spec["components"][tasks[name]["componentRef"]["name"]]["executorLabel"]
        args = spec["deploymentSpec"]["executors"][label]["container"]["args"]
        assert _executor(args) == "components.trainer_replicas.executor.TFJobTrainerExecutor"
