"""Setup shared by the benchmarks that need a real Cranfield pipeline run."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

from ml_metadata import metadata_store
from ml_metadata.proto import metadata_store_pb2

REPO_ROOT = Path(__file__).resolve().parents[2]


def run_cranfield_pipeline(
    outputs: Path, name: str, overrides: list[str], config: str = "cranfield-knrm"
) -> Path:
    """`rankpipe run CONFIG` (a Cranfield config; the from-scratch one by default) as pipeline
    `name` under `outputs` (RANKPIPE_OUTPUTS) with `--set` overrides; exits with its output on
    failure; returns the pipeline root."""
    argv = [sys.executable, "-m", "pipelines.cli", "run", config]
    for override in [f"runner.pipeline_name={name}", *overrides]:
        argv += ["--set", override]
    print(f"running the {config} pipeline {name} under {outputs} ...", flush=True)
    t0 = time.perf_counter()
    env = dict(os.environ, RANKPIPE_OUTPUTS=str(outputs))
    proc = subprocess.run(argv, cwd=REPO_ROOT, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"pipeline failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}")
    print(f"  done in {time.perf_counter() - t0:.0f}s")
    return outputs / "pipelines" / name


def readonly_store(pipeline_root: Path) -> metadata_store.MetadataStore:
    """The pipeline run's SQLite MLMD store, opened read-only."""
    config = metadata_store_pb2.ConnectionConfig()
    config.sqlite.filename_uri = str(pipeline_root / "metadata.sqlite")
    config.sqlite.connection_mode = metadata_store_pb2.SqliteMetadataSourceConfig.READONLY
    return metadata_store.MetadataStore(config)


def artifact_uris(pipeline_root: Path, type_name: str) -> list[str]:
    """The URIs of the run's artifacts of one type, oldest first."""
    found = readonly_store(pipeline_root).get_artifacts_by_type(type_name)
    return [a.uri for a in sorted(found, key=lambda a: a.id)]


def latest_uri(pipeline_root: Path, type_name: str) -> str:
    return artifact_uris(pipeline_root, type_name)[-1]


def execution_seconds(pipeline_root: Path) -> dict[str, list[float]]:
    """Each execution's seconds (MLMD create -> last update) by component class name, a fold
    branch's copies in the same list."""
    store = readonly_store(pipeline_root)
    types = {t.id: t.name.rsplit(".", 1)[-1] for t in store.get_execution_types()}
    out: dict[str, list[float]] = defaultdict(list)
    for e in store.get_executions():
        out[types[e.type_id]].append(
            (e.last_update_time_since_epoch - e.create_time_since_epoch) / 1000
        )
    return dict(out)


def split_records(examples: str, split: str) -> list[bytes]:
    """The serialized examples of one split of an Examples artifact (GZIP TFRecords)."""
    import tensorflow as tf  # the benchmarks that read no examples do not import TensorFlow

    files = tf.io.gfile.glob(os.path.join(examples, f"Split-{split}", "*"))
    return [r.numpy() for r in tf.data.TFRecordDataset(files, compression_type="GZIP")]
