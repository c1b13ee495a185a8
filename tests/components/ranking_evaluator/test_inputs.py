"""inputs.py's reading of RankingDataGen's split queries record (rankcore/folds.py
SPLIT_QUERIES_FILE): per evaluated part, the judged queries of its split without a candidate;
no record (an artifact from before it) is None, a split it lacks an error naming it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from components.ranking_evaluator.inputs import Part, read_split_queries, without_candidates
from rankcore import folds

RECORD = {
    "fold0_train": {"judged": 2, "without_candidates": ["q2"]},
    "fold0_eval": {"judged": 2, "without_candidates": ["q2"]},
    "fold1_train": {"judged": 3, "without_candidates": []},
    "fold1_eval": {"judged": 3, "without_candidates": []},
}


def test_each_fold_part_gets_its_eval_splits_queries_without_candidates(tmp_path: Path) -> None:
    (tmp_path / folds.SPLIT_QUERIES_FILE).write_text(json.dumps({"splits": RECORD}))
    record = read_split_queries(str(tmp_path))
    parts = [Part(f, folds.split_name(f, folds.EVAL), f"m{f}", None) for f in (0, 1)]
    assert without_candidates(record, parts) == [["q2"], []]


def test_no_record_is_none_and_a_missing_split_names_it(tmp_path: Path) -> None:
    assert read_split_queries(str(tmp_path)) is None
    assert without_candidates(None, [Part(None, "test", "m", None)]) is None
    with pytest.raises(ValueError, match=r"records no split 'test' \(it has \['fold0_eval'"):
        without_candidates(RECORD, [Part(None, "test", "m", None)])
    (tmp_path / folds.SPLIT_QUERIES_FILE).write_text("[]")
    with pytest.raises(ValueError, match="rerun RankingDataGen"):
        read_split_queries(str(tmp_path))
