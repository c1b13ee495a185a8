"""Setup shared by the benchmarks that need a real Cranfield pipeline run."""

from __future__ import annotations

import os
import subprocess
import sys
import time
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
