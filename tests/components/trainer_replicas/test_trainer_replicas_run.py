"""The Trainer as a 2-replica TFJob on the demo examples, with the local operator standing for the
Kubeflow Training Operator: the KFP task's executor (TFJobTrainerExecutor) stages the inputs,
builds the TFJob and creates it through the CustomObjectsApi; the operator runs the Chief and the
Worker as processes with the TF_CONFIG it would set, each the replica entrypoint, i.e. TFX's
Trainer GenericExecutor and our run_fn under MultiWorkerMirroredStrategy.

Checked against one worker (the same executor input, no TF_CONFIG, the same global batch):
identical weights on both replicas, the model equal to the one worker's to float tolerance,
only the chief's export, and a job whose Worker is SIGKILLed mid-training restarting (restartPolicy
OnFailure) and resuming from the chief's checkpoint to the same model.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import replicas_testlib as lib
from local_operator import LocalTrainingOperator

STEPS = 20
SETTINGS = [
    "collection.demo.num_documents=200",
    "collection.demo.num_queries=30",
    "datagen.vocab.size=500",
    "datagen.candidates_depth=30",
    "datagen.sampling.samples_per_query=16",
    f"trainer.train_steps={STEPS}",
    "trainer.warmup_steps=5",
    "trainer.batch_size=8",
    "trainer.checkpoint_every=5",
    "trainer.validate_every=10",
    "trainer.log_every=1",
    "trainer.keep_finished_checkpoints=true",  # the tests compare the finished checkpoints
    "runner.kubeflow.trainer_replicas.count=2",
    "runner.kubeflow.trainer_replicas.backoff_limit=2",
]
RTOL, ATOL = 1e-4, 1e-5


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """The demo examples (RankingDataGen on the small demo collection) and the one-worker run."""
    work = tmp_path_factory.mktemp("replicas")
    staging = f"runner.kubeflow.trainer_replicas.staging_dir={work / 'staging'}"
    config = lib.demo_config(work / "outputs", [*SETTINGS, staging])
    data = lib.run_datagen(config, work / "datagen")
    single_root = work / "single"
    inputs, outputs, props = lib.trainer_input(config, data, single_root)
    lib.run_one_worker(inputs, outputs, props, work / "single.log")
    [single_ckpt] = lib.checkpoint_dirs(str(single_root / "Trainer"))
    return {
        "config": config,
        "data": data,
        "work": work,
        "single": lib.checkpoint_values(single_ckpt),
        "single_results": lib.train_results(outputs["model_run"][0].uri),
    }


def _replicated(demo: dict, name: str, operator_kw: dict | None = None, kill: bool = False):
    work = demo["work"] / name
    work.mkdir()
    config = demo["config"]
    config.runner.kubeflow.trainer_replicas.staging_dir = str(work / "staging")
    inputs, outputs, props = lib.trainer_input(config, demo["data"], work / "task")
    operator = LocalTrainingOperator(work, env=lib.replica_env(), **(operator_kw or {}))
    if kill:

        def chief_checkpointed() -> bool:
            dirs = lib.checkpoint_dirs(str(next(iter((work / "staging").glob("*/Trainer")), "")))
            return bool(dirs) and 0 < lib.latest_step(dirs[0]) < STEPS

        operator.kill_when(chief_checkpointed, "Worker", 0)
    lib.run_replicated(inputs, outputs, props, operator)
    [trainer_root] = (work / "staging").glob("*/Trainer")
    return operator, outputs, trainer_root


def _check_same_model(demo: dict, trainer_root: Path, outputs: dict) -> dict:
    chief_dir, worker_dir = lib.checkpoint_dirs(str(trainer_root))
    assert worker_dir == f"{chief_dir}.worker-worker-0"
    assert lib.latest_step(chief_dir) == STEPS
    chief, worker = lib.checkpoint_values(chief_dir), lib.checkpoint_values(worker_dir)
    assert chief.keys() == worker.keys() == demo["single"].keys() and len(chief) > 5
    for name in chief:  # synchronous training: identical replicas
        np.testing.assert_array_equal(chief[name], worker[name], err_msg=name)
    for name in chief:  # the same global batches as one worker: the same model
        np.testing.assert_allclose(
            chief[name], demo["single"][name], rtol=RTOL, atol=ATOL, err_msg=name
        )
    # Only the chief exported, and the task's outputs are the chief's.
    exports = sorted(p.parent for p in trainer_root.rglob("saved_model.pb"))
    assert exports == [trainer_root / "model" / "chief" / "Format-Serving"], exports
    model = Path(outputs["model"][0].uri)
    assert (model / "Format-Serving" / "saved_model.pb").exists()
    results = lib.train_results(outputs["model_run"][0].uri)
    single = demo["single_results"]
    assert results["steps"] == single["steps"] == STEPS
    assert results["best_step"] == single["best_step"]
    assert abs(results["final_metric"] - single["final_metric"]) < 1e-4
    return results


def test_two_replicas_train_the_one_worker_model_and_only_the_chief_exports(demo: dict) -> None:
    operator, outputs, trainer_root = _replicated(demo, "straight")
    [(verb, name)] = [c for c in operator.calls if c[0] == "create"]
    assert ("delete", name) not in operator.calls  # a finished job is left to its TTL
    job = operator.jobs[name]
    assert job["status"]["conditions"][-1]["type"] == "Succeeded"
    assert job["status"]["replicaStatuses"] == {
        "Chief": {"succeeded": 1},
        "Worker": {"succeeded": 1},
    }
    results = _check_same_model(demo, trainer_root, outputs)
    assert results.get("resumed_from") is None
    chief_log = next(demo["work"].glob("straight/*-chief-0-0.log")).read_text()
    assert "strategy multi_worker with 2 replica(s)" in chief_log


def test_a_killed_worker_restarts_the_job_which_resumes_to_the_same_model(demo: dict) -> None:
    def slowed(argv: list[str]) -> list[str]:
        assert argv[1:3] == ["-m", "components.trainer_replicas.replica"], argv
        return [argv[0], str(lib.HERE / "slow_replica.py"), *argv[3:]]

    operator, outputs, trainer_root = _replicated(demo, "killed", {"command": slowed}, kill=True)
    assert operator.killed == [("Worker", 0, 0)], "the worker was not killed mid-run"
    [name] = operator.jobs
    assert operator.attempts[name] == 1  # restarted once, as restartPolicy OnFailure does
    worker_log = next(demo["work"].glob("killed/*-worker-0-0.log"))
    assert worker_log.exists()
    results = _check_same_model(demo, trainer_root, outputs)
    resumed = results["resumed_from"]
    assert resumed is not None, "the restarted job trained from step 0"
    assert 0 < resumed["step"] < STEPS
    steps = [int(s) for s, _ in results["loss_history"]]
    assert steps == list(range(resumed["step"] + 1, STEPS + 1))
    single_loss = {int(s): loss for s, loss in demo["single_results"]["loss_history"]}
    np.testing.assert_allclose(
        [loss for _, loss in results["loss_history"]], [single_loss[s] for s in steps], rtol=1e-4
    )
