"""Subprocess body for test_trainer_distributed: train on 1 device, then on 2 logical CPUs.

Run as a script so the logical-device split does not leak into the pytest process.
Usage: mirrored_check.py EXAMPLES TRANSFORM_GRAPH WORK_DIR -> WORK_DIR/weights.npz
"""

import os
import sys

import tensorflow as tf

cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(
    cpu, [tf.config.LogicalDeviceConfiguration(), tf.config.LogicalDeviceConfiguration()]
)

import numpy as np  # noqa: E402
import trainer_testdata  # noqa: E402

from trainer_module.hardware import make_strategy  # noqa: E402


def main(examples: str, transform_graph: str, work: str) -> None:
    out = {}
    for name in ("single", "mirrored", "resumed"):
        cfg = trainer_testdata.small_config(
            strategy="auto" if name == "single" else "mirrored",
            batch_size=8,
            train_steps=8,
            checkpoint_every=4,
            validate_every=0,
        )
        strategy = make_strategy(cfg)
        assert strategy.num_replicas_in_sync == (1 if name == "single" else 2)
        if name == "resumed":  # killed after step 6 (checkpoint at 4), then re-run
            trainer_testdata.make_controller(
                cfg, examples, transform_graph, os.path.join(work, name), strategy
            ).train(stop_at=6)
        controller = trainer_testdata.make_controller(
            cfg, examples, transform_graph, os.path.join(work, name), strategy
        )
        result = controller.train()
        for i, v in enumerate(controller.model.variables):
            out[f"{name}_{i}"] = v.numpy()
        out[f"{name}_metric"] = np.array(result.final_metric)
        out[f"{name}_losses"] = np.array([loss for _, loss, _ in controller.history])
        out[f"{name}_steps"] = np.array([step for step, _, _ in controller.history])
        resumed = result.resumed_from or {"step": -1, "optimizer_iterations": {}}
        out[f"{name}_resumed_step"] = np.array(resumed["step"])
        out[f"{name}_resumed_iterations"] = np.array(
            sorted(resumed["optimizer_iterations"].values()), dtype=np.int64
        )
    np.savez(os.path.join(work, "weights.npz"), **out)


if __name__ == "__main__":
    main(*sys.argv[1:4])
