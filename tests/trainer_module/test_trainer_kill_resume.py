import glob
import os
import signal
import subprocess
import sys
import time

import numpy as np
import tensorflow as tf
import trainer_resume_args

from trainer_module.run_fn import run_fn

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))


def _latest(root: str) -> str | None:
    dirs = glob.glob(os.path.join(root, "Trainer", "checkpoints", "*"))
    return tf.train.latest_checkpoint(dirs[0]) if dirs else None


def _checkpoint_values(root: str) -> dict[str, np.ndarray]:
    [ckpt_dir] = glob.glob(os.path.join(root, "Trainer", "checkpoints", "*"))
    reader = tf.train.load_checkpoint(tf.train.latest_checkpoint(ckpt_dir))
    names = [n for n in reader.get_variable_to_shape_map() if "iterator" not in n]
    return {n: reader.get_tensor(n) for n in names if "_CHECKPOINTABLE_OBJECT_GRAPH" not in n}


def test_sigkilled_trainer_resumes_to_identical_weights(examples_dir, transform_graph, tmp_path):
    killed_root = str(tmp_path / "killed")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([HERE, REPO]))
    log = open(tmp_path / "child.log", "w")  # a PIPE could fill up and block the child
    child = subprocess.Popen(
        [
            sys.executable,
            os.path.join(HERE, "killable_run.py"),
            examples_dir,
            transform_graph,
            killed_root,
            "1",
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=log,
        text=True,
    )
    try:
        deadline = time.time() + 240
        while not _latest(killed_root):
            assert child.poll() is None, open(tmp_path / "child.log").read()[-3000:]
            assert time.time() < deadline, "no checkpoint within 240 s"
            time.sleep(0.2)
    finally:
        if child.poll() is None:
            child.send_signal(signal.SIGKILL)
        child.wait()
        log.close()
    assert child.returncode == -signal.SIGKILL
    latest = _latest(killed_root)
    assert not latest.endswith(f"ckpt-{trainer_resume_args.STEPS}")  # killed mid-run
    assert not os.path.exists(f"{killed_root}/Trainer/model/1/Format-Serving")

    # The orchestrator retries with a new execution id; the same fingerprint resumes.
    resumed = run_fn(trainer_resume_args.fn_args(examples_dir, transform_graph, killed_root, 2))
    straight_root = str(tmp_path / "straight")
    straight = run_fn(trainer_resume_args.fn_args(examples_dir, transform_graph, straight_root, 1))

    assert resumed.steps == straight.steps == trainer_resume_args.STEPS
    # Where the resumed run started: retraining from step 0 ends with the same weights, so the
    # weights alone cannot show that the killed run was continued.
    killed_at = int(latest.rsplit("-", 1)[1])
    assert 0 < killed_at < trainer_resume_args.STEPS
    assert straight.resumed_from is None
    assert resumed.resumed_from is not None, "the retried run did not resume (started at step 0)"
    assert resumed.resumed_from["step"] == killed_at
    # Optimizer state: Adam's iteration count (its bias correction and schedule) came back.
    iterations = resumed.resumed_from["optimizer_iterations"]
    assert iterations and set(iterations.values()) == {killed_at}, iterations
    # Data position: the session trained only steps killed_at+1.., each on the batch the
    # uninterrupted run trained on at that step (same weights + same batch = same loss; a
    # restarted input iterator would feed the first batches again).
    steps = [int(s) for s, _ in resumed.loss_history]
    assert steps == list(range(killed_at + 1, trainer_resume_args.STEPS + 1))
    straight_loss = {int(s): loss for s, loss in straight.loss_history}
    np.testing.assert_allclose(
        [loss for _, loss in resumed.loss_history],
        [straight_loss[s] for s in steps],
        rtol=1e-6,
    )
    assert (resumed.best_step, resumed.best_metric) == (straight.best_step, straight.best_metric)
    a, b = _checkpoint_values(killed_root), _checkpoint_values(straight_root)
    assert a.keys() == b.keys() and len(a) > 10
    for name in a:
        np.testing.assert_array_equal(a[name], b[name], err_msg=name)
