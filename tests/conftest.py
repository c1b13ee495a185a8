"""Shared pytest fixtures."""

from __future__ import annotations

import functools
import json
import os
import re
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent

# pytest puts tests/ on sys.path for this conftest, and tests/components/ (no __init__.py) would
# then shadow the project's components package as a namespace package. Repo root goes first.
sys.path.insert(0, str(REPO_ROOT))

# Every test runs on a CPU without native bfloat16, whatever the host has, so its figures and
# tolerances do not depend on the host: `mixed_precision: auto` would otherwise pick
# mixed_bfloat16 for the pretrained transformers on a host with AVX512_BF16 or AMX
# (trainer_module/hardware.py reads the flags from RANKPIPE_CPUINFO; pipelines that tests run in
# a subprocess inherit it). The bfloat16 path is tested with simulated flags
# (tests/trainer_module/test_trainer_precision.py) and with an explicit policy.
os.environ["RANKPIPE_CPUINFO"] = os.devnull


@pytest.fixture(scope="session", autouse=True)
def _tfx_staging_copies_removed():
    """Removes the copies of TFX that executors built in this session. A BaseBeamExecutor whose
    Beam args name no container image copies the installed TFX (49 MB) to a new
    /tmp/tmpXXXX/build/tfx and packs it for the workers (tfx/utils/dependency_utils.py
    build_ephemeral_package). Pipelines never do (pipelines/config.py adds
    DIRECT_RUNNER_NO_STAGING for the DirectRunner), but tests that build an executor's context
    by hand do, and nothing removed the copies: about 20 per `make test`, until /tmp filled."""
    from tfx.utils import dependency_utils

    made: list[str] = []
    build = dependency_utils.build_ephemeral_package

    def recorded() -> str:
        made.append(build())
        return made[-1]

    dependency_utils.build_ephemeral_package = recorded
    yield
    dependency_utils.build_ephemeral_package = build
    for sdist in made:  # <mkdtemp>/build/tfx/dist/tfx_ephemeral-<version>.tar.gz
        shutil.rmtree(Path(sdist).parents[3], ignore_errors=True)


@pytest.fixture(autouse=True)
def _tf_log_level_restored():
    """A command run in process (`cli.main([...])`) sets TF_CPP_MIN_LOG_LEVEL for its own
    start-up (cli.quiet_start_up); without this, every `rankpipe run` a later test starts in a
    subprocess would inherit it, and its log file would lack TensorFlow's C++ lines, which
    test_cli.py checks are there (it failed when test_kubeflow_runner.py ran first)."""
    before = os.environ.get("TF_CPP_MIN_LOG_LEVEL")
    yield
    if before is None:
        os.environ.pop("TF_CPP_MIN_LOG_LEVEL", None)
    else:
        os.environ["TF_CPP_MIN_LOG_LEVEL"] = before


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


@pytest.fixture
def binary_beir(tmp_path: Path, shared_data: Path) -> dict[str, str]:
    """A small collection judged 0/1 in the BEIR layout, made in tmp_path from the MS MARCO
    subset: its first 600 passages, its queries, and its TREC DL grades made binary the TREC
    DL way (1 "related" -> 0, 2 and 3 -> 1), judgments of other passages left out. What CISI or
    most BEIR collections look like; the `collection.*` keys that point a config at it."""
    source = shared_data / "msmarco-dl19-subset"
    root = tmp_path / "binary-beir"
    (root / "qrels").mkdir(parents=True)
    with (source / "corpus.jsonl").open() as f:
        passages = [next(f) for _ in range(600)]
    (root / "corpus.jsonl").write_text("".join(passages))
    docids = {json.loads(line)["_id"] for line in passages}
    lines = ["query-id\tcorpus-id\tscore"]
    for line in (source / "qrels" / "test.tsv").read_text().splitlines():
        qid, docid, grade = line.split("\t")
        if docid in docids:
            lines.append(f"{qid}\t{docid}\t{int(int(grade) >= 2)}")
    (root / "qrels" / "test.tsv").write_text("\n".join(lines) + "\n")
    (root / "queries.jsonl").write_bytes((source / "queries.jsonl").read_bytes())
    return {
        "name": "binary-beir",
        "documents": str(root / "corpus.jsonl"),
        "documents_format": "beir_corpus",
        "queries": str(root / "queries.jsonl"),
        "queries_format": "beir_queries",
        "qrels": str(root / "qrels" / "test.tsv"),
        "qrels_format": "beir_qrels",
    }


# `make test` runs the suite on two pytest-xdist workers (`--dist loadfile`): one pytest
# process keeps only ~1.15 of the two cores busy, most of a pipeline run being one thread of
# Python (TFX orchestration, Beam's DirectRunner, imports). Each test file goes to one worker
# whole, so its module fixtures run once. Files that share a costly session fixture (pipeline
# runs that a module-level cache hands to several files) go to the same worker too, so those
# runs happen once: the scheduler below. (xdist's own `loadgroup` marks cannot do it under
# pytest 9, whose node ids no longer take xdist's `@group` suffix.) Session fixtures not named
# here are cheap enough to build on each worker.
SHARED_RUNS = ("pipeline_runs", "cranfield_bm25")


@functools.cache
def shared_run_group(path: str) -> str:
    """The scope of a test file (repository-relative): the first SHARED_RUNS fixture its text
    names, else the file itself. Read from the source because xdist's controller schedules
    node ids and never sees the workers' fixtures."""
    text = (REPO_ROOT / path).read_text() if path.endswith(".py") else ""
    return next((f"shared:{n}" for n in SHARED_RUNS if re.search(rf"\b{n}\b", text)), path)


@pytest.hookimpl(optionalhook=True)  # pytest without xdist (`-p no:xdist`) has no such hook
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """`--dist loadfile`, with the files of one SHARED_RUNS fixture as one scope."""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class SharedRunScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return shared_run_group(nodeid.split("::", 1)[0])

    return SharedRunScheduling(config, log)
