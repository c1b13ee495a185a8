"""Deterministic train/dev/test assignment of queries: k-fold by qid hash, or explicit lists."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from typing import Any, NamedTuple

import tensorflow as tf

from components.ranking_datagen.readers import BadRecord

SPLITS = ("train", "dev", "test")


def fold_of(qid: str, num_folds: int, seed: int) -> int:
    """A stable hash of (seed, qid) mod num_folds: independent of the other queries and of
    Python's per-process hash randomization."""
    digest = hashlib.sha256(f"{seed}:{qid}".encode()).digest()
    return int.from_bytes(digest[:8], "big") % num_folds


def kfold_split(qid: str, num_folds: int, dev_fold: int, test_fold: int, seed: int) -> str:
    """Assigns a query by its fold: the same config always gives the same split."""
    fold = fold_of(qid, num_folds, seed)
    if fold == test_fold:
        return "test"
    if fold == dev_fold:
        return "dev"
    return "train"


def kfold_assignment(
    qids: Iterable[str], num_folds: int, dev_fold: int, test_fold: int, seed: int
) -> dict[str, str]:
    """qid -> split for every qid (`kfold_split` each)."""
    return {q: kfold_split(q, num_folds, dev_fold, test_fold, seed) for q in qids}


def read_qid_list(path: str) -> list[tuple[int, str]]:
    """(line, qid) per non-blank line of a qid list file; `#` starts a comment."""
    out = []
    with tf.io.gfile.GFile(path, "r") as f:
        for number, line in enumerate(f, start=1):
            qid = line.split("#", 1)[0].strip()
            if qid:
                out.append((number, qid))
    return out


def _listed_again(
    path: str, line: int, first: tuple[str, int], problem: str, outcome: str = ""
) -> BadRecord:
    """A qid listed again at `path`:`line`: the bad record says `problem`, where the qid was
    first listed (`first`: file, line) and then `outcome`."""
    first_path, first_line = first
    return BadRecord(path, line, f"{problem} ({first_path}:{first_line}){outcome}")


class ExplicitSplit(NamedTuple):
    assignment: dict[str, str]  # qid -> split
    where: dict[str, tuple[str, int]]  # qid -> (list file, line)
    bad: list[BadRecord]  # qids listed twice (the first listing wins)


def explicit_split(train: str, dev: str, test: str) -> ExplicitSplit:
    """qid -> split from three qid list files; a qid listed twice is a bad record."""
    assignment: dict[str, str] = {}
    where: dict[str, tuple[str, int]] = {}
    bad: list[BadRecord] = []
    for split, path in zip(SPLITS, (train, dev, test)):
        for line, qid in read_qid_list(path):
            if qid in assignment:
                problem = f"duplicate qid {qid!r}: already in the {assignment[qid]} split"
                bad.append(_listed_again(path, line, where[qid], problem))
                continue
            assignment[qid] = split
            where[qid] = (path, line)
    return ExplicitSplit(assignment, where, bad)


def qrels_file_split(
    train: str,
    dev: str | None,
    test: str | None,
    qrels_format: str,
    num_folds: int,
    dev_fold: int,
    seed: int,
) -> ExplicitSplit:
    """qid -> split from a collection's own judgment files, as BEIR ships them
    (`qrels/train.tsv`, `dev.tsv`, `test.tsv`): a query is in the split of the file that
    judges it. The collection gives the splits; hashing them again would mix BEIR's test
    queries into training.

    Without a dev file, the train queries hashing to `dev_fold` of `num_folds` are held out as
    dev (the choices are made on them). Without a test file, the dev file's queries are
    evaluated (test) and the dev split is that held-out slice of train: no figure is then
    reported on the queries it was chosen on. A qid judged in two files stays in the later
    split of train < dev < test (never train beside its own evaluation) and is a bad record.
    """
    from components.ranking_datagen import readers  # the readers import Beam: lazily

    files = {"train": train, "dev": dev, "test": test}
    if test is None:
        files = {"train": train, "dev": None, "test": dev}
    reader = readers.get_reader(readers.QRELS, qrels_format)
    assignment: dict[str, str] = {}
    where: dict[str, tuple[str, int]] = {}
    bad: list[BadRecord] = []
    for split in SPLITS:
        path = files[split]
        if not path:
            continue
        for item in reader.read_with_lines(path):
            if isinstance(item, BadRecord):
                bad.append(item)
                continue
            line, judgment = item
            qid = judgment.qid
            if assignment.get(qid) == split:
                continue
            if qid in assignment:
                problem = f"qid {qid!r} is judged in the {assignment[qid]} file too"
                bad.append(
                    _listed_again(path, line, where[qid], problem, f": kept in {split} only")
                )
            assignment[qid] = split
            where[qid] = (path, line)
    if files["dev"] is None:
        for qid, split in assignment.items():
            if split == "train" and fold_of(qid, num_folds, seed) == dev_fold:
                assignment[qid] = "dev"
    return ExplicitSplit(assignment, where, bad)


def qrels_file_split_of(split_cfg: Any, qrels_format: str) -> ExplicitSplit:
    """`qrels_file_split` with the arguments of a `datagen.split` section (SplitConfig)."""
    return qrels_file_split(
        split_cfg.train_qrels,
        split_cfg.dev_qrels,
        split_cfg.test_qrels,
        qrels_format,
        split_cfg.num_folds,
        split_cfg.dev_fold,
        split_cfg.seed,
    )
