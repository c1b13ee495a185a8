"""The demo pipeline compiled for the local KFP backend (tests/kfp_local/).

Shared by test_kfp_local_backend.py and tests/benchmarks/bench_kfp.py.
"""

from __future__ import annotations

import os
from pathlib import Path
from unittest import mock

from pipelines import kubeflow_runner, local_runner
from pipelines.config import REPO_ROOT, PipelineConfig, load_config

PIPELINE_ROOT = "minio://mlpipeline/v2/artifacts"  # the backend's default (config/env.go)
# A small budget for any collection: 20 training steps, Beam in one in-memory worker (every task
# is a process of its own, as on a cluster), a model blessed whatever the short training gives,
# so the push and baseline paths run.
SMALL_BUDGET = [
    "datagen.candidates_depth=30",
    "datagen.sampling.samples_per_query=16",
    "trainer.train_steps=20",
    "trainer.warmup_steps=5",
    "trainer.checkpoint_every=10",
    "trainer.validate_every=10",
    "trainer.log_every=10",
    "evaluator.min_values={}",
    "evaluator.randomization_trials=1000",
    "runner.beam.direct_running_mode=in_memory",
    "runner.beam.direct_num_workers=1",
]
# The demo with that budget on a tiny generated collection.
SMALL_DEMO = [
    "collection.demo.num_documents=200",
    "collection.demo.num_queries=30",
    "datagen.vocab.size=500",
    *SMALL_BUDGET,
]


def demo_config(outputs: Path, overrides: list[str]) -> PipelineConfig:
    """The demo config with SMALL_DEMO and `overrides`, its paths under `outputs`."""
    old = os.environ.get("RANKPIPE_OUTPUTS")
    os.environ["RANKPIPE_OUTPUTS"] = str(outputs)
    try:
        config = load_config("demo", SMALL_DEMO + overrides)
    finally:
        if old is None:
            os.environ.pop("RANKPIPE_OUTPUTS")
        else:
            os.environ["RANKPIPE_OUTPUTS"] = old
    local_runner.prepare_collection(config)
    return config


def compile_for_local_backend(config: PipelineConfig, output: Path) -> Path:
    """The spec `rankpipe compile` writes (pipelines/kubeflow_runner.py: schema 2.1, our
    entrypoint as every executor's command, no resolver, defaultPipelineRoot), with this machine
    standing for the cluster: the image's project root is this checkout, and the collection and
    push destination may be paths of this machine (every "pod" of the local backend shares its
    filesystem, as pods share a mounted volume); the cluster-path checks are for real clusters.
    """
    with (
        mock.patch.object(kubeflow_runner, "IMAGE_PROJECT_ROOT", str(REPO_ROOT)),
        mock.patch.object(kubeflow_runner, "check_cluster_paths", lambda *a, **k: None),
    ):
        job = kubeflow_runner.build_pipeline_job(config, "yaml")
    output.write_text(kubeflow_runner.render(job, "yaml", "demo.yaml"))
    return output
