import numpy as np
import pytest
import tensorflow as tf

from trainer_module import losses
from trainer_module.config import TrainerConfig

SCORES = tf.constant([[2.0, 0.5, 1.0], [0.0, 1.0, -1.0]])
LABELS = tf.constant([[1.0, 0.0, 0.0], [2.0, 0.0, 0.0]])


def test_pairwise_hinge():
    got = losses.pairwise_hinge(SCORES, LABELS, margin=1.0).numpy()
    # group 0: max(0, 1-1.5), max(0, 1-1.0) -> mean 0; group 1: 1+1=2, max(0,1-1)=0 -> 1
    np.testing.assert_allclose(got, [0.0, 1.0])


def test_pairwise_logistic_is_ranknet():
    got = losses.pairwise_logistic(SCORES, LABELS).numpy()
    want0 = np.mean([np.log1p(np.exp(-1.5)), np.log1p(np.exp(-1.0))])
    want1 = np.mean([np.log1p(np.exp(1.0)), np.log1p(np.exp(-1.0))])
    np.testing.assert_allclose(got, [want0, want1], rtol=1e-6)


def test_pointwise_sigmoid_binary_and_graded():
    s, y = tf.constant([[0.3], [-0.2]]), tf.constant([[2.0], [0.0]])
    sig = lambda x: 1 / (1 + np.exp(-x))  # noqa: E731
    binary = losses.pointwise_sigmoid(s, y).numpy()
    np.testing.assert_allclose(binary, [-np.log(sig(0.3)), -np.log(1 - sig(-0.2))], rtol=1e-6)
    graded = losses.pointwise_sigmoid(s, y, graded=True, max_label=4.0).numpy()
    t = 0.5
    want = -(t * np.log(sig(0.3)) + (1 - t) * np.log(1 - sig(0.3)))
    np.testing.assert_allclose(graded[0], want, rtol=1e-6)


def test_listwise_softmax_one_positive():
    got = losses.listwise_softmax(SCORES, LABELS).numpy()
    s = SCORES.numpy()
    want = [-(s[i, 0] - np.log(np.exp(s[i]).sum())) for i in range(2)]
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_groups_without_pairs_or_positives_contribute_zero():
    zeros = tf.zeros([1, 3])
    assert losses.pairwise_hinge(SCORES[:1], zeros).numpy()[0] == 0
    assert losses.listwise_softmax(SCORES[:1], zeros).numpy()[0] == 0


@pytest.mark.parametrize(
    "name", ["pairwise_hinge", "pairwise_logistic", "pointwise_sigmoid", "listwise_softmax"]
)
def test_get_loss_shapes(name):
    fn = losses.get_loss(TrainerConfig(loss=name))
    assert fn(SCORES, LABELS).shape == [2]


def test_reduce_loss_divides_by_global_count():
    per_example = tf.constant([1.0, 3.0])
    assert float(losses.reduce_loss(per_example, tf.constant(8))) == pytest.approx(0.5)
    assert float(losses.reduce_loss(per_example)) == pytest.approx(2.0)
