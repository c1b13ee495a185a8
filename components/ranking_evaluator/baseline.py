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

import tensorflow as tf

from components.ranking_pusher import model_card
from components.ranking_pusher.executor import SAVED_MODEL_FILE, existing_versions


@dataclass(frozen=True)
class ServedModel:
    """One pushed version under the push destination."""

    path: str  # <destination>/<version>: a SavedModel directory
    version: int
    model_uri: str | None  # the Trainer's Model artifact it was pushed from (its model card)


def _card_model_uri(path: str) -> str | None:
    card = os.path.join(path, model_card.CARD_JSON)
    if not tf.io.gfile.exists(card):
        return None
    try:
        with tf.io.gfile.GFile(card) as f:
            return (json.load(f).get("model") or {}).get("uri")
    except (ValueError, AttributeError) as e:
        logging.warning("Unreadable model card %s (%s): its model is not identified", card, e)
        return None


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
            return ServedModel(path=path, version=version, model_uri=_card_model_uri(path))
        logging.warning("%s has no %s: not a baseline candidate", path, SAVED_MODEL_FILE)
    return None


def find_baseline(destination: str, candidate_uri: str) -> ServedModel | None:
    """The served model to compare `candidate_uri` with; None when nothing is served yet, or
    when the served model is the candidate itself (a re-evaluation of a pushed model, e.g. with
    new thresholds: comparing a model with its own copy says nothing)."""
    served = served_model(destination)
    if served is None:
        logging.info("No model served under %s yet: no baseline", destination)
        return None
    if served.model_uri is not None and served.model_uri.rstrip("/") == candidate_uri.rstrip("/"):
        logging.info(
            "The candidate %s is the model served (%s): no baseline", candidate_uri, served
        )
        return None
    logging.info("Baseline: version %d served at %s", served.version, served.path)
    return served
