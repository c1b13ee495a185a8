import math

import pytest
import tf_keras as keras
import trainer_testdata

from trainer_module.hardware import precision_policy, set_precision_policy


@pytest.fixture
def restore_policy():
    yield
    set_precision_policy("float32")


def test_auto_is_float32_on_cpu():
    import tensorflow as tf

    cfg = trainer_testdata.small_config()
    assert precision_policy(cfg, tf.distribute.get_strategy()) == "float32"


@pytest.mark.parametrize("mode", ["bfloat16", "float16"])
def test_mixed_precision_smoke(mode, restore_policy, examples_dir, transform_graph, tmp_path):
    """The mixed-precision paths (float16 with dynamic loss scaling) run and stay finite."""
    import tensorflow as tf

    cfg = trainer_testdata.small_config(mixed_precision=mode, train_steps=3, validate_every=0)
    set_precision_policy(precision_policy(cfg, tf.distribute.get_strategy()))
    assert keras.mixed_precision.global_policy().compute_dtype == mode
    controller = trainer_testdata.make_controller(cfg, examples_dir, transform_graph, str(tmp_path))
    controller.train()
    assert all(math.isfinite(loss) for _, loss, _ in controller.history)
    assert controller.model.variables[0].dtype == tf.float32  # master weights stay float32
