"""The baseline a candidate is compared with: the model currently served.

The Pusher writes blessed models to `<destination>/<version>/` (integer versions, saved_model.pb
written last; components/ranking_pusher/executor.py) and TF Serving serves the newest complete
one. That model is the baseline, whatever runner pushed it: LocalDagRunner, Kubeflow and Vertex
read the same directory, so no orchestrator-specific lookup (such as TFX's Resolver, which the
open-source KFP backend cannot run) is needed. The version directory is the SavedModel itself,
next to its model card (model_card.json), which records the evaluation it passed.
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass
from typing import Any

import tensorflow as tf

from components.ranking_pusher import model_card
from components.ranking_pusher.executor import SAVED_MODEL_FILE, existing_versions
from rankcore import lineage


@dataclass(frozen=True)
class ServedModel:
    """One pushed version under the push destination."""

    path: str  # <destination>/<version>: a SavedModel directory
    version: int
    model_uri: str | None  # the Trainer's Model artifact it was pushed from (its model card)
    # What it was trained for (rankcore/lineage.py), from its card; None: not recorded.
    lineage: dict[str, Any] | None = None


@dataclass(frozen=True)
class BaselineChoice:
    """The served model to compare with (None: none), and why a served one was not used."""

    served: ServedModel | None
    skipped: str | None = None  # a sentence for the verdict: why no comparison was made


def _read_card(path: str) -> dict[str, Any]:
    card = os.path.join(path, model_card.CARD_JSON)
    if not tf.io.gfile.exists(card):
        return {}
    try:
        with tf.io.gfile.GFile(card) as f:
            data = json.load(f)
        return data if isinstance(data, dict) else {}
    except ValueError as e:
        logging.warning("Unreadable model card %s (%s): its model is not identified", card, e)
        return {}


def served_model(destination: str) -> ServedModel | None:
    """The newest version under `destination` that holds a complete SavedModel, or None.

    A version without saved_model.pb is a push in progress (or a broken one) on an object
    store, where the Pusher writes in place with saved_model.pb last: it is skipped, as TF
    Serving skips it. Works on any tf.io.gfile filesystem (local, gs://, ...).
    """
    if not destination:
        return None
    for version in sorted(existing_versions(destination), reverse=True):
        path = os.path.join(destination, str(version))
        if tf.io.gfile.exists(os.path.join(path, SAVED_MODEL_FILE)):
            card = _read_card(path)
            model = card.get("model") if isinstance(card.get("model"), dict) else {}
            data = card.get("data") if isinstance(card.get("data"), dict) else {}
            return ServedModel(
                path=path,
                version=version,
                model_uri=model.get("uri"),
                lineage=data.get(lineage.RECORD_KEY),
            )
        logging.warning("%s has no %s: not a baseline candidate", path, SAVED_MODEL_FILE)
    return None


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
