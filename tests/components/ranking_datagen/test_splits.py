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
    qrels_file_split,
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


def _qrels(path: Path, rows: list[tuple[str, str, int]]) -> str:
    path.write_text(
        "query-id\tcorpus-id\tscore\n" + "".join(f"{q}\t{d}\t{g}\n" for q, d, g in rows)
    )
    return str(path)


def test_qrels_files_give_beirs_own_splits(tmp_path: Path) -> None:
    train = _qrels(tmp_path / "train.tsv", [(f"t{i}", "d1", 1) for i in range(50)])
    dev = _qrels(tmp_path / "dev.tsv", [("v1", "d1", 1), ("v1", "d2", 0), ("v2", "d1", 1)])
    # t3 is judged in train and test: it stays in test only (never trained beside its own
    # evaluation), and the overlap is a bad record naming both places.
    test = _qrels(tmp_path / "test.tsv", [("s1", "d1", 1), ("t3", "d2", 1)])
    split = qrels_file_split(train, dev, test, "beir_qrels", 5, 0, 0)
    assert Counter(split.assignment.values()) == {"train": 49, "dev": 2, "test": 2}
    assert split.assignment["t3"] == "test"
    assert split.where["v1"] == (dev, 2)
    assert split.bad == [
        BadRecord(
            test, 3, f"qid 't3' is judged in the train file too ({train}:5): kept in test only"
        )
    ]


def test_qrels_files_without_dev_or_test_hold_out_train(tmp_path: Path) -> None:
    train = _qrels(tmp_path / "train.tsv", [(q, "d1", 1) for q in QIDS])
    test = _qrels(tmp_path / "test.tsv", [("s1", "d1", 1)])
    held_out = {q for q in QIDS if fold_of(q, 5, 0) == 0}
    no_dev = qrels_file_split(train, None, test, "beir_qrels", 5, 0, 0)
    assert {q for q, s in no_dev.assignment.items() if s == "dev"} == held_out
    assert no_dev.assignment["s1"] == "test"
    # No test file: the dev file's queries are evaluated, the choices made on the held-out
    # slice of train, so no figure is reported on the queries it was chosen on.
    dev = _qrels(tmp_path / "dev.tsv", [("v1", "d1", 1)])
    no_test = qrels_file_split(train, dev, None, "beir_qrels", 5, 0, 0)
    assert no_test.assignment["v1"] == "test"
    assert {q for q, s in no_test.assignment.items() if s == "dev"} == held_out
