"""rankcore/fusion.py on hand-computed values: the alpha a model carries is the alpha its
fused scores use (the Trainer tunes it, the evaluator and the SavedModel apply it)."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from rankcore import fusion, ranking

# One query, three candidates. minmax(reranker) = (0, 0.5, 1), minmax(first stage) = (1, 0.5, 0).
RERANKER = {"q": {"a": 1.0, "b": 2.0, "c": 3.0}}
FIRST_STAGE = {"q": {"a": 30.0, "b": 20.0, "c": 10.0}}


@pytest.mark.parametrize(
    ("alpha", "want"),
    [
        (0.0, {"a": 1.0, "b": 0.5, "c": 0.0}),  # the first stage's ranking
        (0.25, {"a": 0.75, "b": 0.5, "c": 0.25}),  # 0.25 * (0, .5, 1) + 0.75 * (1, .5, 0)
        (0.8, {"a": 0.2, "b": 0.5, "c": 0.8}),
        (1.0, {"a": 0.0, "b": 0.5, "c": 1.0}),  # the reranker's ranking
    ],
)
def test_fuse_run_weights_reranker_by_alpha(alpha: float, want: dict[str, float]) -> None:
    got = fusion.fuse_run(RERANKER, FIRST_STAGE, alpha)["q"]
    assert got == pytest.approx(want, abs=1e-12)


def test_in_graph_fusion_uses_the_same_alpha() -> None:
    r, fs = tf.constant([1.0, 2.0, 3.0]), tf.constant([30.0, 20.0, 10.0])
    fused = ranking.fuse(r, fs, 0.25, ranking.tensorflow())
    assert fused.dtype == tf.float64
    np.testing.assert_allclose(fused.numpy(), fusion.fuse(r.numpy(), fs.numpy(), 0.25))
    # Equal scores normalise to 0 in the graph too; an empty list stays empty.
    flat = ranking.minmax(tf.constant([2.0, 2.0]), ranking.tensorflow())
    assert flat.numpy().tolist() == [0.0, 0.0] == fusion.minmax(np.array([2.0, 2.0])).tolist()
    assert fusion.minmax(np.array([])).shape == (0,)


def test_tune_alpha_picks_the_best_grid_alpha_larger_on_ties() -> None:
    # Metric: the fused score of "a" minus that of "c" = 1 - 2 alpha; best at alpha 0.
    def metric(run):
        return run["q"]["a"] - run["q"]["c"]

    alpha, grid = fusion.tune_alpha(RERANKER, FIRST_STAGE, metric)
    assert alpha == 0.0 and grid[0.0] == pytest.approx(1.0) and grid[1.0] == pytest.approx(-1.0)
    # A flat metric ties everywhere: the larger alpha (more of the reranker) wins.
    assert fusion.tune_alpha(RERANKER, FIRST_STAGE, lambda run: 0.5)[0] == 1.0


@pytest.mark.parametrize(("mode", "want"), [("none", None), ("fixed", 0.3), ("tuned", 0.65)])
def test_fusion_alpha_by_mode(mode: str, want: float | None) -> None:
    assert fusion.fusion_alpha(mode, 0.3, 0.65) == want


def test_tune_alpha_fuses_each_alpha_as_fuse_run_does_to_the_bit() -> None:
    """tune_alpha normalises each list once for the whole grid: the run it scores at each
    alpha is fuse_run's, to the bit."""
    rng = np.random.default_rng(0)
    reranker = {f"q{i}": {f"d{j}": float(rng.normal()) for j in range(i + 1)} for i in range(5)}
    first = {q: {d: float(np.round(rng.normal(), 1)) for d in docs} for q, docs in reranker.items()}
    seen: list[dict] = []
    alpha, grid = fusion.tune_alpha(reranker, first, lambda run: seen.append(run) or 0.0)
    assert len(seen) == len(fusion.ALPHA_GRID) == len(grid)
    for a, run in zip(fusion.ALPHA_GRID, seen):
        assert run == fusion.fuse_run(reranker, first, a)
