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
