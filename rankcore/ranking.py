"""The list arithmetic of fusion and feedback, written once for the three places that rank a
query's candidate list: the Trainer choosing its fusion and feedback on the dev queries
(trainer_module/run_fn.py, through rankcore/fusion.py and rankcore/feedback.py), the
RankingEvaluator rescoring each test list (components/ranking_evaluator/scoring.py, through
feedback.rescore and fusion.fuse_run) and the SavedModel's `rank_candidates` signature
(trainer_module/export.py, in-graph). They must rank alike, so each function here is the one
implementation, written against a small array backend `xp`: `NUMPY` (the default: the Trainer and
the evaluator, on Python lists of a few hundred candidates, where a call into TensorFlow per list
would cost more than the arithmetic) or `tensorflow()` (the served graph, traced once with a
dynamic list length). Each backend maps an operation to its own library's (numpy's matmul,
linalg.norm and stable argsort; TensorFlow's matmul, norm and stable argsort), so the numpy path
computes what numpy computed before this module, to the last bit, and the graph what the graph
computed; the two agree to float64 rounding (tests/trainer_module/test_ranking_paths.py).

The functions take only what a graph can take: no branch on a value computed from the list
(a branch on the list length is a `where` over both results), and the settings (plain Python
numbers, known when the graph is traced) choose the steps. Written by hand rather than with the
array API standard (array-api-compat) because TensorFlow implements no array namespace, and the
operations needed are a dozen. In rankcore because the Trainer (trainer_module) and the
RankingEvaluator (components) use it, and those two never import each other.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

import numpy as np

# The feedback setting of a model without feedback (rankcore/feedback.py has the rest of the
# settings' vocabulary; the predicates live here because rank_list reads them).
OFF = {"docs": 0, "weight": 0.0, "neighbours": 0, "neighbour_weight": 0.0}


def moves_query(settings: Mapping) -> bool:
    """Whether the query moves (docs and weight above 0)."""
    return settings.get("docs", 0) > 0 and settings.get("weight", 0) > 0


def moves_documents(settings: Mapping) -> bool:
    """Whether the candidates move towards their neighbours."""
    return settings.get("neighbours", 0) > 0 and settings.get("neighbour_weight", 0) > 0


def from_fused(settings: Mapping | None) -> bool:
    """Whether the query's feedback documents are the top of the fused first pass (so the
    scores depend on the fusion alpha)."""
    return bool(settings) and moves_query(settings) and settings.get("from") == "fused"


def is_on(settings: Mapping | None) -> bool:
    """Whether a fusion dict's feedback settings (None: none) change the scores."""
    return bool(settings) and (moves_query(settings) or moves_documents(settings))


class _Numpy:
    """The numpy backend: the operations numpy's code used, one each."""

    float64 = staticmethod(lambda x: np.asarray(x, np.float64))
    length = staticmethod(len)
    minimum = staticmethod(min)
    maximum = staticmethod(max)
    arange = staticmethod(np.arange)
    zeros_like = staticmethod(np.zeros_like)

    @staticmethod
    def where(condition: Any, x: Any, y: Any) -> Any:
        # One condition for the whole array (a list's length, its min-max range) picks an
        # array as it is: the Trainer's grid calls this tens of thousands of times.
        if isinstance(condition, (bool, np.bool_)):
            return x if condition else y
        return np.where(condition, x, y)

    @staticmethod
    def min(x: np.ndarray) -> Any:
        return x.min() if x.size else np.inf  # an empty list: no minimum, minmax returns it

    @staticmethod
    def max(x: np.ndarray) -> Any:
        return x.max() if x.size else -np.inf

    @staticmethod
    def norm(x: np.ndarray) -> np.ndarray:
        return np.linalg.norm(x, axis=-1, keepdims=True)

    @staticmethod
    def gram(x: np.ndarray) -> np.ndarray:
        return x @ x.T

    @staticmethod
    def matvec(x: np.ndarray, v: np.ndarray) -> np.ndarray:
        return x @ v

    @staticmethod
    def fill_diagonal(x: np.ndarray, value: float) -> np.ndarray:
        np.fill_diagonal(x, value)  # x is a fresh product: filled in place
        return x

    @staticmethod
    def argsort_descending(x: np.ndarray) -> np.ndarray:
        """Along the last axis, largest first; equal values keep their order."""
        return np.argsort(-x, axis=-1, kind="stable")

    @staticmethod
    def take(x: np.ndarray, indices: np.ndarray) -> np.ndarray:
        return x[indices]

    @staticmethod
    def sum(x: np.ndarray, axis: int) -> np.ndarray:
        return x.sum(axis=axis)

    @staticmethod
    def count(n: int) -> int:
        return n  # numpy divides by an int as by its float


