import math

import numpy as np
import pytest
import tensorflow as tf
import trainer_testdata

from trainer_module.models import build_model
from trainer_module.optimization import DualOptimizer, WarmupDecay


@pytest.mark.parametrize(
    "decay, step, want",
    [
        ("linear", 0, 0.1),
        ("linear", 9, 1.0),
        ("linear", 10, 1.0),
        ("linear", 60, 0.5),
        ("linear", 110, 0.0),
        ("cosine", 35, 0.5 * (1 + math.cos(math.pi / 4))),
        ("cosine", 60, 0.5),
        ("exponential", 60, 0.01**0.5),
        ("exponential", 110, 0.01),
    ],
)
def test_warmup_then_decay(decay, step, want):
    schedule = WarmupDecay(1.0, warmup_steps=10, total_steps=110, decay=decay, decay_rate=0.01)
    assert float(schedule(step)) == pytest.approx(want, abs=1e-6)


def _knrm_and_optimizer(**overrides):
    cfg = trainer_testdata.small_config(
        learning_rate=1e-2, encoder_learning_rate=1e-4, warmup_steps=2, train_steps=10, **overrides
    )
    model = build_model(cfg, 70, 8, 16)
    return model, DualOptimizer(cfg, model.trainable_variables, cfg.train_steps)


def test_each_optimizer_updates_its_group_with_its_schedule():
    model, opt = _knrm_and_optimizer()
    names = lambda vs: sorted(v.name for v in vs)  # noqa: E731
    assert names(opt.groups.encoder) == ["knrm/embedding/embeddings:0"]
    assert names(opt.groups.rest) == ["knrm/score/bias:0", "knrm/score/kernel:0"]
    # Each optimizer holds Adam slots for (so updates) exactly its own group.
    for optimizer, mine, other in (
        (opt.encoder_optimizer, opt.groups.encoder, opt.groups.rest),
        (opt.optimizer, opt.groups.rest, opt.groups.encoder),
    ):
        assert all(optimizer._var_key(v) in optimizer._index_dict for v in mine)
        assert not any(optimizer._var_key(v) in optimizer._index_dict for v in other)

    before = [v.numpy().copy() for v in opt.trainable_variables]
    for step in range(3):
        opt.apply([tf.ones_like(v) for v in opt.trainable_variables])
        lrs = {k: float(v) for k, v in opt.learning_rates().items()}  # used by that step
        enc = WarmupDecay(1e-4, 2, 10, "linear")(step)
        rest = WarmupDecay(1e-2, 2, 10, "linear")(step)
        assert lrs["encoder_learning_rate"] == pytest.approx(float(enc), rel=1e-5)
        assert lrs["learning_rate"] == pytest.approx(float(rest), rel=1e-5)
        assert float(opt.encoder_optimizer.learning_rate) == pytest.approx(float(enc), rel=1e-5)
    assert int(opt.encoder_optimizer.iterations) == int(opt.optimizer.iterations) == 3
    # First Adam step moves each weight by ~lr: the two groups moved by their own rates.
    emb_delta = np.abs(opt.groups.encoder[0].numpy() - before[0]).max()
    kernel_delta = np.abs(opt.groups.rest[-1].numpy() - before[-1]).max()
    assert emb_delta < 1e-3 < kernel_delta


def test_freeze_patterns_and_weight_decay_exclusions():
    model, opt = _knrm_and_optimizer(freeze_patterns=["score/bias"])
    assert [v.name for v in opt.groups.frozen] == ["knrm/score/bias:0"]
    assert all("bias" not in v.name for v in opt.trainable_variables)
    bias = model.get_layer("score").bias
    before = bias.numpy().copy()
    opt.apply([tf.ones_like(v) for v in opt.trainable_variables])
    np.testing.assert_array_equal(bias.numpy(), before)
    _, opt = _knrm_and_optimizer()
    kernel, bias_var = opt.groups.rest[0], opt.groups.rest[1]
    if "bias" in kernel.name:
        kernel, bias_var = bias_var, kernel
    assert opt.optimizer._use_weight_decay(kernel)
    assert not opt.optimizer._use_weight_decay(bias_var)


def test_clipping_uses_one_global_norm():
    _, opt = _knrm_and_optimizer(clip_norm=1.0)
    grads = [tf.ones_like(v) * 10.0 for v in opt.trainable_variables]
    norm = opt.apply(grads)
    want = math.sqrt(sum(float(tf.size(g)) * 100.0 for g in grads))
    assert float(norm) == pytest.approx(want, rel=1e-5)


def test_freezing_everything_is_an_error():
    with pytest.raises(ValueError, match="freeze_patterns"):
        _knrm_and_optimizer(freeze_patterns=[".*"])


def test_global_norm_sums_repeated_embedding_rows():
    """Embedding gradients repeat rows per looked-up token; the norm is of their sum."""
    _, opt = _knrm_and_optimizer(clip_norm=0.0)
    emb = opt.groups.encoder[0]
    sparse = tf.IndexedSlices(
        tf.ones([3, emb.shape[1]]), tf.constant([5, 5, 7]), tf.constant(emb.shape)
    )
    rest = [tf.zeros_like(v) for v in opt.groups.rest]
    norm = float(opt.apply([sparse] + rest))
    dense = tf.convert_to_tensor(sparse)
    assert norm == pytest.approx(float(tf.norm(dense)), rel=1e-6)  # sqrt(16*4 + 16), not sqrt(48)
