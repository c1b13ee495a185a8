"""Pseudo-relevance feedback for dual encoders: the query and the candidates move towards the
first stage's top candidates and towards each other before they are scored.

A dual encoder scores a candidate by the cosine of the query's and the document's vectors. With
feedback, one query's candidate list is scored in two steps, reading no judgment:

1. Document neighbours (score regularization, Diaz, "Regularizing Ad Hoc Retrieval Scores",
   CIKM 2005: related documents should score alike): each candidate's vector moves towards the
   mean of its `neighbours` most similar other candidates,
   d' = normalise(d + neighbour_weight * mean(neighbours' vectors)).
2. Query feedback (Rocchio on dense vectors, the PRF that Li et al. found to help dense
   retrievers most reliably: "Pseudo Relevance Feedback with Deep Language Models and Dense
   Retrievers: Successes and Pitfalls", ACM TOIS 2023; ANCE-PRF, CIKM 2021, learns the same
   move): q' = normalise(q + weight * mean(d' of the top `docs` candidates)). The top
   candidates are the first stage's (`from: first_stage`), or (`from: fused`) those of a first
   pass that ranks by the model's own fused score, alpha * minmax(q . d') + (1 - alpha) *
   minmax(first stage) at the alpha the model carries (rankcore/fusion.py): feedback from the
   better of the two rankings, as dense PRF takes it from the dense ranking (ANCE-PRF) and
   classic PRF from the ranking it expands. Ties in the first pass keep the first stage's order.

Every candidate's score is q' . d'. Candidates are taken in the first stage's order (score
descending, then docid descending, as trec_eval ranks); among equally similar neighbours the
earlier in that order wins.

The scores depend on the whole candidate list, so a model with feedback ranks lists, not pairs:
the Trainer tunes the setting on the dev queries together with the fusion alpha
(trainer_module/run_fn.py), the RankingEvaluator rescores each query's candidates here from the
vectors its scoring pass kept (components/ranking_evaluator/executor.py), and the SavedModel's
`rank_candidates` signature computes the same in-graph (trainer_module/export.py). The pair
signatures (serving_default, score_examples) stay the model without feedback. All three run
rankcore/ranking.py's `rank_list`, written once (numpy here, TensorFlow in the graph); this
module holds the settings and the run-level API around it.

Written by hand: a few lines of array code, and no library we use (TF-Ranking, pytrec_eval,
ir_measures) has dense feedback. In rankcore because the Trainer and the RankingEvaluator both
use it, and those two never import each other.
"""

from __future__ import annotations

import numpy as np

# The settings' predicates and one list's scores, shared with the served graph.
from rankcore.ranking import (
    OFF,
    from_fused,
    is_on,
    moves_documents,
    moves_query,
    nearest_candidates,
    rank_list,
)

__all__ = [
    "DOCS_GRID",
    "Lists",
    "NEIGHBOURS_GRID",
    "OFF",
    "SOURCES",
    "WEIGHT_GRID",
    "describe",
    "first_stage_order",
    "from_fused",
    "grid",
    "is_on",
    "moves_documents",
    "moves_query",
    "rank_list",
    "rescore",
    "setting",
]

Run = dict[str, dict[str, float]]
Vectors = dict[tuple[str, str], np.ndarray]  # ("q", qid) / ("d", docid) -> L2-normalised vector

# The grid `trainer.ranking.feedback.mode: tuned` searches (with the fusion alpha) on the dev
# queries. No feedback comes first, so feedback is kept only where the dev queries say it helps.
DOCS_GRID = (3, 5, 10)
WEIGHT_GRID = (0.5, 1.0, 2.0)
NEIGHBOURS_GRID = ((0, 0.0), (5, 0.3), (5, 0.6))  # (neighbours, neighbour_weight)
# Where the query's feedback documents come from: the first stage's top candidates, or the top
# of a first pass fused at the model's alpha. A setting without "from" (older models) is
# first_stage.
SOURCES = ("first_stage", "fused")