class _TensorFlow:
    """The TensorFlow backend, for a traced graph (float64 throughout)."""

    def __init__(self) -> None:
        import tensorflow as tf  # here: `rankpipe config show` imports rankcore without it

        self.tf = tf
        self.float64 = lambda x: tf.cast(x, tf.float64)
        self.length = lambda x: tf.shape(x)[0]
        self.minimum, self.maximum = tf.minimum, tf.maximum
        self.arange, self.where, self.zeros_like = tf.range, tf.where, tf.zeros_like
        self.min, self.max = tf.reduce_min, tf.reduce_max
        self.norm = lambda x: tf.norm(x, axis=-1, keepdims=True)
        self.gram = lambda x: tf.matmul(x, x, transpose_b=True)
        self.matvec = tf.linalg.matvec
        self.take = tf.gather
        self.sum = lambda x, axis: tf.reduce_sum(x, axis=axis)
        self.count = lambda n: tf.cast(n, tf.float64)

    def fill_diagonal(self, x: Any, value: float) -> Any:
        tf = self.tf
        return tf.linalg.set_diag(x, tf.fill([tf.shape(x)[0]], tf.constant(value, x.dtype)))

    def argsort_descending(self, x: Any) -> Any:
        """Along the last axis, largest first; equal values keep their order."""
        return self.tf.argsort(x, axis=-1, direction="DESCENDING", stable=True)


NUMPY = _Numpy()


@functools.cache
def tensorflow() -> _TensorFlow:
    """The TensorFlow backend (imports TensorFlow on the first call)."""
    return _TensorFlow()


def minmax(scores: Any, xp: Any = NUMPY) -> Any:
    """(x - min) / (max - min) in float64; all zeros when every score is equal."""
    x = xp.float64(scores)
    lo, hi = xp.min(x), xp.max(x)
    return xp.where(hi > lo, (x - lo) / xp.where(hi > lo, hi - lo, 1.0), xp.zeros_like(x))


def fuse(reranker: Any, first_stage: Any, alpha: float, xp: Any = NUMPY) -> Any:
    """One query's fused scores (candidates in the same order in both arrays)."""
    return fuse_normalised(minmax(reranker, xp), minmax(first_stage, xp), alpha)


def fuse_normalised(reranker: Any, first_stage: Any, alpha: float) -> Any:
    """`fuse` of two lists already min-max normalised: a grid of alphas normalises once."""
    return alpha * reranker + (1.0 - alpha) * first_stage


def normalise(x: Any, xp: Any = NUMPY) -> Any:
    """L2-normalised along the last axis; an all-zero vector stays zero."""
    norms = xp.norm(x)
    return xp.where(norms > 0, x / xp.where(norms > 0, norms, 1.0), x)


def _mean(x: Any, axis: int, n: Any, xp: Any) -> Any:
    """The mean of the `n` items `x` holds along `axis`, as their sum over n (numpy's mean, to
    the bit); zeros when n is 0, where a graph cannot branch on n."""
    return xp.sum(x, axis) / xp.count(xp.maximum(n, 1))


def _neighbour_count(neighbours: int, count: Any, xp: Any) -> Any:
    """How many neighbours a list of `count` candidates gives each: at most count - 1."""
    return xp.minimum(int(neighbours), xp.maximum(count - 1, 0))


def nearest_candidates(docs: Any, neighbours: int, xp: Any = NUMPY) -> Any:
    """[N, n] the indices of each candidate's `neighbours` most similar other candidates (n:
    at most N - 1), most similar first; a stable sort keeps the earlier candidate first among
    equals. They depend on the list and n only: a grid of settings computes them once."""
    d = xp.float64(docs)
    n = _neighbour_count(neighbours, xp.length(d), xp)
    sims = xp.fill_diagonal(xp.gram(d), -np.inf)
    return xp.argsort_descending(sims)[:, :n]


def rank_list(
    query: Any,
    docs: Any,
    first_stage: Any,
    settings: Mapping | None,
    alpha: float | None = None,
    xp: Any = NUMPY,
    nearest: Any = None,
) -> Any:
    """One list's scores (float64) with feedback (rankcore/feedback.py): `docs` [N, H] in
    first-stage order, the first len(`first_stage`) of them with those first-stage scores (only
    those can be feedback documents). `alpha`: the model's fusion alpha, needed when the
    feedback is `from: fused`. `nearest`: nearest_candidates(docs, settings' neighbours), when
    the caller has them already."""
    q = xp.float64(query)
    d = xp.float64(docs)
    count, num_scored = xp.length(d), xp.length(first_stage)
    settings = settings or OFF
    if moves_documents(settings):
        n = _neighbour_count(settings["neighbours"], count, xp)
        if nearest is None:
            nearest = nearest_candidates(d, settings["neighbours"], xp)
        moved = normalise(
            d + settings["neighbour_weight"] * _mean(xp.take(d, nearest), 1, n, xp), xp
        )
        d = xp.where(count > 1, moved, d)  # one candidate has no neighbour
    if moves_query(settings):
        k = xp.minimum(int(settings["docs"]), num_scored)
        top = xp.arange(k)
        if from_fused(settings):
            if alpha is None:
                raise ValueError(
                    f"feedback from the fused first pass ({dict(settings)}) needs the fusion alpha"
                )
            first_pass = fuse(xp.matvec(d[:num_scored], q), first_stage, alpha, xp)
            top = xp.argsort_descending(first_pass)[:k]  # ties: first-stage order
        moved = normalise(q + settings["weight"] * _mean(xp.take(d, top), 0, k, xp), xp)
        q = xp.where(k > 0, moved, q)  # no first-stage score: nothing to move towards
    return xp.matvec(d, q)
