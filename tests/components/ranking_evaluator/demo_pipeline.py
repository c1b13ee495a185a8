"""Two real LocalDagRunner runs of the demo pipeline, shared by the evaluator and pusher tests.

Run 1 trains, evaluates (no baseline yet), blesses and pushes; run 2 changes one trainer
setting, so the Trainer retrains and the RankingEvaluator compares the new model against the
model run 1 pushed (the model served, its baseline). Everything upstream of the Trainer is cached
in run 2. Both runs live under one temporary RANKPIPE_OUTPUTS and are made at most once per
test session (module-level cache: the evaluator and pusher conftests share this module).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from ml_metadata import metadata_store
from ml_metadata.proto import metadata_store_pb2

REPO_ROOT = Path(__file__).resolve().parents[3]
PIPELINE_NAME = "eval-pusher-test"
# Few steps (the demo's floor, ndcg_cut_10 >= 0.1, is far below BM25's ~0.8, so any model
# passes) and in-process Beam: the 2-core CI machine pays seconds, not minutes, per component.
COMMON_SETTINGS = [
    f"runner.pipeline_name={PIPELINE_NAME}",
    "runner.beam.direct_running_mode=in_memory",
    "runner.beam.direct_num_workers=1",
]
# Run 2 must be pushed too (the pusher tests read both versions): one more step may score a
# hair below run 1, which the default min_delta_vs_baseline (0.0) would refuse.
RUN_SETTINGS = (
    ["trainer.train_steps=120"],
    ["trainer.train_steps=121", "evaluator.min_delta_vs_baseline=null"],
)


@dataclass
class PipelineRun:
    """Artifacts of one pipeline run, as MLMD recorded them."""

    stdout: str
    evaluation: metadata_store_pb2.Artifact
    blessing: metadata_store_pb2.Artifact
    candidate_run: metadata_store_pb2.Artifact
    report: metadata_store_pb2.Artifact
    model: metadata_store_pb2.Artifact
    pushed: metadata_store_pb2.Artifact
    metrics: dict = field(default_factory=dict)
    stderr: str = ""


@dataclass
class DemoRuns:
    outputs: Path
    pipeline_root: Path
    serving_base: Path
    first: PipelineRun
    second: PipelineRun

    @property
    def collection(self) -> Path:
        return self.outputs / "demo-collection"

    def artifact_uri(self, type_name: str, producer_dir: str) -> list[str]:
        return sorted(str(p) for p in (self.pipeline_root / producer_dir).glob(f"{type_name}/*"))


_CACHE: dict[str, DemoRuns] = {}


def _run_pipeline(outputs: Path, settings: list[str]) -> tuple[str, str]:
    """(stdout, stderr) of `rankpipe run demo`; on failure the log file's tail is raised."""
    env = dict(os.environ, RANKPIPE_OUTPUTS=str(outputs))
    argv = [sys.executable, "-m", "pipelines.cli", "run", "demo"]
    for setting in COMMON_SETTINGS + settings:
        argv += ["--set", setting]
    proc = subprocess.run(
        argv, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=1500
    )
    if proc.returncode != 0:
        log = re.search(r"^  log: +(\S+)", proc.stderr, re.M)  # the console's error block
        tail = Path(log.group(1)).read_text()[-6000:] if log else ""
        raise RuntimeError(f"pipeline run failed:\n{proc.stdout[-3000:]}\n{proc.stderr}\n{tail}")
    return proc.stdout, proc.stderr


def _latest(store: metadata_store.MetadataStore, type_name: str) -> metadata_store_pb2.Artifact:
    artifacts = store.get_artifacts_by_type(type_name)
    assert artifacts, f"no {type_name} artifact in MLMD"
    return max(artifacts, key=lambda a: a.id)


def _snapshot(pipeline_root: Path, output: tuple[str, str]) -> PipelineRun:
    config = metadata_store_pb2.ConnectionConfig()
    config.sqlite.filename_uri = str(pipeline_root / "metadata.sqlite")
    config.sqlite.connection_mode = metadata_store_pb2.SqliteMetadataSourceConfig.READONLY
    store = metadata_store.MetadataStore(config)
    evaluation = _latest(store, "ModelEvaluation")
    with open(os.path.join(evaluation.uri, "metrics.json")) as f:
        metrics = json.load(f)
    return PipelineRun(
        stdout=output[0],
        stderr=output[1],
        evaluation=evaluation,
        blessing=_latest(store, "ModelBlessing"),
        candidate_run=_latest(store, "rankpipe.TrecRun"),
        report=_latest(store, "system.HTML"),
        model=_latest(store, "Model"),
        pushed=_latest(store, "PushedModel"),
        metrics=metrics,
    )


def demo_runs(base_tmp: Path) -> DemoRuns:
    """Runs the demo pipeline twice (once per session) and returns both runs' artifacts."""
    if "runs" not in _CACHE:
        outputs = base_tmp / "outputs"
        pipeline_root = outputs / "pipelines" / PIPELINE_NAME
        first = _snapshot(pipeline_root, _run_pipeline(outputs, RUN_SETTINGS[0]))
        second = _snapshot(pipeline_root, _run_pipeline(outputs, RUN_SETTINGS[1]))
        _CACHE["runs"] = DemoRuns(
            outputs=outputs,
            pipeline_root=pipeline_root,
            serving_base=outputs / "serving" / PIPELINE_NAME,
            first=first,
            second=second,
        )
    return _CACHE["runs"]


def artifact(cls: type, uri: str, **props: object) -> object:
    """An MLMD artifact of type `cls` at `uri` with `props` set, as an executor receives it."""
    made = cls()
    made.uri = uri
    for key, value in props.items():
        setattr(made, key, value)
    return made
