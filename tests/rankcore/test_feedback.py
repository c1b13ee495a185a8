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
    assert len(grid) == 1 + len(feedback.DOCS_GRID) * len(feedback.WEIGHT_GRID) * len(
        feedback.NEIGHBOURS_GRID
    )
    assert len({tuple(g.values()) for g in grid}) == len(grid)


def test_each_candidate_moves_towards_its_nearest_candidates_before_the_query_moves():
    first = {"q1": {"a": 4.0, "b": 3.0, "c": 2.0, "d": 1.0}}
    setting = feedback.setting(docs=1, weight=1.0, neighbours=1, neighbour_weight=0.5)
    got = feedback.rescore(RUN, first, VECTORS, setting)
    v = {d: VECTORS[("d", d)] for d in "abcd"}
    # Nearest other candidate by cosine: a -> b (0.71; c is 0.20), b -> a (a, d tie at 0.71:
    # the earlier in the first stage's order, a), c -> a, d -> b.
    nearest = {"a": "b", "b": "a", "c": "a", "d": "b"}
    moved = {d: _unit(v[d] + 0.5 * v[nearest[d]]) for d in "abcd"}
    query = _unit(VECTORS[("q", "q1")] + moved["a"])  # the first stage's top 1: a, moved
    assert got["q1"] == pytest.approx({d: query @ moved[d] for d in "abcd"}, abs=1e-12)
    # Neighbours alone (the query stays): q . d' for each moved candidate.
    alone = feedback.rescore(
        RUN, first, VECTORS, feedback.setting(0, 0.0, neighbours=1, neighbour_weight=0.5)
    )
    q = VECTORS[("q", "q1")]
    assert alone["q1"] == pytest.approx({d: q @ moved[d] for d in "abcd"}, abs=1e-12)


def test_feedback_from_the_fused_first_pass_takes_its_top_at_the_models_alpha():
    # The first stage ranks d, b, a, c; the query's own vector ranks c (0.98), then a, b, d.
    first = {"q1": {"a": 2.0, "b": 3.0, "c": 1.0, "d": 4.0}}
    setting = feedback.setting(docs=1, weight=1.0, source="fused")
    assert feedback.from_fused(setting) and "fused first pass" in feedback.describe(setting)
    q = VECTORS[("q", "q1")]
    order = ["d", "b", "a", "c"]
    dense = np.array([q @ VECTORS[("d", d)] for d in order])
    lexical = np.array([first["q1"][d] for d in order])

    def by_hand(alpha):
        fused = alpha * (dense - dense.min()) / np.ptp(dense) + (1 - alpha) * (
            lexical - lexical.min()
        ) / np.ptp(lexical)
        top = order[int(np.argmax(fused))]
        moved = _unit(q + VECTORS[("d", top)])
        return top, {d: moved @ VECTORS[("d", d)] for d in "abcd"}

    # alpha 0.8: the first pass's top is c (the reranker's); alpha 0.2: d (the first stage's).
    for alpha, top in ((0.8, "c"), (0.2, "d")):
        got = feedback.rescore(RUN, first, VECTORS, setting, alpha)
        assert by_hand(alpha)[0] == top
        assert got["q1"] == pytest.approx(by_hand(alpha)[1], abs=1e-12)
    # From the first stage, the top is d whatever the alpha.
    from_first_stage = feedback.setting(docs=1, weight=1.0)
    got = feedback.rescore(RUN, first, VECTORS, from_first_stage, 0.8)
    assert got["q1"] == pytest.approx(by_hand(0.2)[1], abs=1e-12)
    with pytest.raises(ValueError, match="needs the fusion alpha"):
        feedback.rescore(RUN, first, VECTORS, setting)


def test_the_fused_grid_takes_every_settings_feedback_from_the_fused_first_pass():
    grid = feedback.grid("fused")
    assert grid[0] == feedback.OFF
    assert all(feedback.from_fused(g) for g in grid[1:])
    assert [{**g, "from": "first_stage"} for g in grid[1:]] == feedback.grid()[1:]
    with pytest.raises(ValueError, match="must be one of first_stage, fused"):
        feedback.setting(3, 0.5, source="dense")


def _lists_case() -> tuple[dict, dict, dict]:
    """Queries of 1, 2, 7 and 40 candidates over shared documents, first-stage ties and a
    candidate without a first-stage score."""
    rng = np.random.default_rng(3)
    docs = {f"d{i}": _unit(rng.normal(size=8)).astype(np.float32) for i in range(60)}
    vectors = {("d", d): v for d, v in docs.items()}
    run, first = {}, {}
    for i, n in enumerate((1, 2, 7, 40)):
        qid = f"q{i}"
        vectors[("q", qid)] = _unit(rng.normal(size=8)).astype(np.float32)
        chosen = [f"d{j}" for j in rng.choice(60, n, replace=False)]
        run[qid] = {d: float(vectors[("q", qid)] @ docs[d]) for d in chosen}
        first[qid] = {d: float(np.round(rng.normal(), 1)) for d in chosen[: max(1, n - 1)]}
    return run, first, vectors


def test_lists_prepared_once_rescore_every_setting_as_rescore_does_to_the_bit():
    """The Trainer's grid rescores one feedback.Lists under every setting (its nearest
    candidates computed once per neighbour count): each equals a fresh feedback.rescore."""
    run, first, vectors = _lists_case()
    lists = feedback.Lists(run, first, vectors)
    for source in feedback.SOURCES:
        # Each setting twice (the second from the cache), and other neighbour counts.
        others = [feedback.setting(2, 1.0, n, 0.5, source) for n in (1, 3, 50)]
        for setting in [*feedback.grid(source), *others] * 2:
            for alpha in (0.0, 0.35, 1.0):
                want = feedback.rescore(run, first, vectors, setting, alpha)
                assert lists.rescore(setting, alpha) == want
