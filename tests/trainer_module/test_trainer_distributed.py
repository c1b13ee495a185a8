import os
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))


def test_mirrored_two_cpus_matches_one_device_and_resumes_exactly(
    examples_dir, transform_graph, tmp_path
):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([HERE, REPO]))
    proc = subprocess.run(
        [
            sys.executable,
            os.path.join(HERE, "mirrored_check.py"),
            examples_dir,
            transform_graph,
            str(tmp_path),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    data = np.load(tmp_path / "weights.npz")
    singles = sorted(k for k in data.files if k.startswith("single_") and k[7:].isdigit())
    assert singles
    for key in singles:
        np.testing.assert_allclose(
            data["mirrored_" + key[7:]], data[key], rtol=1e-4, atol=1e-5, err_msg=key
        )
    np.testing.assert_allclose(data["mirrored_losses"], data["single_losses"], rtol=1e-4)
    # Multi-replica iterators are not checkpointable: resume fast-forwards the input
    # pipeline, and must still end exactly where the uninterrupted mirrored run did.
    for key in singles:
        i = key[7:]
        np.testing.assert_array_equal(data["resumed_" + i], data["mirrored_" + i], err_msg=i)
    # Where it resumed (retraining from step 0 would end with the same weights too): at the
    # step-4 checkpoint, with the optimizers' iteration counts restored...
    assert int(data["mirrored_resumed_step"]) == -1
    assert int(data["resumed_resumed_step"]) == 4, "the resumed run started at step 0"
    iterations = data["resumed_resumed_iterations"]
    assert len(iterations) and set(iterations.tolist()) == {4}, iterations
    # ...and the fast-forwarded input: steps 5..8 ran, each on the batch the uninterrupted
    # run trained on at that step (same weights + same batch = same loss).
    np.testing.assert_array_equal(data["resumed_steps"], [5, 6, 7, 8])
    np.testing.assert_allclose(data["resumed_losses"], data["mirrored_losses"][4:], rtol=1e-6)
