"""The key figure on a finished component's console line, read from its output artifacts in
the run's MLMD store.

Which figure a component gets is its row's `key_figure` in pipelines/component_table.py (one of
the KeyFigures at the end: an output artifact type and how to read the figure from that
artifact), so adding a component does not touch the console. Nothing heavy is imported here:
the table imports this module, and the KFP entrypoint imports the table in every task's
container.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from components.corpus_encoder.constants import DOCUMENTS_PROPERTY, ENCODERS_PROPERTY
from components.ranking_evaluator.constants import BLESSED, MAIN_METRIC, METRICS_FILE
from components.ranking_tuner.constants import BEST_HYPERPARAMETERS_FILE
from pipelines.mlmd_read import output_artifacts, prop
from rankcore.constants import SUMMARY_JSON, TRAIN_RESULTS_FILE
from trainer_module.tuning_config import chosen


@dataclass(frozen=True)
class KeyFigure:
    """A component's key figure: read from its output artifact of type `artifact_type`."""

    artifact_type: str
    read: Callable[[Any], str]  # that MLMD Artifact -> the figure


def _read_json(path: str) -> dict:
    import tensorflow as tf  # gfile: artifacts may live on any filesystem

    with tf.io.gfile.GFile(path) as f:
        return json.load(f)


def key_figure(store: Any, execution_id: int, figure: KeyFigure | None) -> str:
    """`figure` of the execution's outputs ("" without a figure or such an output)."""
    if figure is None:
        return ""
    artifacts, types = output_artifacts(store, [execution_id])
    by_type = {types[a.type_id]: a for a in artifacts}
    artifact = by_type.get(figure.artifact_type)
    return figure.read(artifact) if artifact is not None else ""


def datagen_figure(summary: dict) -> str:
    examples = summary.get("examples_per_split") or {}
    text = f"{sum(examples.values()):,} examples written (" + ", ".join(
        f"{split} {n:,}" for split, n in examples.items()
    )
    bad = (summary.get("bad_records") or {}).get("total", 0)
    text += f"; {bad:,} bad records skipped)" if bad else ")"
    hybrid = summary.get("hybrid")
    if hybrid:  # datagen.hybrid: what the dense candidates added (docs/datagen.md)
        text += (
            f"; hybrid +{hybrid['candidates_added']:,} dense candidates, judged relevant in "
            f"candidates {hybrid['relevant_in_first_stage']:,} -> "
            f"{hybrid['relevant_in_union']:,} of {hybrid['relevant_judged']:,}"
        )
    return text


def _trainer_figure(model_run: Any) -> str:
    r = _read_json(os.path.join(model_run.uri, TRAIN_RESULTS_FILE))
    if r.get("final_metric") is None:
        return f"{r['steps']} steps"
    return (
        f"dev {r['validation_metric']} {r['final_metric']:.4f} "
        f"(best {r['best_metric']:.4f} at step {r['best_step']}), {r['steps']} steps"
    )


def evaluator_note(metrics: dict) -> str:
    """What the evaluator's line adds from its metrics.json: how many evaluated judged queries
    had no first-stage candidate (`queries_without_candidates`' note), "" when none had."""
    note = (metrics.get("queries_without_candidates") or {}).get("note")
    return f"; {note}" if note else ""


def _evaluator_figure(evaluation: Any) -> str:
    main = prop(evaluation, MAIN_METRIC)
    verdict = "BLESSED" if prop(evaluation, BLESSED) == 1 else "NOT BLESSED"
    try:
        note = evaluator_note(_read_json(os.path.join(evaluation.uri, METRICS_FILE)))
    except Exception:  # noqa: BLE001  (gfile's NotFoundError, bad JSON: the line stays)
        note = ""
    return (
        f"{main} {prop(evaluation, f'candidate_{main}'):.4f} vs first stage "
        f"{prop(evaluation, f'first_stage_{main}'):.4f}: {verdict}{note}"
    )


def _pusher_figure(pushed: Any) -> str:
    if prop(pushed, "pushed") == 1:
        return f"pushed version {prop(pushed, 'pushed_version')}"
    return "not pushed (model not blessed)"


def corpus_encoder_figure(vectors: Any) -> str:
    """ "1,400 documents x 2 encoders" from the CorpusVectors artifact's custom properties."""
    documents = prop(vectors, DOCUMENTS_PROPERTY) or 0
    encoders = prop(vectors, ENCODERS_PROPERTY) or 0
    return f"{documents:,} documents x {encoders} encoder{'s' if encoders != 1 else ''}"


def tuner_figure(best: dict) -> str:
    """ "chose train_steps 120, learning_rate 5e-05: dev_ndcg_cut_10 0.5476 (best of 4 trials)"
    from the Tuner's best_hyperparameters.txt (trainer_module/tuning_config.py)."""
    choice = chosen(best)
    if choice is None:
        return "chose nothing"
    values = ", ".join(f"{k} {json.dumps(v)}" for k, v in choice.values.items())
    score = choice.trials[0].get("score") if choice.trials else None
    shown = f"{score:.4f}" if isinstance(score, (int, float)) else "?"
    return f"chose {values}: {choice.objective} {shown} (best of {len(choice.trials)} trials)"


CORPUS_ENCODER = KeyFigure("rankpipe.CorpusVectors", corpus_encoder_figure)
DATAGEN = KeyFigure(
    "rankpipe.DatagenSummary",
    lambda summary: datagen_figure(_read_json(os.path.join(summary.uri, SUMMARY_JSON))),
)
TUNER = KeyFigure(
    "HyperParameters",
    lambda best: tuner_figure(_read_json(os.path.join(best.uri, BEST_HYPERPARAMETERS_FILE))),
)
TRAINER = KeyFigure("ModelRun", _trainer_figure)
EVALUATOR = KeyFigure("ModelEvaluation", _evaluator_figure)
PUSHER = KeyFigure("PushedModel", _pusher_figure)
