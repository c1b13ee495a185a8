"""Unit tests of components.ranking_datagen.splits (no Beam)."""

from __future__ import annotations

import hashlib
from collections import Counter
from pathlib import Path

from components.ranking_datagen.readers import BadRecord
from components.ranking_datagen.splits import (
    explicit_split,
    fold_of,
    kfold_split,
    read_qid_list,
)

QIDS = [str(i) for i in range(1, 1001)]


def test_kfold_is_a_stable_function_of_seed_and_qid() -> None:
    first = {q: kfold_split(q, 5, 0, 1, 0) for q in QIDS}
    # Same result in any order and whatever other queries exist.
    assert {q: kfold_split(q, 5, 0, 1, 0) for q in reversed(QIDS[:100])} == {
        q: first[q] for q in QIDS[:100]
    }
    # Pinned values: sha256 of "seed:qid", so they hold across processes and machines.
    assert [fold_of(q, 5, 0) for q in ("1", "2", "3", "4", "5")] == [
        int.from_bytes(hashlib.sha256(f"0:{q}".encode()).digest()[:8], "big") % 5
        for q in ("1", "2", "3", "4", "5")
    ]
    counts = Counter(first.values())
    assert set(counts) == {"train", "dev", "test"}
    # Folds are about even: 200 +- 50 per fold of 1000 queries.
    assert 150 <= counts["dev"] <= 250 and 150 <= counts["test"] <= 250
    assert counts["train"] == 1000 - counts["dev"] - counts["test"]


def test_kfold_folds_map_to_splits() -> None:
    for q in QIDS[:200]:
        fold = fold_of(q, 4, 3)
        expected = "test" if fold == 2 else "dev" if fold == 0 else "train"
        assert kfold_split(q, 4, 0, 2, 3) == expected


def test_kfold_seed_changes_assignment() -> None:
    a = [kfold_split(q, 5, 0, 1, 0) for q in QIDS]
    b = [kfold_split(q, 5, 0, 1, 1) for q in QIDS]
    assert sum(x != y for x, y in zip(a, b)) > 300


def test_read_qid_list_keeps_line_numbers(tmp_path: Path) -> None:
    path = tmp_path / "dev.qids"
    path.write_text("# dev queries\n301\n\n 302  # comment\n303\n")
    assert read_qid_list(str(path)) == [(2, "301"), (4, "302"), (5, "303")]


def test_explicit_split_and_duplicates(tmp_path: Path) -> None:
    train, dev, test = (tmp_path / f"{s}.qids" for s in ("train", "dev", "test"))
    train.write_text("1\n2\n3\n")
    dev.write_text("4\n2\n")
    test.write_text("5\n")
    result = explicit_split(str(train), str(dev), str(test))
    assert result.assignment == {"1": "train", "2": "train", "3": "train", "4": "dev", "5": "test"}
    assert result.where["4"] == (str(dev), 1)
    assert result.bad == [
        BadRecord(str(dev), 2, f"duplicate qid '2': already in the train split ({train}:2)")
    ]
