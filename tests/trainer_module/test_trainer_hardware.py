"""Strategy selection: `strategy: auto` trains with MultiWorkerMirroredStrategy when TF_CONFIG
names several tasks (the Trainer run as replicas by a TFJob or a Vertex AI CustomJob)."""

import json

import tensorflow as tf
import trainer_testdata

from trainer_module import hardware


def _tf_config(cluster: dict) -> dict[str, str]:
    return {"TF_CONFIG": json.dumps({"cluster": cluster, "task": {"type": "chief", "index": 0}})}


def test_tf_config_tasks_counts_chief_and_workers() -> None:
    assert hardware.tf_config_tasks({}) == 0
    assert hardware.tf_config_tasks({"TF_CONFIG": ""}) == 0
    assert hardware.tf_config_tasks(_tf_config({"chief": ["a:1"]})) == 1
    assert hardware.tf_config_tasks(_tf_config({"chief": ["a:1"], "worker": ["b:1"]})) == 2
    # A parameter server or an evaluator trains no replica of its own.
    cluster = {"worker": ["a:1", "b:1"], "ps": ["c:1"], "evaluator": ["d:1"]}
    assert hardware.tf_config_tasks(_tf_config(cluster)) == 2


def test_auto_picks_multi_worker_from_tf_config(monkeypatch) -> None:
    made = []

    class FakeMultiWorker:
        num_replicas_in_sync = 2

        def __init__(self) -> None:
            made.append(self)

    monkeypatch.setattr(tf.distribute, "MultiWorkerMirroredStrategy", FakeMultiWorker)
    cfg = trainer_testdata.small_config()
    assert cfg.strategy == "auto"
    monkeypatch.setenv("TF_CONFIG", _tf_config({"chief": ["a:1"], "worker": ["b:1"]})["TF_CONFIG"])
    assert isinstance(hardware.make_strategy(cfg), FakeMultiWorker)
    # One task (e.g. a single-replica Vertex job sets TF_CONFIG too): the default strategy.
    monkeypatch.setenv("TF_CONFIG", _tf_config({"chief": ["a:1"]})["TF_CONFIG"])
    assert not isinstance(hardware.make_strategy(cfg), FakeMultiWorker)
    assert len(made) == 1
