"""Shared pytest fixtures."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent

# pytest puts tests/ on sys.path for this conftest, and tests/components/ (no __init__.py) would
# then shadow the project's components package as a namespace package. Repo root goes first.
sys.path.insert(0, str(REPO_ROOT))


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """Real test collections: $RANKPIPE_SHARED_DATA, default <repo>/../shared/data.

    Skips when absent, except under CI=true, where CI always has the data and absence is a
    failure (a silently skipped suite would pass without testing anything).
    """
    path = Path(os.environ.get("RANKPIPE_SHARED_DATA", REPO_ROOT.parent / "shared" / "data"))
    if not path.is_dir():
        reason = (
            f"shared test data not found at {path}; set RANKPIPE_SHARED_DATA to the folder "
            "holding cranfield/, msmarco-dl19-subset/ and trec_eval/"
        )
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"CI=true but {reason}")
        pytest.skip(reason)
    return path
