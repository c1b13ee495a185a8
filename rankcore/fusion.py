"""Fusion of the reranker's scores with the first stage's (run interpolation).

Per query, both score lists are min-max normalised over that query's candidates and the fused
score is alpha * reranker + (1 - alpha) * first stage (capreolus's `interpolate_runs`; Birch and
"Simple Applications of BERT for Ad Hoc Document Retrieval" interpolate the same way). With
alpha = 0 the ranking is the first stage's, with alpha = 1 the reranker's (min-max is monotone).

The same arithmetic runs in three places that must agree: the Trainer tunes alpha here, the
RankingEvaluator fuses with `fuse_run`, and the SavedModel's `rank_candidates` signature
(trainer_module/export.py) fuses in-graph in float64. All three call rankcore/ranking.py's
`fuse`, written once (numpy here, TensorFlow in the graph).

Written by hand: the interpolation is three lines, and ir-measures/pytrec_eval have no fusion.
In rankcore because both the Trainer (trainer_module) and the RankingEvaluator (components)
use it, and those two never import each other.
"""

from __future__ import annotations

import json
from collections.abc import Callable

import numpy as np

# One query's arrays: min-max normalisation and fusion, numpy by default (rankcore/ranking.py).
from rankcore.ranking import fuse, fuse_normalised, minmax

__all__ = [
    "ALPHA_GRID",
    "FUSION_FILE",
    "fuse",
    "fuse_run",
    "fusion_alpha",
    "minmax",
    "read_fusion",
    "tune_alpha",
]

Run = dict[str, dict[str, float]]
Qrels = dict[str, dict[str, int]]

# The alpha grid of the tuned mode: 0, 0.05, ..., 1.
ALPHA_GRID = tuple(round(i * 0.05, 2) for i in range(21))
# Written into the SavedModel (assets.extra/, which TF Serving ignores) for the evaluator and
# the model card; the signature carries the same alpha as a constant.
FUSION_FILE = "assets.extra/fusion.json"


def fuse_run(reranker: Run, first_stage: Run, alpha: float) -> Run:
    """Fused run over the reranker's candidates. A candidate the first stage did not return
    (it cannot happen for datagen's examples) raises rather than being silently dropped."""
    return _fused(_normalised(reranker, first_stage), alpha)


# Per query: (qid, its candidates sorted, the reranker's and the first stage's scores of them
# min-max normalised): `fuse` before alpha, so a grid of alphas normalises each list once.
_Normalised = list[tuple[str, list[str], np.ndarray, np.ndarray]]


def _normalised(reranker: Run, first_stage: Run) -> _Normalised:
    out = []
    for qid, docs in reranker.items():
        docids = sorted(docs)
        fs = first_stage.get(qid, {})
        missing = [d for d in docids if d not in fs]
        if missing:
            raise ValueError(f"fusion: query {qid!r}: no first-stage score for {missing[:3]}")
        reranked = minmax(np.array([docs[d] for d in docids]))
        out.append((qid, docids, reranked, minmax(np.array([fs[d] for d in docids]))))
    return out


def _fused(lists: _Normalised, alpha: float) -> Run:
    return {
        qid: dict(zip(docids, fuse_normalised(reranked, fs, alpha).tolist()))
        for qid, docids, reranked, fs in lists
    }


def tune_alpha(
    reranker: Run | Callable[[float], Run],
    first_stage: Run,
    metric_fn: Callable[[Run], float],
    grid: tuple[float, ...] = ALPHA_GRID,
) -> tuple[float, dict[float, float]]:
    """The grid alpha maximising metric_fn(fused dev run); ties go to the larger alpha.
    `reranker` is a run, or a function of alpha giving one (a reranker whose scores depend on
    the alpha, as feedback from the fused first pass does). Returns (alpha, {alpha: metric})."""
    if callable(reranker):
        values = {alpha: metric_fn(fuse_run(reranker(alpha), first_stage, alpha)) for alpha in grid}
    else:
        lists = _normalised(reranker, first_stage)
        values = {alpha: metric_fn(_fused(lists, alpha)) for alpha in grid}
    best = max(values.items(), key=lambda kv: (kv[1], kv[0]))
    return best[0], values


def fusion_alpha(mode: str, fixed_alpha: float, tuned_alpha: float | None) -> float | None:
    """The alpha a model carries: None when fusion is off."""
    if mode == "none":
        return None
    return fixed_alpha if mode == "fixed" else tuned_alpha


def read_fusion(saved_model_dir: str) -> dict | None:
    """The fusion settings written with a SavedModel, or None (no fusion, or an older model)."""
    # Imported here: `rankpipe config show` reaches this module through the config
    # (trainer_module/config.py -> rankcore/feedback.py) and needs no TensorFlow (seconds).
    import tensorflow as tf

    path = f"{saved_model_dir.rstrip('/')}/{FUSION_FILE}"
    if not tf.io.gfile.exists(path):
        return None
    with tf.io.gfile.GFile(path) as f:
        fusion = json.load(f)
    return fusion if fusion.get("alpha") is not None else None
