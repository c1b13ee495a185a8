"""A push destination, `<destination>/<version>/`, and the evaluation files both sides read.

The Pusher (components/ranking_pusher) writes blessed models there: integer version
directories (TF Serving's layout), each a SavedModel whose saved_model.pb is written last, next
to its model card (model_card.md/.json, which records the evaluation the model passed) and the
queries it trained and chose on (trained_queries.json). The RankingEvaluator reads it back:
the newest complete version is the model served, its baseline
(components/ranking_evaluator/baseline.py), and `rankpipe rerank` scores with it
(components/ranking_evaluator/rerank.py). The Pusher also reads the evaluator's metrics.json for
the card. Both components import the layout and those names from here, so neither imports the
other (docs/architecture.md).

TensorFlow is imported where a function needs it: the evaluator's constants re-export the names
here, and the CLI reads those without loading TensorFlow (seconds, and start-up noise).
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass
from typing import Any

from rankcore import lineage

# A version directory: the SavedModel (its graph written last: the sign of a complete model)
# and the model card beside it.
SAVED_MODEL_FILE = "saved_model.pb"
CARD_MD, CARD_JSON = "model_card.md", "model_card.json"

# The ModelEvaluation artifact's full result, which the Pusher's card summarizes, and its keys
# that are also ModelEvaluation custom properties.
METRICS_FILE = "metrics.json"
# Beside the SavedModel: the queries the pushed model trained and chose on
# (rankcore/lineage.py trained_queries), so a later evaluation compares it only on the others.
# A file of its own: with a large collection the lists are long, and the card stays readable.
TRAINED_QUERIES_FILE = "trained_queries.json"
MAIN_METRIC = "main_metric"
BLESSED = "blessed"


def version_path(destination: str, version: int | str) -> str:
    """`<destination>/<version>`: one version's directory."""
    return os.path.join(destination, str(version))


def existing_versions(base: str) -> list[int]:
    """TF Serving's versions under `base`: the sub-directories named by an integer."""
    import tensorflow as tf

    if not tf.io.gfile.isdir(base):
        return []
    names = (name.rstrip("/") for name in tf.io.gfile.listdir(base))
    return sorted(int(name) for name in names if name.isdigit())


@dataclass(frozen=True)
class ServedModel:
    """One pushed version under the push destination."""

    path: str  # <destination>/<version>: a SavedModel directory
    version: int
    model_uri: str | None  # the Trainer's Model artifact it was pushed from (its model card)
    # What it was trained for (rankcore/lineage.py), from its card; None: not recorded.
    lineage: dict[str, Any] | None = None
    # The queries it trained and chose on, or those held out from it (TRAINED_QUERIES_FILE,
    # rankcore/lineage.py); None: not recorded (pushed before the record was kept, or neither
    # the datagen summary nor its evaluation said).
    queries: dict[str, Any] | None = None


def _read_json(path: str, name: str, unreadable: str) -> dict[str, Any]:
    """The JSON object in `path/name`; {} when the file is missing or (logged with what
    `unreadable` says follows) not a JSON object."""
    import tensorflow as tf

    file = os.path.join(path, name)
    if not tf.io.gfile.exists(file):
        return {}
    try:
        with tf.io.gfile.GFile(file) as f:
            data = json.load(f)
        return data if isinstance(data, dict) else {}
    except ValueError as e:
        logging.warning("Unreadable %s (%s): %s", file, e, unreadable)
        return {}


def served_model(destination: str) -> ServedModel | None:
    """The newest version under `destination` that holds a complete SavedModel, or None.

    A version without saved_model.pb is a push in progress (or a broken one) on an object
    store, where the Pusher writes in place with saved_model.pb last: it is skipped, as TF
    Serving skips it. Works on any tf.io.gfile filesystem (local, gs://, ...).
    """
    import tensorflow as tf

    if not destination:
        return None
    for version in sorted(existing_versions(destination), reverse=True):
        path = version_path(destination, version)
        if tf.io.gfile.exists(os.path.join(path, SAVED_MODEL_FILE)):
            card = _read_json(path, CARD_JSON, "its model is not identified")
            model = card.get("model") if isinstance(card.get("model"), dict) else {}
            data = card.get("data") if isinstance(card.get("data"), dict) else {}
            queries = _read_json(
                path, TRAINED_QUERIES_FILE, "the queries it trained on are not known"
            )
            return ServedModel(
                path=path,
                version=version,
                model_uri=model.get("uri"),
                lineage=data.get(lineage.RECORD_KEY),
                queries=queries or None,
            )
        logging.warning("%s has no %s: not a baseline candidate", path, SAVED_MODEL_FILE)
    return None
