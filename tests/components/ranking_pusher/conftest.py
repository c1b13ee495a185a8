"""Fixtures of the RankingPusher tests: the demo pipeline runs the evaluator tests also use."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

# The shared runs live beside the evaluator tests; importing the same module object (by the
# same name) makes both test directories share one pair of pipeline runs per session.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "ranking_evaluator"))
from demo_pipeline import DemoRuns, demo_runs  # noqa: E402


@pytest.fixture(scope="session")
def pipeline_runs(tmp_path_factory: pytest.TempPathFactory) -> DemoRuns:
    return demo_runs(tmp_path_factory.mktemp("rankpipe-demo-runs"))
