"""Paired significance tests for comparing two runs query by query."""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping, Sequence

import numpy as np
from scipy import stats

__all__ = [
    "compare_per_query",
    "min_randomization_p",
    "paired_ttest",
    "randomization_test",
    "win_tie_loss",
]

# Sign-flip matrices are built in chunks of at most this many entries (int8), so
# 10,000 trials over 10,000 queries never needs a 10^8-entry array at once.
_CHUNK_ENTRIES = 1 << 22


def _paired(a: Sequence[float], b: Sequence[float]) -> tuple[np.ndarray, np.ndarray]:
    x = np.asarray(a, dtype=np.float64)
    y = np.asarray(b, dtype=np.float64)
    if x.ndim != 1 or x.shape != y.shape:
        raise ValueError(f"paired samples need equal 1-d shapes, got {x.shape} and {y.shape}")
    if x.size == 0:
        raise ValueError("paired samples are empty")
    return x, y


def paired_ttest(a: Sequence[float], b: Sequence[float]) -> float:
    """Two-sided paired t-test p-value (scipy.stats.ttest_rel).

    Identical samples give 1.0 rather than scipy's NaN (no difference, no evidence);
    a single pair gives NaN (no variance estimate).
    """
    x, y = _paired(a, b)
    if np.array_equal(x, y):
        return 1.0
    if x.size < 2:
        return math.nan
    with warnings.catch_warnings():
        # Constant non-zero differences: scipy warns, then correctly returns p = 0.
        warnings.simplefilter("ignore", RuntimeWarning)
        return float(stats.ttest_rel(x, y).pvalue)


def randomization_test(
    a: Sequence[float], b: Sequence[float], trials: int = 10000, seed: int = 0
) -> float:
    """Two-sided paired randomization (sign-flip) test of mean(a - b) == 0.

    Each trial flips the sign of every per-query difference with probability 1/2;
    p = (1 + #trials with |mean| >= observed |mean|) / (1 + trials), which counts the
    observed assignment and so is never 0. Deterministic for a given seed.
    """
    if trials < 1:
        raise ValueError(f"trials must be positive, got {trials}")
    x, y = _paired(a, b)
    diff = x - y
    n = diff.size
    observed = abs(diff.sum()) / n
    # Sums of the same terms in another order may differ in the last bits.
    threshold = observed - 1e-12 * max(1.0, observed)
    rng = np.random.default_rng(seed)
    chunk = max(1, _CHUNK_ENTRIES // n)
    hits = 0
    done = 0
    while done < trials:
        size = min(chunk, trials - done)
        signs = rng.integers(0, 2, size=(size, n), dtype=np.int8) * np.int8(2) - np.int8(1)
        hits += int(np.count_nonzero(np.abs(signs @ diff) / n >= threshold))
        done += size
    return (hits + 1) / (trials + 1)


def min_randomization_p(n: int) -> float:
    """The smallest two-sided p the exact paired sign-flip test can give over `n` queries: 2/2^n.

    Of the 2^n equally likely sign assignments, the observed one and its mirror image always
    reach the observed |mean|, so no outcome gives less (fewer when some differences are 0).
    With 5 queries that is 0.0625: a significance level of 0.05 can never be met, whatever the
    model does, and the report says so (report.significance_warnings). randomization_test
    samples the assignments, so its p scatters around the exact one by about
    sqrt(p / trials).
    """
    if n < 1:
        return 1.0
    return min(1.0, math.ldexp(1.0, 1 - n))  # 2^(1-n), no overflow for large n


def win_tie_loss(a: Sequence[float], b: Sequence[float], eps: float = 1e-9) -> tuple[int, int, int]:
    """(wins, ties, losses) of `a` against `b`; |a - b| <= eps counts as a tie."""
    x, y = _paired(a, b)
    diff = x - y
    wins = int(np.count_nonzero(diff > eps))
    losses = int(np.count_nonzero(diff < -eps))
    return wins, x.size - wins - losses, losses


def compare_per_query(
    per_query_a: Mapping[str, Mapping[str, float]],
    per_query_b: Mapping[str, Mapping[str, float]],
    measures: Sequence[str],
    *,
    trials: int = 10000,
    seed: int = 0,
    eps: float = 1e-9,
) -> dict[str, dict[str, float]]:
    """Compare run B against baseline A on each measure, paired by query.

    Both must cover the same queries (evaluate with compute_metrics(complete=True) so
    that a query one run misses counts 0). For each measure: n, mean_a, mean_b,
    mean_delta (B - A), wins/ties/losses (of B against A), ttest_p, randomization_p.
    """
    if set(per_query_a) != set(per_query_b):
        only_a = sorted(set(per_query_a) - set(per_query_b))
        only_b = sorted(set(per_query_b) - set(per_query_a))
        raise ValueError(f"runs cover different queries: only in A {only_a}, only in B {only_b}")
    qids = sorted(per_query_a)
    out: dict[str, dict[str, float]] = {}
    for measure in measures:
        a = np.array([per_query_a[q][measure] for q in qids], dtype=np.float64)
        b = np.array([per_query_b[q][measure] for q in qids], dtype=np.float64)
        wins, ties, losses = win_tie_loss(b, a, eps)
        out[measure] = {
            "n": len(qids),
            "mean_a": float(a.mean()),
            "mean_b": float(b.mean()),
            "mean_delta": float((b - a).mean()),
            "wins": wins,
            "ties": ties,
            "losses": losses,
            "ttest_p": paired_ttest(b, a),
            "randomization_p": randomization_test(b, a, trials=trials, seed=seed),
        }
    return out
