"""Cross-validation folds: the split names and each fold branch's roles (issue 17).

With `evaluator.cross_validation.folds: k` RankingDataGen writes two splits per fold f (every
judged query is in exactly one fold, `datagen.split`'s kfold hash with num_folds = k):
`fold<f>_train` (the sampled training groups of fold f's queries) and `fold<f>_eval` (all
first-stage candidates of fold f's queries). Fold branch i's Trainer trains on the train splits
of every fold but i and i+1, picks its checkpoint and fusion alpha on fold i+1's eval split, and
the evaluator ranks fold i's eval split with that model only: no query's judgments reach the
model that ranks it. The model that is pushed trains on every fold but the dev fold
(`datagen.split.dev_fold`) and picks its alpha there.

RankingDataGen (components), the pipeline's wiring (pipelines) and the evaluator (components)
all read these names, so they live in the layer every one of them imports. So do the record of
each split's judged queries (`SPLIT_QUERIES_FILE`), which RankingDataGen writes for every split
(train/dev/test or the fold splits) and the evaluator reads, and each split's judgments
(`split_qrels_file`), which the Trainer and the Tuner read for their dev splits.
"""

from __future__ import annotations

from typing import NamedTuple

TRAIN, EVAL = "train", "eval"
# A component built once per fold branch has the node id "<component id>_fold<i>" (the Trainer
# of fold branch 2: "Trainer_fold2"); the final (pushed) model's stays "Trainer".
NODE_SUFFIX = "_fold"
MAX_FOLDS = 10  # the evaluator declares one optional model input per fold up to this

# Beside qrels.txt in RankingDataGen's qrels artifact: per split (every split of the examples,
# train/dev/test or the fold splits), how many judged queries it holds and which of them have
# no first-stage candidate, so no example: {"splits": {split: {"judged": n,
# "without_candidates": [qid, ...]}}}. The evaluator counts those queries as trec_eval -c
# counts a judged query missing from a run (0 for every system) instead of never seeing them.
SPLIT_QUERIES_FILE = "split_queries.json"
JUDGED, WITHOUT_CANDIDATES = "judged", "without_candidates"


def split_qrels_file(split: str) -> str:
    """Beside qrels.txt, each split's judgments (its judged queries' lines of qrels.txt): a
    Trainer or Tuner reads its dev splits' file to count every judgment as the evaluator does
    (trainer_module/validation.py split_judgments) without opening the evaluated split's."""
    return f"qrels-{split}.txt"


def split_name(fold: int, role: str) -> str:
    """The split of fold `fold` in role `role` (TRAIN or EVAL)."""
    if role not in (TRAIN, EVAL):
        raise ValueError(f"fold split role must be {TRAIN!r} or {EVAL!r}, got {role!r}")
    return f"fold{fold}_{role}"


def split_names(num_folds: int) -> list[str]:
    """Every split RankingDataGen writes with `num_folds` folds, in fold order."""
    return [split_name(f, role) for f in range(num_folds) for role in (TRAIN, EVAL)]


class Branch(NamedTuple):
    """The folds one Trainer reads: trains on `train`, validates and tunes alpha on `dev`;
    `test` is the fold the evaluator ranks with it (None for the final model)."""

    test: int | None
    dev: int
    train: tuple[int, ...]

    @property
    def train_splits(self) -> list[str]:
        return [split_name(f, TRAIN) for f in self.train]

    @property
    def dev_split(self) -> str:
        return split_name(self.dev, EVAL)


def branch(fold: int, num_folds: int) -> Branch:
    """Fold branch `fold`: tests fold `fold`, validates on the next fold, trains on the rest."""
    check_folds(num_folds)
    dev = (fold + 1) % num_folds
    return Branch(fold, dev, tuple(f for f in range(num_folds) if f not in (fold, dev)))


def final_branch(dev_fold: int, num_folds: int) -> Branch:
    """The pushed model's folds: every fold but `dev_fold` trains, `dev_fold` validates."""
    check_folds(num_folds)
    return Branch(None, dev_fold, tuple(f for f in range(num_folds) if f != dev_fold))


def check_folds(num_folds: int) -> None:
    if not 3 <= num_folds <= MAX_FOLDS:
        raise ValueError(
            f"cross-validation needs 3 to {MAX_FOLDS} folds (one tests, one validates, at "
            f"least one trains), got {num_folds}"
        )


def node_id(component_id: str, fold: int) -> str:
    """The DAG node id of `component_id`'s copy for fold branch `fold`."""
    return f"{component_id}{NODE_SUFFIX}{fold}"


def parse_node_id(node: str) -> tuple[str, int | None]:
    """(component id, fold) of a node id; fold None for a node that is not a fold copy."""
    base, sep, fold = node.rpartition(NODE_SUFFIX)
    if sep and base and fold.isdigit():
        return base, int(fold)
    return node, None
