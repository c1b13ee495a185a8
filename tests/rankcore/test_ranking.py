"""rankcore/ranking.py: one implementation on two backends. The TensorFlow backend, traced once
for any list length as the served graph is, computes what the numpy backend computes (the
Trainer's and the evaluator's), to float64 rounding, for every kind of feedback setting."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from rankcore import feedback, ranking

SETTINGS = [
    None,
    feedback.setting(3, 0.5),
    feedback.setting(2, 2.0, 3, 0.6),
    feedback.setting(0, 0.0, 5, 0.3),
    feedback.setting(3, 1.0, source="fused"),
    feedback.setting(10, 1.0, 5, 0.3, source="fused"),
]


def _graph(setting: dict | None, alpha: float):
    """rank_list on the TensorFlow backend, one trace for any list length."""
    return tf.function(
        lambda q, d, f: ranking.rank_list(q, d, f, setting, alpha, ranking.tensorflow()),
        input_signature=[
            tf.TensorSpec([None], tf.float32),
            tf.TensorSpec([None, None], tf.float32),
            tf.TensorSpec([None], tf.float64),
        ],
        autograph=False,
    )


@pytest.mark.parametrize("setting", SETTINGS, ids=feedback.describe)
def test_the_graph_ranks_as_numpy(setting):
    rng = np.random.default_rng(3)
    graph = _graph(setting, 0.3)
    # Lists of 1, 2 and 12 candidates; in the last, 4 without a first-stage score (last in the
    # first stage's order: never feedback documents) and two equal candidates (a tie among
    # neighbours: the earlier first).
    for n, scored in ((1, 1), (2, 2), (12, 8)):
        query = rng.normal(size=6).astype(np.float32)
        docs = rng.normal(size=(n, 6)).astype(np.float32)
        if n > 4:
            docs[4] = docs[2]
        first = np.sort(rng.normal(size=scored))[::-1].copy()
        want = ranking.rank_list(query, docs, first, setting, 0.3)
        got = graph(query, docs, first).numpy()
        assert got.dtype == np.float64 and want.dtype == np.float64
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-12)


def test_fusion_and_normalisation_in_the_graph():
    tf_ops = ranking.tensorflow()
    scores = np.array([0.5, -1.0, 3.0, 3.0])
    first = np.array([10.0, 20.0, 5.0, 1.0])
    for alpha in (0.0, 0.35, 1.0):
        np.testing.assert_allclose(
            ranking.fuse(tf.constant(scores), tf.constant(first), alpha, tf_ops).numpy(),
            ranking.fuse(scores, first, alpha),
            rtol=0,
            atol=1e-15,
        )
    rows = np.array([[3.0, 4.0], [0.0, 0.0]])  # an all-zero vector stays zero
    assert ranking.normalise(rows).tolist() == [[0.6, 0.8], [0.0, 0.0]]
    assert ranking.normalise(tf.constant(rows), tf_ops).numpy().tolist() == [[0.6, 0.8], [0, 0]]
