"""planner.split_queries through the executor on the tiny collection: every split's judged
queries and those the first stage returned nothing for are recorded beside qrels.txt
(rankcore/folds.py SPLIT_QUERIES_FILE), so the evaluator counts them as trec_eval -c does,
with train/dev/test and with cross-validation's fold splits; and each split's judgments
(folds.split_qrels_file), which a Trainer reads for its dev splits."""

from __future__ import annotations

import json
from pathlib import Path

from datagen_testlib import Outputs, Tiny, run_executor, tiny_configs

from components.ranking_datagen import splits
from rankcore import folds
from rankcore.metrics.readers import read_qrels

# A test query (Tiny's split lists) whose words no document holds: BM25 returns nothing.
NO_MATCH = ("q9", "zebra quokka")


def tiny_with_unmatched_query() -> Tiny:
    """The tiny collection with q9's text replaced by words no document has (still judged)."""
    tiny = Tiny.make()
    qid, text = NO_MATCH
    tiny.queries[qid] = text
    return tiny


def split_queries(out: Outputs) -> dict[str, dict]:
    return json.loads(Path(out.uris["qrels"], folds.SPLIT_QUERIES_FILE).read_text())["splits"]


def test_a_judged_query_without_candidates_is_recorded_in_its_split(tmp_path: Path) -> None:
    tiny = tiny_with_unmatched_query()
    out = run_executor(tmp_path / "run", *tiny_configs(tiny.write_tsv(tmp_path / "data")))
    qid = NO_MATCH[0]
    assert qid not in {cols[0] for cols in out.run_lines()}  # no candidate, so no example
    record = split_queries(out)
    assert list(record) == ["train", "dev", "test"]
    for split, qids in tiny.split_lists.items():
        assert record[split][folds.JUDGED] == len(qids)
        assert record[split][folds.WITHOUT_CANDIDATES] == ([qid] if qid in qids else [])
    assert out.summary["judged_queries_without_candidates_per_split"] == {
        "train": 0,
        "dev": 0,
        "test": 1,
    }
    # Each split's judgments: its own queries' lines of qrels.txt, the unmatched one included.
    every = read_qrels(Path(out.uris["qrels"], "qrels.txt"))
    for split, qids in tiny.split_lists.items():
        own = read_qrels(Path(out.uris["qrels"], folds.split_qrels_file(split)))
        assert own == {q: every[q] for q in qids if q in every}, split


def test_with_cross_validation_each_fold_split_records_its_queries(tmp_path: Path) -> None:
    tiny = tiny_with_unmatched_query()
    k, seed = 3, 0
    configs = tiny_configs(
        tiny.write_tsv(tmp_path / "data"),
        split={"method": "kfold", "num_folds": k, "seed": seed},
    )
    out = run_executor(tmp_path / "run", *configs, cross_validation_folds=k)
    record = split_queries(out)
    assert list(record) == folds.split_names(k)
    fold_of = {q: splits.fold_of(q, k, seed) for q in tiny.queries}
    for fold in range(k):
        members = [q for q in sorted(tiny.queries) if fold_of[q] == fold]
        for role in (folds.TRAIN, folds.EVAL):
            entry = record[folds.split_name(fold, role)]
            assert entry[folds.JUDGED] == len(members)
            unmatched = [NO_MATCH[0]] if NO_MATCH[0] in members else []
            assert entry[folds.WITHOUT_CANDIDATES] == unmatched
            own = read_qrels(
                Path(out.uris["qrels"], folds.split_qrels_file(folds.split_name(fold, role)))
            )
            assert sorted(own) == members
