"""significance.py against scipy and cases with known answers."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy import stats

from components.ranking_evaluator.significance import (
    compare_per_query,
    paired_ttest,
    randomization_test,
    win_tie_loss,
)


@pytest.fixture()
def scores() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(7)
    a = rng.random(50)
    return a, np.clip(a + rng.normal(0.03, 0.1, 50), 0, 1)


def exact_sign_flip_p(a: np.ndarray, b: np.ndarray) -> float:
    """All 2^n sign patterns: the exact two-sided paired permutation p-value."""
    d = np.asarray(a) - np.asarray(b)
    observed = abs(d.mean())
    patterns = np.array(list(itertools.product((1, -1), repeat=len(d))))
    return float(np.mean(np.abs((patterns * d).mean(axis=1)) >= observed - 1e-12))


# --------------------------------------------------------------------------- t-test


def test_ttest_matches_scipy(scores: tuple[np.ndarray, np.ndarray]) -> None:
    a, b = scores
    assert paired_ttest(a, b) == pytest.approx(stats.ttest_rel(a, b).pvalue, rel=1e-12)
    assert paired_ttest(a, b) == paired_ttest(b, a)  # two-sided


def test_ttest_known_cases() -> None:
    assert paired_ttest([0.1, 0.5, 0.9], [0.1, 0.5, 0.9]) == 1.0  # scipy would say NaN
    assert paired_ttest([0.75, 1.5, 2.25], [0.25, 1.0, 1.75]) == 0.0  # exactly constant shift
    assert math.isnan(paired_ttest([0.3], [0.1]))
    # d = 1.5, 2.5, 2.5, 1.5: mean 2, sd sqrt(1/3), t = 2 / (sd / sqrt(4)) = 4 sqrt(3), 3 df.
    p = paired_ttest([1.5, 2.5, 2.5, 1.5], [0, 0, 0, 0])
    assert p == pytest.approx(2 * stats.t.sf(4 * math.sqrt(3), df=3), rel=1e-9)
    assert p == pytest.approx(0.006165, abs=1e-6)
    with pytest.raises(ValueError):
        paired_ttest([1, 2], [1, 2, 3])


# --------------------------------------------------------------------------- randomization


def test_randomization_identical_runs_p_is_one() -> None:
    a = [0.1, 0.4, 0.4, 0.9]
    assert randomization_test(a, a, trials=500, seed=1) == 1.0


def test_randomization_seed_determinism(scores: tuple[np.ndarray, np.ndarray]) -> None:
    a, b = scores
    p1 = randomization_test(a, b, trials=2000, seed=11)
    assert p1 == randomization_test(a, b, trials=2000, seed=11)
    others = {randomization_test(a, b, trials=2000, seed=s) for s in range(12, 17)}
    assert len(others | {p1}) > 1  # other seeds draw other sign flips
    assert randomization_test(a, b, trials=2000, seed=11) == randomization_test(b, a, 2000, 11)


def test_randomization_known_exact_case() -> None:
    # All 10 differences equal: only "all +" and "all -" reach |mean| = 1, so the
    # exact p is 2 / 2^10; the estimate is (hits + 1) / (trials + 1).
    a, b = np.ones(10), np.zeros(10)
    trials = 20000
    p = randomization_test(a, b, trials=trials, seed=0)
    exact = 2 / 1024
    sd = math.sqrt(exact * (1 - exact) / trials)
    assert abs(p - exact) < 5 * sd + 1 / trials
    assert p >= 1 / (trials + 1)  # never 0


def test_randomization_against_exact_and_scipy() -> None:
    rng = np.random.default_rng(3)
    a, b = rng.random(10), rng.random(10)
    exact = exact_sign_flip_p(a, b)
    scipy_p = stats.permutation_test(
        (a, b),
        lambda x, y, axis: np.mean(x - y, axis=axis),
        permutation_type="samples",
        alternative="two-sided",
        n_resamples=np.inf,  # 2^10 patterns: scipy enumerates them exactly
    ).pvalue
    assert scipy_p == pytest.approx(exact, abs=1e-12)
    trials = 40000
    p = randomization_test(a, b, trials=trials, seed=5)
    assert abs(p - exact) < 5 * math.sqrt(exact * (1 - exact) / trials) + 1 / trials


def test_randomization_large_input_is_chunked() -> None:
    rng = np.random.default_rng(0)
    a = rng.random(20000)  # 20k queries x 3000 trials: would be 60M entries unchunked
    b = a + 0.001
    assert randomization_test(a, b, trials=3000, seed=0) == 1 / 3001
    with pytest.raises(ValueError):
        randomization_test(a, b, trials=0)


# --------------------------------------------------------------------------- win/tie/loss


def test_win_tie_loss() -> None:
    a = [0.5, 0.5, 0.3, 0.2, 0.7 + 1e-12]
    b = [0.4, 0.5, 0.4, 0.2, 0.7]
    assert win_tie_loss(a, b) == (1, 3, 1)  # 1e-12 is within eps: a tie
    assert win_tie_loss(b, a) == (1, 3, 1)
    assert win_tie_loss(a, b, eps=0) == (2, 2, 1)


# --------------------------------------------------------------------------- compare


def test_compare_per_query_hand_example() -> None:
    per_a = {"1": {"map": 0.2, "P_5": 0.4}, "2": {"map": 0.5, "P_5": 0.4}}
    per_b = {"1": {"map": 0.3, "P_5": 0.4}, "2": {"map": 0.4, "P_5": 0.6}}
    per_a["3"], per_b["3"] = {"map": 0.1, "P_5": 0.0}, {"map": 0.4, "P_5": 0.2}
    out = compare_per_query(per_a, per_b, ["map", "P_5"], trials=4000, seed=0)
    m = out["map"]
    assert m["n"] == 3
    assert m["mean_a"] == pytest.approx(0.8 / 3) and m["mean_b"] == pytest.approx(1.1 / 3)
    assert m["mean_delta"] == pytest.approx(0.1)
    assert (m["wins"], m["ties"], m["losses"]) == (2, 0, 1)  # B against A
    assert m["ttest_p"] == pytest.approx(stats.ttest_rel([0.3, 0.4, 0.4], [0.2, 0.5, 0.1]).pvalue)
    exact = exact_sign_flip_p(np.array([0.3, 0.4, 0.4]), np.array([0.2, 0.5, 0.1]))
    assert abs(m["randomization_p"] - exact) < 0.04
    p5 = out["P_5"]
    assert (p5["wins"], p5["ties"], p5["losses"]) == (2, 1, 0)


def test_compare_per_query_needs_same_queries() -> None:
    with pytest.raises(ValueError, match="only in A \\['2'\\]"):
        compare_per_query({"1": {"map": 0.1}, "2": {"map": 0.2}}, {"1": {"map": 0.1}}, ["map"])
