import math

import pytest
import tf_keras as keras
import trainer_testdata

from trainer_module.hardware import precision_policy, set_precision_policy


@pytest.fixture
def restore_policy():
    yield
    set_precision_policy("float32")


CPUINFO = """processor\t: 0
model name\t: a CPU
flags\t\t: fpu sse2 avx2 avx512f {extra}
"""


@pytest.mark.parametrize(
    "extra, model, policy",
    [
        ("avx512_bf16 avx512_vnni", "dual_encoder", "mixed_bfloat16"),
        ("amx_bf16 amx_tile", "bert", "mixed_bfloat16"),
        ("avx512_vnni", "dual_encoder", "float32"),  # no native bfloat16: emulated, slower
        ("avx512_bf16", "knrm", "float32"),  # its exact-match kernel is finer than bfloat16
    ],
)
def test_auto_takes_bfloat16_on_a_cpu_that_has_it(extra, model, policy, tmp_path, monkeypatch):
    """auto on a CPU (no GPU, no TPU): mixed_bfloat16 for a pretrained transformer where the
    processor lists AVX512_BF16 or AMX, float32 where it lacks both and for KNRM. The flags
    are simulated: a cpuinfo file in place of /proc/cpuinfo (tests/conftest.py gives every
    other test a CPU without them, so their figures do not depend on the host)."""
    import tensorflow as tf

    from trainer_module import hardware

    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text(CPUINFO.format(extra=extra))
    monkeypatch.setattr(hardware, "CPUINFO", str(cpuinfo))
    # The checkpoint is not read: only the model's registry entry matters.
    checkpoint = {model: {"checkpoint_dir": str(tmp_path)}} if model != "knrm" else {}
    cfg = trainer_testdata.small_config(model=model, **checkpoint)
    assert precision_policy(cfg, tf.distribute.get_strategy()) == policy
    off = trainer_testdata.small_config(model=model, mixed_precision="off", **checkpoint)
    assert precision_policy(off, tf.distribute.get_strategy()) == "float32"


def test_cpu_flags_reads_the_flags_line(tmp_path):
    from trainer_module import hardware

    path = tmp_path / "cpuinfo"
    path.write_text(CPUINFO.format(extra="avx512_bf16"))
    assert hardware.CPU_BF16_FLAGS & hardware.cpu_flags(str(path)) == {"avx512_bf16"}
    assert hardware.cpu_flags(str(tmp_path / "missing")) == frozenset()


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


def _export_after_two_steps(tmp_path, examples_dir, transform_graph, checkpoint) -> str:
    """run_fn on the tiny dual encoder with 2 training steps (`mixed_precision: auto`): the
    exported SavedModel's directory."""
    from trainer_module.run_fn import run_fn

    cfg = trainer_testdata.small_config(
        model="dual_encoder",
        dual_encoder={"checkpoint_dir": checkpoint},
        train_steps=2,
        learning_rate=1e-4,  # a fine-tuning rate: small_config's 1e-2 scrambles the tiny BERT
        encoder_learning_rate=1e-4,
    )
    args = trainer_testdata.fn_args(tmp_path, examples_dir, transform_graph, cfg, 2)
    run_fn(args)
    return args.serving_model_dir


def test_a_bfloat16_model_serves_float32_vectors(
    bert_checkpoint, examples_dir, transform_graph, tmp_path, monkeypatch, restore_policy
):
    """On a CPU with AVX512_BF16 (simulated) `auto` trains and exports the dual encoder under
    mixed_bfloat16, and says so in the model card's recipe lines; what it serves (vectors,
    scores) is float32, near the same run's on a CPU without bfloat16."""
    import json

    import numpy as np
    import tensorflow as tf

    from rankcore.constants import MODEL_DESCRIPTION_FILE
    from trainer_module import hardware

    cpuinfo = tmp_path / "cpuinfo"
    served = {}
    for flags in ("avx512_bf16", ""):
        cpuinfo.write_text(CPUINFO.format(extra=flags))
        monkeypatch.setattr(hardware, "CPUINFO", str(cpuinfo))
        model_dir = _export_after_two_steps(
            tmp_path / (flags or "none"), examples_dir, transform_graph, bert_checkpoint
        )
        with open(f"{model_dir}/{MODEL_DESCRIPTION_FILE}") as f:
            recipe = json.load(f)
        policy = "mixed_bfloat16" if flags else "float32"
        assert f"precision `{policy}` (trainer.mixed_precision `auto`)" in recipe
        loaded = tf.saved_model.load(model_dir)
        texts = tf.constant(["alpha beta", "gamma delta", "zeta"])
        vectors = loaded.signatures["embed_texts"](text=texts)["embedding"]
        score = loaded.signatures["serving_default"](query=texts, document=texts[::-1])["score"]
        assert vectors.dtype == tf.float32 and score.dtype == tf.float32
        served[policy] = vectors.numpy()
    cosine = (served["mixed_bfloat16"] * served["float32"]).sum(axis=1)
    assert cosine.min() > 0.99 and not np.array_equal(served["mixed_bfloat16"], served["float32"])
