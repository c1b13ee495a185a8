"""The key figure on a finished component's console line, read from its output artifacts in
the run's MLMD store.

Which figure a component gets is its row's `key_figure` in pipelines/component_table.py (one of
the functions below, given the component's output artifacts by type name), so adding a
component does not touch the console. Nothing heavy is imported here: the table imports this
module, and the KFP entrypoint imports the table in every task's container.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import Any

from pipelines.mlmd_read import output_artifacts, prop

# A component's output artifacts (MLMD Artifact protos) by type name -> the figure.
Figure = Callable[[dict[str, Any]], str]


def _read_json(path: str) -> dict:
    import tensorflow as tf  # gfile: artifacts may live on any filesystem

    with tf.io.gfile.GFile(path) as f:
        return json.load(f)


def key_figure(store: Any, execution_id: int, figure: Figure | None) -> str:
    """`figure` applied to the outputs of the execution ("" without a figure or outputs)."""
    if figure is None:
        return ""
    artifacts, types = output_artifacts(store, [execution_id])
    by_type = {types[a.type_id]: a for a in artifacts}
    return figure(by_type) if by_type else ""


def datagen_key_figure(outputs: dict) -> str:
    if "rankpipe.DatagenSummary" not in outputs:
        return ""
    return datagen_figure(
        _read_json(os.path.join(outputs["rankpipe.DatagenSummary"].uri, "summary.json"))
    )


def datagen_figure(summary: dict) -> str:
    examples = summary.get("examples_per_split") or {}
    text = f"{sum(examples.values()):,} examples written (" + ", ".join(
        f"{split} {n:,}" for split, n in examples.items()
    )
    bad = (summary.get("bad_records") or {}).get("total", 0)
    return text + (f"; {bad:,} bad records skipped)" if bad else ")")


def trainer_key_figure(outputs: dict) -> str:
    if "ModelRun" not in outputs:
        return ""
    r = _read_json(os.path.join(outputs["ModelRun"].uri, "train_results.json"))
    if r.get("final_metric") is None:
        return f"{r['steps']} steps"
    return (
        f"dev {r['validation_metric']} {r['final_metric']:.4f} "
        f"(best {r['best_metric']:.4f} at step {r['best_step']}), {r['steps']} steps"
    )


def evaluator_key_figure(outputs: dict) -> str:
    if "ModelEvaluation" not in outputs:
        return ""
    ev = outputs["ModelEvaluation"]
    main = prop(ev, "main_metric")
    verdict = "BLESSED" if prop(ev, "blessed") == 1 else "NOT BLESSED"
    return (
        f"{main} {prop(ev, f'candidate_{main}'):.4f} vs first stage "
        f"{prop(ev, f'first_stage_{main}'):.4f}: {verdict}"
    )


def pusher_key_figure(outputs: dict) -> str:
    if "PushedModel" not in outputs:
        return ""
    pushed = outputs["PushedModel"]
    if prop(pushed, "pushed") == 1:
        return f"pushed version {prop(pushed, 'pushed_version')}"
    return "not pushed (model not blessed)"
