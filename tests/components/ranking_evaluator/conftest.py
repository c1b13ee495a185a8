"""Fixtures of the RankingEvaluator tests (the pipeline runs are shared with ranking_pusher)."""

from __future__ import annotations

import pytest
from demo_pipeline import DemoRuns, demo_runs


@pytest.fixture(scope="session")
def pipeline_runs(tmp_path_factory: pytest.TempPathFactory) -> DemoRuns:
    return demo_runs(tmp_path_factory.mktemp("rankpipe-demo-runs"))
