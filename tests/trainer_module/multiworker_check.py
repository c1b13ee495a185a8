"""Subprocess body for the multi-worker test: one of two workers over loopback (TF_CONFIG).

Usage: multiworker_check.py EXAMPLES TRANSFORM_GRAPH WORK_DIR PORT0 PORT1 TASK_INDEX
Writes WORK_DIR/worker<TASK_INDEX>.npz with the final weights and losses.
"""

import json
import os
import sys

examples, transform_graph, work, port0, port1, index = sys.argv[1:7]
os.environ["TF_CONFIG"] = json.dumps(
    {
        "cluster": {"worker": [f"localhost:{port0}", f"localhost:{port1}"]},
        "task": {"type": "worker", "index": int(index)},
    }
)

import numpy as np  # noqa: E402
import trainer_testdata  # noqa: E402

from trainer_module.hardware import make_strategy  # noqa: E402
from trainer_module.training import is_chief  # noqa: E402

cfg = trainer_testdata.small_config(
    strategy="multi_worker", batch_size=8, train_steps=4, checkpoint_every=2, validate_every=2
)
strategy = make_strategy(cfg)
assert strategy.num_replicas_in_sync == 2
controller = trainer_testdata.make_controller(cfg, examples, transform_graph, work, strategy)
result = controller.train()
np.savez(
    os.path.join(work, f"worker{index}.npz"),
    chief=np.array(is_chief(strategy)),
    losses=np.array([loss for _, loss, _ in controller.history]),
    metric=np.array(result.final_metric),
    **{f"w{i}": v.numpy() for i, v in enumerate(controller.model.variables)},
)
