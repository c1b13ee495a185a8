import os
import socket
import subprocess
import sys

import numpy as np
import tensorflow as tf

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))


def _free_ports(n: int) -> list[int]:
    socks = [socket.socket() for _ in range(n)]
    for s in socks:
        s.bind(("localhost", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


def test_two_workers_over_loopback(examples_dir, transform_graph, tmp_path):
    ports = _free_ports(2)
    # One thread pool each: two TF processes share the CI machine's cores.
    env = dict(
        os.environ,
        PYTHONPATH=os.pathsep.join([HERE, REPO]),
        TF_NUM_INTRAOP_THREADS="1",
        TF_NUM_INTEROP_THREADS="1",
    )
    logs = [open(tmp_path / f"worker{i}.log", "w") for i in range(2)]
    procs = [
        subprocess.Popen(
            [sys.executable, os.path.join(HERE, "multiworker_check.py"), examples_dir,
             transform_graph, str(tmp_path), str(ports[0]), str(ports[1]), str(i)],
            env=env, stdout=logs[i], stderr=logs[i],
        )
        for i in range(2)
    ]  # fmt: skip
    try:
        codes = [p.wait(timeout=240) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        for f in logs:
            f.close()
    for i, code in enumerate(codes):
        assert code == 0, (tmp_path / f"worker{i}.log").read_text()[-4000:]
    w0, w1 = (np.load(tmp_path / f"worker{i}.npz") for i in range(2))
    assert bool(w0["chief"]) and not bool(w1["chief"])
    weights = sorted(k for k in w0.files if k.startswith("w"))
    for key in weights:  # synchronous training: identical replicas
        np.testing.assert_array_equal(w0[key], w1[key], err_msg=key)
    np.testing.assert_array_equal(w0["losses"], w1["losses"])
    # Only the chief's checkpoints are kept where resume looks for them.
    assert tf.train.latest_checkpoint(str(tmp_path / "ckpt")).endswith("ckpt-4")
