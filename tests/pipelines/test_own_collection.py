"""A new user's route, run for real: a collection the project has never seen, `rankpipe init`
and `rankpipe run`, after the demo pushed a model into the same serving directory.

Proves three promises at once, with two real LocalDagRunner runs: the user's files are never
written (the tree is made read-only and compared byte for byte, mode and mtime, before and
after; root ignores the mode, so the comparison is what proves it); the served model of another
collection is not compared (it once crashed the evaluator with an embedding index out of
range), and the verdict says why; and the two commands end with a verdict.
"""

from __future__ import annotations

import os
import re
import stat
import subprocess
from pathlib import Path

import pytest
from test_cli import _rankpipe as rankpipe
from test_init_collection import tree_state

from pipelines import demo_data

FAST = [
    "runner.beam.direct_running_mode=in_memory",
    "runner.beam.direct_num_workers=1",
]


def _rankpipe(args: list[str], outputs: Path) -> subprocess.CompletedProcess:
    return rankpipe(*args, env=dict(os.environ, RANKPIPE_OUTPUTS=str(outputs)), timeout=900)


def _own_collection(root: Path) -> Path:
    """A BEIR collection of 200 documents with its own train/dev/test qrels (headers, 0/1)."""
    source = demo_data.generate(
        root.parent / "generated", seed=29, num_documents=200, num_queries=45
    )
    (root / "qrels").mkdir(parents=True)
    for key in ("documents", "queries"):
        (root / Path(source[key]).name).write_bytes(Path(source[key]).read_bytes())
    judged: dict[str, list[str]] = {}
    for line in Path(source["qrels"]).read_text().splitlines():
        qid, _, docid, grade = line.split()
        judged.setdefault(qid, []).append(f"{qid}\t{docid}\t{min(int(grade), 1)}")
    for n, split in enumerate(("train", "dev", "test")):
        qids = [q for i, q in enumerate(sorted(judged)) if i % 3 == n]
        lines = ["query-id\tcorpus-id\tscore"] + [row for q in qids for row in judged[q]]
        (root / "qrels" / f"{split}.tsv").write_text("\n".join(lines) + "\n")
    for path in [root, *root.rglob("*")]:
        mode = path.stat().st_mode
        path.chmod(mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))
    return root


def test_own_collection_in_two_commands_after_the_demo(tmp_path: Path) -> None:
    outputs = tmp_path / "outputs"
    collection = _own_collection(tmp_path / "mine")
    before = tree_state(collection)
    try:
        demo = _rankpipe(["run", "demo", *[a for s in FAST for a in ("--set", s)]], outputs)
        assert demo.returncode == 0, demo.stderr[-3000:]
        served = outputs / "serving" / "rankpipe-demo"
        assert any(served.iterdir())

        made = _rankpipe(
            ["init", str(tmp_path / "run"), "--collection", str(collection), "--recipe", "scratch"],
            outputs,
        )
        assert made.returncode == 0, made.stderr
        config = tmp_path / "run" / "rankpipe.yaml"
        settings = [
            *FAST,
            "trainer.train_steps=100",
            "trainer.checkpoint_every=100",
            "trainer.validate_every=100",
            f"pusher.destination={served}",
        ]
        run = _rankpipe(["run", str(config), *[a for s in settings for a in ("--set", s)]], outputs)
        assert run.returncode == 0, run.stderr[-3000:]
        assert "Evaluation (the test split, 15 queries): " in run.stdout
        assert "no baseline: the served model (version " in run.stdout
        assert "it was trained for another collection" in run.stdout
        report = re.search(r"^Report: (\S+)", run.stdout, re.M)
        assert "- warning: no baseline: the served model" in Path(report.group(1)).read_text()
    finally:
        assert tree_state(collection) == before
        for path in [collection, *collection.rglob("*")]:
            path.chmod(path.stat().st_mode | stat.S_IWUSR)  # so tmp_path can be removed


@pytest.mark.parametrize("typo", ["corpus.json", "data/corpus.jsonl"])
def test_demo_never_writes_into_a_users_directory(tmp_path: Path, typo: str) -> None:
    """The demo config pointed at the user's files with a typo once generated the demo
    collection into their directory, over their corpus: refused before anything is written."""
    collection = _own_collection(tmp_path / "mine")
    before = tree_state(collection)
    sets = [
        f"collection.documents={collection / typo}",
        f"collection.queries={collection / 'queries.jsonl'}",
        f"collection.qrels={collection / 'qrels' / 'test.tsv'}",
    ]
    result = _rankpipe(["run", "demo", *[a for s in sets for a in ("--set", s)]], tmp_path / "out")
    assert result.returncode == 2
    assert "collection.demo.enabled" in result.stderr
    assert "set collection.demo.enabled: false" in result.stderr
    assert tree_state(collection) == before
    for path in [collection, *collection.rglob("*")]:
        path.chmod(path.stat().st_mode | stat.S_IWUSR)
