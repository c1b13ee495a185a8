"""`rankpipe runs [PIPELINE]`: the past runs of a pipeline, read from its SQLite MLMD store.

One row per TFX pipeline run (MLMD context of type `pipeline_run`), newest first: when it
started, the collection (RankingDataGen's `collection` property), the model (the Trainer's
custom_config), the main metric of the candidate vs the first stage, the verdict and the pushed
version. A cached component's execution is recorded in the new run too (state CACHED, with the
reused artifacts as outputs), so a fully cached re-run shows the figures it reused.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass

from ml_metadata import metadata_store
from ml_metadata.proto import metadata_store_pb2

from components.ranking_evaluator.constants import BLESSED, MAIN_METRIC
from pipelines.mlmd_read import open_readonly, output_artifacts, prop

FAILED_STATES = (metadata_store_pb2.Execution.FAILED,)


@dataclass
class RunRow:
    run_id: str
    started_ms: int
    collection: str = "-"
    model: str = "-"
    main_metric: str | None = None
    candidate: float | None = None
    first_stage: float | None = None
    blessed: bool | None = None
    pushed_version: str | None = None
    failed: str | None = None  # the failed component's type, if one failed
    cached: int = 0  # components reused from the cache

    def cells(self) -> list[str]:
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(self.started_ms / 1000))
        if self.main_metric and self.candidate is not None and self.first_stage is not None:
            delta = self.candidate - self.first_stage
            metric = (
                f"{self.main_metric} {self.candidate:.4f} vs {self.first_stage:.4f} ({delta:+.4f})"
            )
        else:
            metric = "-"
        if self.failed:
            verdict = f"FAILED in {self.failed}"
        elif self.blessed is None:
            verdict = "-"
        else:
            verdict = "blessed" if self.blessed else "not blessed"
        return [when, self.collection, self.model, metric, verdict, self.pushed_version or "-"]


HEADER = ["when", "collection", "model", "main metric vs first stage", "verdict", "pushed"]


def open_store(path: str) -> metadata_store.MetadataStore:
    if not os.path.exists(path):
        raise FileNotFoundError(f"{path}: no MLMD store (has this pipeline run here?)")
    return open_readonly(path)


def _json_prop(execution, name: str) -> dict:
    try:
        return json.loads(prop(execution, name) or "{}")
    except ValueError:
        return {}


def _model_label(custom_config: dict) -> str:
    trainer = custom_config.get("trainer") or {}
    if not trainer:
        return "-"
    return f"{trainer.get('model', '?')}, {trainer.get('train_steps', '?')} steps"


def list_runs(store: metadata_store.MetadataStore) -> list[RunRow]:
    """Every pipeline run in the store, newest first."""
    contexts = store.get_contexts_by_type("pipeline_run")
    rows = []
    for ctx in contexts:
        row = RunRow(run_id=ctx.name, started_ms=ctx.create_time_since_epoch)
        executions = store.get_executions_by_context(ctx.id)
        type_names = {
            t.id: t.name for t in store.get_execution_types_by_id({e.type_id for e in executions})
        }
        for execution in executions:
            type_name = type_names.get(execution.type_id, "")
            short = type_name.rsplit(".", 1)[-1]
            if execution.last_known_state in FAILED_STATES:
                row.failed = short
            if execution.last_known_state == metadata_store_pb2.Execution.CACHED:
                row.cached += 1
            if short == "RankingDataGen":
                row.collection = _json_prop(execution, "collection").get("name", "-")
            elif short == "Trainer":
                row.model = _model_label(_json_prop(execution, "custom_config"))
        artifacts, art_types = output_artifacts(store, [e.id for e in executions])
        for artifact in artifacts:
            kind = art_types.get(artifact.type_id)
            if kind == "ModelEvaluation" and prop(artifact, MAIN_METRIC):
                main = prop(artifact, MAIN_METRIC)
                row.main_metric = main
                row.candidate = prop(artifact, f"candidate_{main}")
                row.first_stage = prop(artifact, f"first_stage_{main}")
                row.blessed = prop(artifact, BLESSED) == 1
            elif kind == "PushedModel" and prop(artifact, "pushed") == 1:
                row.pushed_version = str(prop(artifact, "pushed_version"))
        rows.append(row)
    return sorted(rows, key=lambda r: r.started_ms, reverse=True)


def format_table(rows: list[RunRow]) -> str:
    table = [HEADER] + [r.cells() for r in rows]
    widths = [max(len(line[i]) for line in table) for i in range(len(HEADER))]
    return "\n".join(
        "  ".join(cell.ljust(w) for cell, w in zip(line, widths)).rstrip() for line in table
    )


def pipelines_under(outputs_dir: str) -> list[str]:
    """Names of the pipelines with an MLMD store under <outputs>/pipelines/."""
    base = os.path.join(outputs_dir, "pipelines")
    if not os.path.isdir(base):
        return []
    return sorted(
        name
        for name in os.listdir(base)
        if os.path.exists(os.path.join(base, name, "metadata.sqlite"))
    )
