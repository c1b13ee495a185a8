"""The baseline a candidate is compared with: the model currently served.

The Pusher writes blessed models to `<destination>/<version>/` (integer versions, saved_model.pb
written last; the layout is components/push_destination.py) and TF Serving serves the newest
complete one. That model is the baseline, whatever runner pushed it: LocalDagRunner, Kubeflow
and Vertex read the same directory, so no orchestrator-specific lookup (such as TFX's Resolver,
which the open-source KFP backend cannot run) is needed. The version directory is the
SavedModel itself, next to its model card (model_card.json), which records the evaluation it
passed.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

# ServedModel and served_model live with the rest of the push destination's layout (the Pusher
# writes it); imported here for this module's readers, as before.
from components.push_destination import ServedModel, served_model
from rankcore import lineage

__all__ = ["BaselineChoice", "ServedModel", "find_baseline", "served_model"]


@dataclass(frozen=True)
class BaselineChoice:
    """The served model to compare with (None: none), and why a served one was not used."""

    served: ServedModel | None
    skipped: str | None = None  # a sentence for the verdict: why no comparison was made


def find_baseline(
    destination: str, candidate_uri: str, candidate_lineage: dict[str, Any] | None
) -> BaselineChoice:
    """The served model to compare `candidate_uri` with.

    None when nothing is served yet; when the served model is the candidate itself (a
    re-evaluation of a pushed model, e.g. with new thresholds: comparing a model with its own
    copy says nothing); and, with the reason in `skipped`, when it was trained for another
    collection or reads other token ids than the candidate's examples
    (rankcore/lineage.py): the evaluator feeds every model the candidate's token ids, so such a
    comparison would crash or mean nothing."""
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
        skipped = (
            f"the served model (version {served.version}, {served.path}) is not compared: {why}"
        )
        logging.warning("Baseline skipped: %s", skipped)
        return BaselineChoice(None, skipped)
    logging.info("Baseline: version %d served at %s", served.version, served.path)
    return BaselineChoice(served)
