"""Session-scoped RankingDataGen runs on real data, shared by the test modules here.

A LocalDagRunner run costs ~30 s on Cranfield (in a child process, see
datagen_testlib.run_pipeline), so each distinct run happens once per session, at most seven in
all.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from datagen_testlib import CRANFIELD_OVERRIDES, Outputs, cranfield_config, run_pipeline


@pytest.fixture(scope="session")
def shared_env(shared_data: Path) -> Iterator[Path]:
    old = os.environ.get("RANKPIPE_SHARED_DATA")
    os.environ["RANKPIPE_SHARED_DATA"] = str(shared_data)
    yield shared_data
    if old is None:
        os.environ.pop("RANKPIPE_SHARED_DATA", None)
    else:
        os.environ["RANKPIPE_SHARED_DATA"] = old


@pytest.fixture(scope="session")
def cranfield_bm25(shared_env: Path, tmp_path_factory: pytest.TempPathFactory) -> Outputs:
    return run_pipeline(
        tmp_path_factory.mktemp("cranfield-bm25"), *cranfield_config(*CRANFIELD_OVERRIDES)
    )
