"""RankingTrainer: TFX's Trainer with the optional corpus vectors input, whose URI reaches the
run_fn as custom_config["corpus_vectors_uri"] through TFX's own executors (run here for real
with a run_fn that records what it was given), locally and in a replica."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import tensorflow as tf
from tfx import types
from tfx.types import standard_artifacts

from components import artifacts
from components.ranking_trainer.component import RankingTrainer
from components.ranking_trainer.executor import CORPUS_VECTORS_URI_KEY, Executor
from components.trainer_replicas import replica
from components.trainer_replicas.component import TFJobTrainer
from components.trainer_replicas.vertex import VertexReplicaTrainer, VertexTrainerExecutor

RECORD_FILE = "custom_config.json"


def record_run_fn(fn_args) -> None:  # noqa: ANN001  (TFX's FnArgs)
    """A run_fn that writes the custom_config it got where the model goes."""
    tf.io.gfile.makedirs(fn_args.serving_model_dir)
    with tf.io.gfile.GFile(f"{fn_args.serving_model_dir}/{RECORD_FILE}", "w") as f:
        f.write(json.dumps(fn_args.custom_config, sort_keys=True))


def _artifacts(tmp_path: Path, with_vectors: bool) -> tuple[dict, dict]:
    examples = standard_artifacts.Examples()
    examples.uri = str(tmp_path / "examples")
    examples.split_names = '["train", "dev"]'
    inputs = {"examples": [examples]}
    if with_vectors:
        vectors = artifacts.CorpusVectors()
        vectors.uri = str(tmp_path / "vectors")
        inputs["corpus_vectors"] = [vectors]
    model, model_run = standard_artifacts.Model(), standard_artifacts.ModelRun()
    model.uri, model_run.uri = str(tmp_path / "model"), str(tmp_path / "model_run")
    return inputs, {"model": [model], "model_run": [model_run]}


def _exec_properties(component: RankingTrainer) -> dict:
    """The component's exec properties as the launcher hands them (protos already JSON)."""
    return dict(component.exec_properties)


def _component(**kwargs) -> RankingTrainer:
    from tfx.proto import trainer_pb2

    return RankingTrainer(
        examples=types.Channel(type=standard_artifacts.Examples),
        run_fn=f"{__name__}.record_run_fn",
        train_args=trainer_pb2.TrainArgs(splits=["train"], num_steps=1),
        eval_args=trainer_pb2.EvalArgs(splits=["dev"]),
        custom_config={"trainer": {"model": "dual_encoder"}},
        **kwargs,
    )


def _recorded(tmp_path: Path) -> dict:
    return json.loads((tmp_path / "model" / "Format-Serving" / RECORD_FILE).read_text())


@pytest.mark.parametrize("with_vectors", [True, False])
def test_the_run_fn_gets_the_corpus_vectors_uri(tmp_path: Path, with_vectors: bool) -> None:
    component = _component(
        corpus_vectors=types.Channel(type=artifacts.CorpusVectors) if with_vectors else None
    )
    assert ("corpus_vectors" in component.inputs) == with_vectors
    inputs, outputs = _artifacts(tmp_path, with_vectors)
    Executor().Do(inputs, outputs, _exec_properties(component))
    expected = {"trainer": {"model": "dual_encoder"}}
    if with_vectors:
        expected[CORPUS_VECTORS_URI_KEY] = str(tmp_path / "vectors")
    assert _recorded(tmp_path) == expected


def test_a_replica_gets_it_too(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The executor every TFJob / Vertex AI replica runs (the chief here)."""
    monkeypatch.delenv("TF_CONFIG", raising=False)
    component = _component(corpus_vectors=types.Channel(type=artifacts.CorpusVectors))
    inputs, outputs = _artifacts(tmp_path, True)
    replica.ReplicaExecutor().Do(inputs, outputs, _exec_properties(component))
    assert _recorded(tmp_path)[CORPUS_VECTORS_URI_KEY] == str(tmp_path / "vectors")
    assert VertexTrainerExecutor()._GetExecutorClass() is replica.ReplicaExecutor  # noqa: SLF001


def test_the_replicated_trainers_declare_the_input() -> None:
    for cls in (TFJobTrainer, VertexReplicaTrainer):
        trainer = cls(
            examples=types.Channel(type=standard_artifacts.Examples),
            run_fn=f"{__name__}.record_run_fn",
            corpus_vectors=types.Channel(type=artifacts.CorpusVectors),
        )
        assert trainer.inputs["corpus_vectors"].type is artifacts.CorpusVectors
        assert set(trainer.outputs) == {"model", "model_run"}
