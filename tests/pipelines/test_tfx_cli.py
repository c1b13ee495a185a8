"""The local runner works as a TFX CLI DSL file: `tfx pipeline create` then `tfx run create`."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]
TFX = str(Path(sys.executable).parent / "tfx")


def test_tfx_cli_creates_and_runs_the_local_pipeline(tmp_path: Path) -> None:
    env = dict(
        os.environ,
        LOCAL_HOME=str(tmp_path / "tfx-home"),
        RANKPIPE_CONFIG="demo",
        RANKPIPE_OUTPUTS=str(tmp_path / "outputs"),
        # A small, quick variant of the demo: the point here is the CLI path, not the model.
        RANKPIPE_SET=" ".join(
            [
                "runner.pipeline_name=rankpipe-tfx-cli",
                "collection.demo.num_documents=200",
                "collection.demo.num_queries=30",
                "trainer.train_steps=20",
                "trainer.validate_every=20",
                "trainer.checkpoint_every=20",
                "runner.beam.direct_running_mode=in_memory",
            ]
        ),
    )
    create = subprocess.run(
        [
            TFX,
            "pipeline",
            "create",
            "--engine",
            "local",
            "--pipeline_path",
            "pipelines/local_runner.py",
        ],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert create.returncode == 0, create.stderr[-3000:]
    assert 'Pipeline "rankpipe-tfx-cli" created successfully.' in create.stdout
    run = subprocess.run(
        [TFX, "run", "create", "--engine", "local", "--pipeline_name", "rankpipe-tfx-cli"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-5000:]
    # The same console as `rankpipe run`: component lines, the summary, the log file's path.
    assert re.search(r"^ +\[\d+/\d+\] Trainer +done ", run.stdout, re.M), run.stdout
    assert "rankpipe: pipeline 'rankpipe-tfx-cli' finished." in run.stdout
    log = re.search(r"^Log: (\S+)$", run.stdout, re.M)
    assert log and "Component Trainer is finished." in Path(log.group(1)).read_text()
    root = tmp_path / "outputs" / "pipelines" / "rankpipe-tfx-cli"
    assert (root / "metadata.sqlite").exists()
    evaluations = list((root / "RankingEvaluator" / "evaluation").glob("*/metrics.json"))
    assert len(evaluations) == 1


def test_tfx_cli_vertex_writes_the_spec_rankpipe_compile_writes(tmp_path: Path) -> None:
    """`tfx pipeline create|update --engine vertex` runs pipelines/kubeflow_runner.py, which
    writes the Vertex AI PipelineJob where the CLI keeps it ($VERTEX_HOME/<name>/pipeline.json,
    what `tfx run create --engine vertex` submits): byte for byte `rankpipe compile --format
    vertex`'s file for the same config and settings."""
    from test_kubeflow_runner import cluster_overrides

    settings = cluster_overrides("demo")
    home = tmp_path / "vertex-home"
    env = dict(
        os.environ,
        # The CLI looks for kfp with `pip freeze` (tfx/tools/cli/handler/handler_factory.py).
        PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        VERTEX_HOME=str(home),
        RANKPIPE_CONFIG="demo",
        RANKPIPE_SET=" ".join(settings),
    )
    written = home / "rankpipe-demo" / "pipeline.json"
    for command in ("create", "update"):
        proc = subprocess.run(
            [TFX, "pipeline", command, "--engine", "vertex"]
            + ["--pipeline_path", "pipelines/kubeflow_runner.py"],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
        done = "created" if command == "create" else "updated"
        assert f'Pipeline "rankpipe-demo" {done} successfully.' in proc.stdout
        assert written.is_file()
    compiled = tmp_path / "compiled.json"
    argv = [sys.executable, "-m", "pipelines.cli", "compile", "demo", "--format", "vertex"]
    argv += ["--output", str(compiled)]
    for setting in settings:
        argv += ["--set", setting]
    proc = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert written.read_bytes() == compiled.read_bytes()
