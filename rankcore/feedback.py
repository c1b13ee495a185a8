"""Pseudo-relevance feedback for dual encoders: Rocchio on the query vector.

A dual encoder scores a candidate by the cosine of the query's and the document's vectors. With
feedback, the query vector first moves towards the documents the first stage ranks highest:

    q' = normalise(q + weight * mean(vectors of the first stage's top `docs` candidates))

and every candidate is scored by q' . d. No judgment is read: the feedback documents are the
first stage's own top of that query's candidate list (scores descending, then docid descending,
as trec_eval ranks). Rocchio (1971) on dense vectors is the PRF that Li et al. found to help
dense retrievers most reliably ("Pseudo Relevance Feedback with Deep Language Models and Dense
Retrievers: Successes and Pitfalls", ACM TOIS 2023, section 3; also ANCE-PRF, Yu et al., CIKM
2021, which learns the same move instead). On Cranfield's dev folds it is what the zero-shot
MiniLM lacked most: the queries are long technical questions and the first stage's top three
abstracts name the topic in the collection's own words (docs/evaluator.md "Feedback").

The scores depend on the whole candidate list, so a model with feedback ranks lists, not pairs:
the Trainer tunes `docs` and `weight` on the dev queries together with the fusion alpha
(trainer_module/run_fn.py), the RankingEvaluator rescores each query's candidates here from the
vectors its scoring pass kept (components/ranking_evaluator/executor.py), and the SavedModel's
`rank_candidates` signature computes the same in-graph (trainer_module/export.py). Pair
signatures (serving_default, score_examples) stay the model without feedback.

Written by hand: three lines of numpy, and no library we use (TF-Ranking, pytrec_eval,
ir_measures) has dense feedback. In rankcore because the Trainer and the RankingEvaluator both
use it, and those two never import each other.
"""

from __future__ import annotations

import numpy as np

Run = dict[str, dict[str, float]]
Vectors = dict[tuple[str, str], np.ndarray]  # ("q", qid) / ("d", docid) -> L2-normalised vector

# The grid `trainer.feedback: tuned` searches (with the fusion alpha) on the dev queries. The
# weight 0 (no feedback) is always in it, so feedback is kept only where dev says it helps.
DOCS_GRID = (3, 5, 10)
WEIGHT_GRID = (0.5, 1.0, 2.0)
OFF = {"docs": 0, "weight": 0.0}


def grid() -> list[dict]:
    """Every setting `tuned` tries: off first, then each (docs, weight)."""
    return [dict(OFF)] + [{"docs": k, "weight": w} for k in DOCS_GRID for w in WEIGHT_GRID]


def is_on(settings: dict | None) -> bool:
    """Whether a fusion dict's feedback settings (None: none) change the scores."""
    return bool(settings) and settings.get("weight", 0) > 0 and settings.get("docs", 0) > 0


def describe(settings: dict | None) -> str:
    """A setting in words, for reports and model cards."""
    if not is_on(settings):
        return "off"
    return f"top {settings['docs']} first-stage candidates, weight {settings['weight']:g}"


def feedback_docs(first_stage: dict[str, float], docs: int) -> list[str]:
    """The first stage's top `docs` documents, in trec_eval order (score desc, docid desc)."""
    return sorted(first_stage, key=lambda d: (first_stage[d], d), reverse=True)[:docs]


def expand(query: np.ndarray, feedback: list[np.ndarray], weight: float) -> np.ndarray:
    """normalise(query + weight * mean(feedback)) in float64; the query itself without
    feedback vectors."""
    q = np.asarray(query, np.float64)
    if not feedback or weight == 0:
        return q
    moved = q + weight * np.mean(np.asarray(feedback, np.float64), axis=0)
    norm = np.linalg.norm(moved)
    return moved / norm if norm > 0 else q


def rescore(run: Run, first_stage: Run, vectors: Vectors, settings: dict | None) -> Run:
    """`run`'s candidates scored by the expanded query (float64 dot products). Feedback
    documents are drawn from each query's candidates in `run` as `first_stage` orders them.
    Without feedback (`is_on` false) `run` is returned as it is."""
    if not is_on(settings):
        return run
    out: Run = {}
    for qid, docs in run.items():
        ranked = {d: first_stage[qid][d] for d in docs if d in first_stage.get(qid, {})}
        top = feedback_docs(ranked, int(settings["docs"]))
        query = expand(vectors[("q", qid)], [vectors[("d", d)] for d in top], settings["weight"])
        out[qid] = {d: float(query @ np.asarray(vectors[("d", d)], np.float64)) for d in docs}
    return out
