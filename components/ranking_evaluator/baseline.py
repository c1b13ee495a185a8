"""The baseline a candidate is compared with: the model currently served.

The Pusher writes blessed models to `<destination>/<version>/` (integer versions, saved_model.pb
written last; the layout is components/push_destination.py) and TF Serving serves the newest
complete one. That model is the baseline, whatever runner pushed it: LocalDagRunner, Kubeflow
and Vertex read the same directory, so no orchestrator-specific lookup (such as TFX's Resolver,
which the open-source KFP backend cannot run) is needed. The version directory is the
SavedModel itself, next to its model card (model_card.json), which records the evaluation it
passed, and the queries it trained and chose on (trained_queries.json).

The served model is a fair reference only on queries that reached it in no form: scored on the
queries it trained on it looks better than any held-out figure can (a cross-validated rerun of
the same recipe once read -0.15 against it on Cranfield, every time). So it is compared only on
the evaluated queries that neither trained it nor chose its checkpoint and fusion alpha (its dev
queries flatter it less than its training queries, but still do), with the candidate's figures
on the same queries; when too few are left for the significance test to mean anything, or its
card does not say which queries it saw, it is not compared, and the verdict says why.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

# ServedModel and served_model live with the rest of the push destination's layout (the Pusher
# writes it); imported here for this module's readers, as before.
from components.push_destination import TRAINED_QUERIES_FILE, ServedModel, served_model
from components.ranking_evaluator import significance
from rankcore import lineage

__all__ = [
    "BaselineChoice",
    "ServedModel",
    "find_baseline",
    "for_queries",
    "on_compared_queries",
    "paired",
    "served_model",
]

PerQuery = dict[str, dict[str, dict[str, float]]]  # system -> qid -> measure -> value


@dataclass(frozen=True)
class BaselineChoice:
    """The served model to compare with (None: none), why a served one was not used, and the
    queries it may be compared on: the judged (then the evaluated) queries that neither
    trained nor chose it; None before any query is known."""

    served: ServedModel | None
    skipped: str | None = None  # a sentence for the verdict: why no comparison was made
    compare_on: tuple[str, ...] | None = None


def _skip(served: ServedModel, why: str) -> BaselineChoice:
    skipped = f"the served model (version {served.version}, {served.path}) is not compared: {why}"
    logging.warning("Baseline skipped: %s", skipped)
    return BaselineChoice(None, skipped)


def find_baseline(
    destination: str,
    candidate_uri: str,
    candidate_lineage: dict[str, Any] | None,
    judged: Iterable[str] | None = None,
    level: float = 0.05,
) -> BaselineChoice:
    """The served model to compare `candidate_uri` with.

    None when nothing is served yet; when the served model is the candidate itself (a
    re-evaluation of a pushed model, e.g. with new thresholds: comparing a model with its own
    copy says nothing); and, with the reason in `skipped`, when it was trained for another
    collection or reads other token ids than the candidate's examples
    (rankcore/lineage.py): the evaluator feeds every model the candidate's token ids, so such a
    comparison would crash or mean nothing; when its card does not record the queries it
    trained and chose on; and, given the `judged` queries (every query the evaluation can
    measure), when too few of them are held out from it (`for_queries`): known before
    scoring, so the served model is then not scored at all."""
    served = served_model(destination)
    if served is None:
        logging.info("No model served under %s yet: no baseline", destination)
        return BaselineChoice(None)
    if served.model_uri is not None and served.model_uri.rstrip("/") == candidate_uri.rstrip("/"):
        logging.info(
            "The candidate %s is the model served (%s): no baseline", candidate_uri, served
        )
        return BaselineChoice(None)
    why = lineage.incomparable(candidate_lineage, served.lineage)
    if why is not None:
        return _skip(served, why)
    if not any(key in (served.queries or {}) for key in lineage.QUERY_LISTS):
        return _skip(
            served,
            f"its version directory has no {TRAINED_QUERIES_FILE} (pushed before the record "
            "was kept), so nothing says which queries it trained on, and scored on those it "
            "would look better than it is (a model pushed from now on records them)",
        )
    choice = BaselineChoice(served)
    if judged is not None:
        choice = for_queries(choice, judged, level, which="judged")
    if choice.served is not None:
        logging.info("Baseline: version %d served at %s", served.version, served.path)
    return choice


def _too_few(served: ServedModel, evaluated: int, held_out: int, level: float, which: str) -> str:
    """Why `held_out` of `evaluated` queries are no comparison (the same small-sample rule as
    report.significance_warnings: the randomization test's smallest p, 2/2^n, must be below
    `level` for the comparison to be able to say anything)."""
    rule = (served.queries or {}).get(lineage.RULE, f"as its {TRAINED_QUERIES_FILE} says")
    if not held_out:
        return (
            f"none of the {evaluated} {which} queries is held out from it ({rule}): on "
            "queries it trained or chose on it would look better than any held-out figure can"
        )
    smallest = significance.min_randomization_p(held_out)
    return (
        f"only {held_out} of the {evaluated} {which} queries are held out from it ({rule}), "
        f"too few for a comparison: the paired randomization test over {held_out} queries "
        f"cannot reach p < {level:g} (its smallest p is 2/2^{held_out} = {smallest:.4g})"
    )


def for_queries(
    choice: BaselineChoice, evaluated: Iterable[str], level: float, which: str = "evaluated"
) -> BaselineChoice:
    """`choice` for the `evaluated` queries: the served model is compared on those it neither
    trained nor chose on (`compare_on`), or not at all (None, with the reason in `skipped`)
    when that leaves too few for the significance test to ever give p < `level`. Applied
    once the evaluated queries are known (the judged queries the measures cover), and before
    scoring to every judged query (`which` names them in the reason), a superset."""
    served = choice.served
    if served is None:
        return choice
    evaluated = set(evaluated)
    held_out = lineage.held_out(evaluated, served.queries or {})
    if significance.min_randomization_p(len(held_out)) >= level:
        return _skip(served, _too_few(served, len(evaluated), len(held_out), level, which))
    if len(held_out) < len(evaluated):
        logging.info(
            "Baseline compared on the %d of %d %s queries held out from it",
            len(held_out),
            len(evaluated),
            which,
        )
    return replace(choice, compare_on=tuple(held_out))


def on_compared_queries(per_query: PerQuery, compare_on: Iterable[str] | None) -> PerQuery:
    """`per_query` (system -> qid -> measure -> value) with the baseline's figures kept only
    on `compare_on`: its means (aggregate.baseline) and its comparison with the candidate
    (`paired`) are then over queries it never saw. The other systems are untouched; None
    (no restriction) returns `per_query` itself."""
    if compare_on is None or "baseline" not in per_query:
        return per_query
    keep = set(compare_on)
    baseline = {q: v for q, v in per_query["baseline"].items() if q in keep}
    return {**per_query, "baseline": baseline}


def paired(candidate: Mapping[str, Any], reference: Mapping[str, Any]) -> dict[str, Any]:
    """The candidate's per-query figures on the reference's queries, for a paired test: the
    same as `candidate` against the first stage, the held-out queries against the baseline."""
    return {q: candidate[q] for q in reference}
