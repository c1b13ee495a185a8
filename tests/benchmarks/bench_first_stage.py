"""BM25 with and without a stemmer, on the choice queries only (not CI; issue 39 part 0).

    python tests/benchmarks/bench_first_stage.py [cranfield msmarco-subset nfcorpus ...]
        [--stemmers none,porter,english] [--json FILE]

For each collection it runs the pipeline's own BM25 (the sharded steps of candidates.py in one
process: tests/components/ranking_datagen/bm25_reference.py's `sharded_bm25_run`, top
`datagen.candidates_depth`, `datagen.bm25` k1 and b as the config sets them) once per
`datagen.bm25.stemmer` value and prints nDCG@10 (trec_eval -c: a choice query without any
candidate scores 0) on the queries a config choice may be made on, never on evaluated ones:

- a shipped config (a name in pipelines/configs/, or a path) cross-validated over k folds: each
  fold branch's dev queries (branch i validates on fold i+1: rankcore/folds.py), the figure
  averaged over the k branches as docs/results.md reports the other choices ("chosen on the
  fold branches' dev queries"; every judged query is dev for exactly one branch). Without
  cross-validation: the `datagen.split` dev queries.
- `nfcorpus` (`$RANKPIPE_SHARED_DATA/nfcorpus`, BEIR train and dev judgments, no test file):
  the held-out slice of the train queries that splits.qrels_file_split makes the dev split
  (train queries hashing to fold 0 of 5, seed 0), judged by qrels/train.tsv. The dev.tsv
  queries are the evaluated ones there and are not read.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import NamedTuple

REPO_ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO_ROOT))
sys.path.insert(0, str(REPO_ROOT / "tests" / "components" / "ranking_datagen"))

from bm25_reference import sharded_bm25_run  # noqa: E402

from components.ranking_datagen import splits  # noqa: E402
from components.ranking_datagen.candidates import STEMMERS  # noqa: E402
from components.ranking_datagen.readers import get_reader  # noqa: E402
from components.ranking_evaluator.significance import (  # noqa: E402
    randomization_test,
    win_tie_loss,
)
from rankcore import folds  # noqa: E402
from rankcore.metrics import compute_metrics, read_qrels  # noqa: E402

MEASURE = "ndcg_cut_10"
SHARD_SIZE = 1024  # the reader batch: the pipeline's shards


class Collection(NamedTuple):
    """What the benchmark needs of a collection: texts, judgments and the choice queries."""

    name: str
    docs: list[tuple[str, str]]
    queries: dict[str, str]  # the choice queries only
    qrels: dict[str, dict[str, int]]
    groups: dict[str, list[str]]  # label -> choice qids (a fold branch's dev queries)
    depth: int
    k1: float
    b: float
    relevance_level: int
    configured: str  # the config's own datagen.bm25.stemmer


def _shared_data() -> Path:
    return Path(os.environ.get("RANKPIPE_SHARED_DATA", REPO_ROOT.parent / "shared" / "data"))


def _read(kind: str, fmt: str, path: str, **options) -> list:
    return list(get_reader(kind, fmt, **options).read(path))


def from_config(name: str) -> Collection:
    """A shipped config's collection and its choice queries (the fold branches' dev folds)."""
    from pipelines.config import load_config

    cfg = load_config(name)
    coll, datagen, split = cfg.collection, cfg.datagen, cfg.datagen.split
    docs = _read(
        "documents",
        coll.documents_format,
        coll.documents,
        allow_empty_text=coll.allow_empty_documents,
    )
    queries = {q.qid: q.text for q in _read("queries", coll.queries_format, coll.queries)}
    qrels = read_qrels(coll.qrels, coll.qrels_format)
    judged = sorted(q for q in qrels if q in queries)
    k = cfg.evaluator.cross_validation.folds
    if k:
        groups = {
            f"branch {i} (dev fold {folds.branch(i, k).dev})": [
                q for q in judged if splits.fold_of(q, k, split.seed) == folds.branch(i, k).dev
            ]
            for i in range(k)
        }
    elif split.method == "kfold":
        groups = {
            "dev": [
                q
                for q in judged
                if splits.kfold_split(
                    q, split.num_folds, split.dev_fold, split.test_fold, split.seed
                )
                == "dev"
            ]
        }
    else:
        raise SystemExit(f"{name}: split method {split.method!r}: name the choice queries")
    choice = {q for g in groups.values() for q in g}
    return Collection(
        cfg.collection.name,
        [(d.docid, d.text) for d in docs],
        {q: queries[q] for q in sorted(choice)},
        {q: qrels[q] for q in choice},
        groups,
        datagen.candidates_depth,
        datagen.bm25.k1,
        datagen.bm25.b,
        cfg.evaluator.relevance_level,
        datagen.bm25.stemmer,
    )


def nfcorpus() -> Collection:
    """NFCorpus's choice queries: the held-out slice of train (qrels_file_split's dev split
    with the SplitConfig defaults), judged by qrels/train.tsv; dev.tsv only to know which
    queries it takes away (a query judged in both is evaluated, never chosen on)."""
    base = _shared_data() / "nfcorpus"
    train, dev = str(base / "qrels" / "train.tsv"), str(base / "qrels" / "dev.tsv")
    assignment = splits.qrels_file_split(train, None, dev, "beir_qrels", 5, 0, 0).assignment
    choice = sorted(q for q, s in assignment.items() if s == "dev")
    qrels = read_qrels(train, "beir_qrels")
    queries = {
        q.qid: q.text
        for q in _read("queries", "beir_queries", str(base / "queries.jsonl"))
        if q.qid in set(choice)
    }
    docs = _read("documents", "beir_corpus", str(base / "corpus.jsonl"))
    return Collection(
        "nfcorpus",
        [(d.docid, d.text) for d in docs],
        queries,
        {q: qrels[q] for q in choice},
        {"held-out train slice": choice},
        100,
        0.9,
        0.4,
        1,
        "(no shipped config)",
    )


def evaluate(coll: Collection, stemmer: str) -> dict:
    """BM25 with `stemmer` over the collection: nDCG@10 per choice group and averaged."""
    start = time.perf_counter()
    run = sharded_bm25_run(
        coll.docs, coll.queries, coll.depth, coll.k1, coll.b, SHARD_SIZE, stemmer=stemmer
    )
    seconds = time.perf_counter() - start
    per_query = compute_metrics(
        coll.qrels, run, [MEASURE], relevance_level=coll.relevance_level, complete=True
    )
    groups = {
        label: statistics.fmean(per_query[q][MEASURE] for q in qids)
        for label, qids in coll.groups.items()
    }
    return {
        "stemmer": stemmer,
        "mean_over_groups": statistics.fmean(groups.values()),
        "mean_over_queries": statistics.fmean(per_query[q][MEASURE] for q in coll.queries),
        "groups": groups,
        "queries": len(coll.queries),
        "per_query": {q: per_query[q][MEASURE] for q in sorted(coll.queries)},
        "without_candidates": sum(1 for q in coll.queries if not run.get(q)),
        "seconds": round(seconds, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "collections", nargs="*", default=["cranfield", "msmarco-subset", "nfcorpus"]
    )
    parser.add_argument("--stemmers", default=",".join(STEMMERS))
    parser.add_argument("--json", help="also write the figures here")
    args = parser.parse_args()
    results = {}
    for name in args.collections:
        coll = nfcorpus() if name == "nfcorpus" else from_config(name)
        print(
            f"\n{name}: {len(coll.docs)} documents, {len(coll.queries)} choice queries in "
            f"{len(coll.groups)} group(s), depth {coll.depth}, k1 {coll.k1}, b {coll.b}, "
            f"configured stemmer: {coll.configured}"
        )
        rows = [evaluate(coll, s) for s in args.stemmers.split(",")]
        labels = list(coll.groups)
        print(
            f"| stemmer | nDCG@10, mean of groups | mean of queries | {' | '.join(labels)} "
            f"| vs {rows[0]['stemmer']}: p, W/T/L | no candidate | s |"
        )
        print("|---" * (len(labels) + 6) + "|")
        base = list(rows[0]["per_query"].values())
        for r in rows:
            cells = " | ".join(f"{r['groups'][g]:.4f}" for g in labels)
            scores = list(r["per_query"].values())
            r["p_vs_first"] = randomization_test(scores, base)
            r["wtl_vs_first"] = win_tie_loss(scores, base)
            versus = (
                ""
                if r is rows[0]
                else f"{r['p_vs_first']:.4f}, {'/'.join(map(str, r['wtl_vs_first']))}"
            )
            print(
                f"| {r['stemmer']} | {r['mean_over_groups']:.4f} | "
                f"{r['mean_over_queries']:.4f} | {cells} | {versus} | "
                f"{r['without_candidates']} | {r['seconds']} |"
            )
        results[name] = rows
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