def setting(
    docs: int,
    weight: float,
    neighbours: int = 0,
    neighbour_weight: float = 0.0,
    source: str = "first_stage",
) -> dict[str, int | float | str]:
    if source not in SOURCES:
        raise ValueError(f"feedback source {source!r}: must be one of {', '.join(SOURCES)}")
    return {
        "docs": int(docs),
        "weight": float(weight),
        "neighbours": int(neighbours),
        "neighbour_weight": float(neighbour_weight),
        "from": source,
    }


def grid(source: str = "first_stage") -> list[dict]:
    """Every setting `tuned` tries: off first, then each (docs, weight, neighbours), the query's
    feedback documents taken from `source`."""
    return [dict(OFF)] + [
        setting(k, w, n, g, source)
        for k in DOCS_GRID
        for w in WEIGHT_GRID
        for n, g in NEIGHBOURS_GRID
    ]


def describe(settings: dict | None) -> str:
    """A setting in words, for reports and model cards."""
    if not is_on(settings):
        return "off"
    parts = []
    if moves_query(settings):
        top = "fused first pass's" if from_fused(settings) else "first stage's"
        parts.append(f"query + {settings['weight']:g} x mean of the {top} top {settings['docs']}")
    if moves_documents(settings):
        parts.append(
            f"candidates + {settings['neighbour_weight']:g} x mean of their "
            f"{settings['neighbours']} nearest"
        )
    return ", ".join(parts)


def first_stage_order(first_stage: dict[str, float], docs) -> list[str]:
    """`docs` in the first stage's order (score desc, docid desc, as trec_eval ranks); any
    without a first-stage score last, by docid."""
    scored = sorted(
        (d for d in docs if d in first_stage), key=lambda d: (first_stage[d], d), reverse=True
    )
    return scored + sorted(d for d in docs if d not in first_stage)


def rescore(
    run: Run,
    first_stage: Run,
    vectors: Vectors,
    settings: dict | None,
    alpha: float | None = None,
) -> Run:
    """`run`'s candidates scored with feedback (`rank_list` per query), from each text's
    vector; `alpha` is the model's fusion alpha (used by `from: fused`). Without feedback
    (`is_on` false) `run` is returned as it is."""
    if not is_on(settings):
        return run
    return Lists(run, first_stage, vectors).rescore(settings, alpha)


class Lists:
    """`run`'s candidate lists prepared once for rescoring under many settings (the Trainer's
    grid: 28 settings x 21 alphas per dev split): each query's candidates in first-stage order
    as rows of one matrix of the distinct documents' vectors, and each list's nearest
    candidates for each neighbour count, computed once. `rescore` gives what `rescore` above
    gives, to the bit: the same vectors through the same `rank_list`."""

    def __init__(self, run: Run, first_stage: Run, vectors: Vectors):
        self.run = run
        docids = sorted({d for docs in run.values() for d in docs})
        row = {d: i for i, d in enumerate(docids)}
        self.matrix = np.array([vectors[("d", d)] for d in docids])
        # (qid, candidates in first-stage order, their rows, query vector, first-stage scores)
        self.lists = []
        for qid, docs in run.items():
            fs = first_stage.get(qid, {})
            order = first_stage_order(fs, docs)
            self.lists.append(
                (
                    qid,
                    order,
                    np.array([row[d] for d in order], np.int64),
                    vectors[("q", qid)],
                    np.array([fs[d] for d in order if d in fs], np.float64),
                )
            )
        self._nearest: dict[tuple[str, int], np.ndarray] = {}

    def rescore(self, settings: dict | None, alpha: float | None = None) -> Run:
        """The run under `settings` (feedback.rescore)."""
        if not is_on(settings):
            return self.run
        out: Run = {}
        for qid, order, rows, query, fs in self.lists:
            docs = self.matrix[rows]
            nearest = None
            if moves_documents(settings):
                key = (qid, int(settings["neighbours"]))
                if key not in self._nearest:
                    self._nearest[key] = nearest_candidates(docs, key[1])
                nearest = self._nearest[key]
            scores = rank_list(query, docs, fs, settings, alpha, nearest=nearest)
            out[qid] = dict(zip(order, scores.tolist()))
        return out
