"""Shared by the replica tests and tests/benchmarks/bench_replicas.py: the Trainer's executor
input over real examples, the replicated Trainer run through the local operator, a one-worker
run through TFX's executor, and the checkpoint comparisons."""

from __future__ import annotations

import dataclasses
import glob
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any
from unittest import mock

import numpy as np

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]
sys.path.insert(0, str(HERE.parent / "ranking_datagen"))  # datagen_testlib
from datagen_testlib import make_output_dict  # noqa: E402

# One thread pool each: replicas share the CI machine's cores.
THREADS = {"TF_NUM_INTRAOP_THREADS": "1", "TF_NUM_INTEROP_THREADS": "1"}


def replica_env(threads: bool = True) -> dict[str, str]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), str(HERE)]))
    env.pop("TF_CONFIG", None)
    return {**env, **THREADS} if threads else env


def demo_config(outputs: Path, overrides: list[str]) -> Any:
    """The demo config (collection generated under `outputs`) with `overrides`."""
    from pipelines import local_runner
    from pipelines.config import load_config

    with mock.patch.dict(os.environ, {"RANKPIPE_OUTPUTS": str(outputs)}):
        config = load_config("demo", overrides)
    local_runner.prepare_collection(config)
    return config


def run_datagen(config: Any, root: Path) -> dict[str, str]:
    """RankingDataGen's executor on the config's collection (in-memory Beam): artifact URIs
    by output key, plus the examples' split names under "split_names"."""
    from components.ranking_datagen.executor import Executor

    outputs = make_output_dict(root)
    context = Executor.Context(
        beam_pipeline_args=["--direct_running_mode=in_memory", "--direct_num_workers=1"],
        tmp_dir=str(root / "tmp"),
        unique_id="1",
    )
    props = {
        "collection": json.dumps(dataclasses.asdict(config.collection)),
        "datagen": json.dumps(dataclasses.asdict(config.datagen)),
    }
    Executor(context).Do({}, outputs, props)
    uris = {k: v[0].uri for k, v in outputs.items()}
    uris["split_names"] = outputs["examples"][0].split_names
    return uris


def trainer_input(
    config: Any, data: dict[str, str], root: Path
) -> tuple[dict[str, list], dict[str, list], dict[str, Any]]:
    """(input_dict, output_dict, exec_properties) of the pipeline's Trainer over `data`, its
    outputs under `root` (<root>/Trainer/model/1, .../model_run/1, as LocalDagRunner lays
    them out), the exec properties those of the Kubeflow spec (pipelines/pipeline.py
    trainer_replicas: the TFJob's settings in custom_config)."""
    from google.protobuf import json_format
    from tfx.proto import trainer_pb2
    from tfx.types import standard_artifacts

    from pipelines import pipeline

    examples = standard_artifacts.Examples()
    examples.uri = data["examples"]
    examples.split_names = data["split_names"]
    graph = standard_artifacts.TransformGraph()
    graph.uri = data["transform_graph"]
    model, model_run = standard_artifacts.Model(), standard_artifacts.ModelRun()
    model.uri = str(root / "Trainer" / "model" / "1")
    model_run.uri = str(root / "Trainer" / "model_run" / "1")
    for a in (model, model_run):
        os.makedirs(a.uri, exist_ok=True)
    custom = {
        "trainer": dataclasses.asdict(config.trainer),
        "max_query_length": config.datagen.max_query_length,
        "max_doc_length": config.datagen.max_doc_length,
    }
    replicated = pipeline.trainer_replicas(config, "Trainer", {"custom_config": custom})
    if replicated is not None:
        custom = replicated[1]["custom_config"]
    steps = config.trainer.train_steps
    props = {
        "run_fn": "trainer_module.run_fn.run_fn",
        "train_args": json_format.MessageToJson(
            trainer_pb2.TrainArgs(splits=["train"], num_steps=steps), sort_keys=True
        ),
        "eval_args": json_format.MessageToJson(
            trainer_pb2.EvalArgs(splits=["dev"]), sort_keys=True
        ),
        "custom_config": json.dumps(custom, sort_keys=True),
    }
    return (
        {"examples": [examples], "transform_graph": [graph]},
        {"model": [model], "model_run": [model_run]},
        props,
    )


def run_one_worker(
    inputs: dict, outputs: dict, props: dict, log: Path, threads: bool = True, timeout=600
) -> None:
    """TFX's Trainer GenericExecutor in one process without TF_CONFIG (the replica entrypoint
    as a lone chief): the one-worker reference."""
    from tfx.types import artifact_utils

    argv = [
        sys.executable,
        "-m",
        "components.trainer_replicas.replica",
        "--inputs",
        artifact_utils.jsonify_artifact_dict(inputs),
        "--outputs",
        artifact_utils.jsonify_artifact_dict(outputs),
        "--exec-properties",
        json.dumps(props, sort_keys=True),
    ]
    with open(log, "w") as f:
        proc = subprocess.run(
            argv, env=replica_env(threads), stdout=f, stderr=f, timeout=timeout, cwd=REPO
        )
    assert proc.returncode == 0, log.read_text()[-4000:]


def run_replicated(
    inputs: dict, outputs: dict, props: dict, operator: Any, poll: float = 0.2
) -> None:
    """TFJobTrainerExecutor.Do (the KFP task's executor) with the local operator as the
    cluster's CustomObjectsApi."""
    from components.trainer_replicas import executor, tfjob

    with (
        mock.patch.object(tfjob, "custom_objects_api", lambda: operator),
        mock.patch.object(tfjob, "POLL_SECONDS", poll),
    ):
        executor.TFJobTrainerExecutor().Do(inputs, outputs, props)


def checkpoint_dirs(trainer_root: str) -> list[str]:
    """The checkpoint directories under <...>/Trainer/checkpoints (the chief's first)."""
    dirs = sorted(glob.glob(os.path.join(trainer_root, "checkpoints", "*")))
    return sorted(dirs, key=lambda d: ".worker-" in d)


def latest_step(ckpt_dir: str) -> int:
    import tensorflow as tf

    latest = tf.train.latest_checkpoint(ckpt_dir)
    return int(latest.rsplit("-", 1)[1]) if latest else 0


def checkpoint_values(ckpt_dir: str) -> dict[str, np.ndarray]:
    """The latest checkpoint's tensors but the input iterator's (a one-worker run checkpoints
    its tf.data iterator, a multi-worker one cannot) and the save counter."""
    import tensorflow as tf

    reader = tf.train.load_checkpoint(tf.train.latest_checkpoint(ckpt_dir))
    names = [
        n
        for n in reader.get_variable_to_shape_map()
        if "iterator" not in n and "save_counter" not in n and "OBJECT_GRAPH" not in n
    ]
    return {n: reader.get_tensor(n) for n in names}


def train_results(model_run_uri: str) -> dict[str, Any]:
    from rankcore.constants import TRAIN_RESULTS_FILE

    return json.loads(Path(model_run_uri, TRAIN_RESULTS_FILE).read_text())
