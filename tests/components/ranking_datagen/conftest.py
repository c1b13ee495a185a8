"""Session-scoped RankingDataGen runs on real data, shared by the test modules here, and the
tiny sentence-encoder checkpoint of the hybrid retrieval tests.

A LocalDagRunner run costs ~30 s on Cranfield (in a child process, see
datagen_testlib.run_pipeline), so each distinct run happens once per session, at most seven in
all.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from datagen_testlib import CRANFIELD_OVERRIDES, Outputs, Tiny, cranfield_config, run_pipeline

from components.ranking_datagen.tokenization import RESERVED_TOKENS

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "trainer_module"))
import bert_testdata  # noqa: E402  (a tiny BERT checkpoint written from scratch)


@pytest.fixture(scope="session")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A tiny random BERT checkpoint whose vocab.txt has every word of the Tiny collection."""
    tiny = Tiny.make()
    texts = [*tiny.docs.values(), *tiny.queries.values()]
    words = sorted({w for t in texts for w in re.findall(r"\w+|[^\w\s]", t.lower())})
    directory = str(tmp_path_factory.mktemp("ckpt"))
    bert_testdata.write_checkpoint(directory, RESERVED_TOKENS + words, pooler=False)
    return directory


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
