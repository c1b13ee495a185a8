"""Dense pseudo-relevance feedback (rankcore/feedback.py) against a hand computation."""

import numpy as np
import pytest

from rankcore import feedback


def _unit(v):
    v = np.asarray(v, np.float64)
    return v / np.linalg.norm(v)


VECTORS = {
    ("q", "q1"): _unit([1.0, 0.0, 0.0]),
    ("d", "a"): _unit([0.0, 1.0, 0.0]),
    ("d", "b"): _unit([0.0, 1.0, 1.0]),
    ("d", "c"): _unit([1.0, 0.2, 0.0]),
    ("d", "d"): _unit([0.0, 0.0, 1.0]),
}
RUN = {"q1": {d: float(VECTORS[("q", "q1")] @ VECTORS[("d", d)]) for d in "abcd"}}


def test_the_query_moves_towards_the_first_stages_top_documents():
    # a and b tie at the top of the first stage: trec_eval ranks b (larger docid) first, so
    # with docs=1 b alone is the feedback document.
    first = {"q1": {"a": 5.0, "b": 5.0, "c": 1.0, "d": 3.0}}
    got = feedback.rescore(RUN, first, VECTORS, {"docs": 1, "weight": 2.0})
    moved = _unit(VECTORS[("q", "q1")] + 2.0 * VECTORS[("d", "b")])
    assert got["q1"] == pytest.approx({d: moved @ VECTORS[("d", d)] for d in "abcd"}, abs=1e-12)
    # The order changes: d, orthogonal to the query, now beats c, close to it.
    assert RUN["q1"]["c"] > RUN["q1"]["d"] and got["q1"]["d"] > got["q1"]["c"]
    # docs=3: the mean of b, a, d (c is fourth).
    got = feedback.rescore(RUN, first, VECTORS, {"docs": 3, "weight": 0.5})
    mean = (VECTORS[("d", "b")] + VECTORS[("d", "a")] + VECTORS[("d", "d")]) / 3
    moved = _unit(VECTORS[("q", "q1")] + 0.5 * mean)
    assert got["q1"] == pytest.approx({d: moved @ VECTORS[("d", d)] for d in "abcd"}, abs=1e-12)


def test_off_leaves_the_run_as_it_is_and_docs_beyond_the_list_use_all_of_it():
    first = {"q1": {"a": 4.0, "b": 3.0, "c": 2.0, "d": 1.0}}
    for off in (None, feedback.OFF, {"docs": 3, "weight": 0.0}):
        assert feedback.rescore(RUN, first, VECTORS, off) is RUN
    many = feedback.rescore(RUN, first, VECTORS, {"docs": 10, "weight": 1.0})
    mean = np.mean([VECTORS[("d", d)] for d in "abcd"], axis=0)
    moved = _unit(VECTORS[("q", "q1")] + mean)
    assert many["q1"] == pytest.approx({d: moved @ VECTORS[("d", d)] for d in "abcd"})


def test_only_the_querys_own_candidates_with_a_first_stage_score_give_feedback():
    # "z" has the best first-stage score but is no candidate of the run: it is never used.
    first = {"q1": {"z": 9.0, "c": 2.0, "a": 1.0}}
    vectors = {**VECTORS, ("d", "z"): _unit([0.0, -1.0, 0.0])}
    got = feedback.rescore(RUN, first, vectors, {"docs": 1, "weight": 1.0})
    moved = _unit(VECTORS[("q", "q1")] + VECTORS[("d", "c")])
    assert got["q1"] == pytest.approx({d: moved @ VECTORS[("d", d)] for d in "abcd"})


def test_the_grid_starts_with_off():
    grid = feedback.grid()
    assert grid[0] == feedback.OFF and not feedback.is_on(grid[0])
    assert all(feedback.is_on(g) for g in grid[1:])
    assert len(grid) == 1 + len(feedback.DOCS_GRID) * len(feedback.WEIGHT_GRID)
