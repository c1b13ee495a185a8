"""Benchmark: compute_metrics + aggregate against calling pytrec_eval directly.

Run: .venv/bin/python tests/benchmarks/bench_metrics.py [--queries N] [--docs N] [--repeats N]

Synthetic, seeded run of 10,000 queries x 1,000 docs (scores rounded to 3 decimals so
that ties, and so trec_eval's docno tie-breaking, occur) with graded synthetic qrels.
Times both paths on the pipeline's measures (interleaved repeats; wall and CPU time),
prints a table with the ratios (goal <= 1.1x), checks that both agree, and checks
`rankpipe eval` against the reference trec_eval output out.test from
$RANKPIPE_SHARED_DATA (default <repo>/../shared/data).
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import io
import os
import resource
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import numpy as np
import pytrec_eval

REPO_ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO_ROOT))

from components.ranking_evaluator import eval_cli  # noqa: E402
from rankcore.metrics import aggregate, compute_metrics  # noqa: E402

# The ranking evaluator's measures. pytrec_eval has no mrr_cut_10; its direct path
# computes recip_rank, from which ours derives mrr_cut_10.
OUR_MEASURES = [
    "map", "ndcg", "ndcg_cut_5", "ndcg_cut_10", "ndcg_cut_20", "P_5", "P_10", "P_20",
    "recall_100", "recall_1000", "recip_rank", "Rprec", "bpref", "mrr_cut_10",
]  # fmt: skip
PYTREC_MEASURES = {
    "map", "ndcg", "ndcg_cut.5,10,20", "P.5,10,20", "recall.100,1000", "recip_rank",
    "Rprec", "bpref",
}  # fmt: skip


Qrels = dict[str, dict[str, int]]
Run = dict[str, dict[str, float]]
PerQuery = dict[str, dict[str, float]]
T = TypeVar("T")


def synthetic(n_queries: int, n_docs: int, seed: int) -> tuple[Qrels, Run]:
    rng = np.random.default_rng(seed)
    pool = 20 * n_docs
    docids = [f"D{i:07d}" for i in range(pool)]  # shared str objects keep memory down
    qrels: Qrels = {}
    run: Run = {}
    for q in range(n_queries):
        qid = str(q + 1)
        picked = rng.choice(pool, size=n_docs + 50, replace=False)
        retrieved, unretrieved = picked[:n_docs], picked[n_docs:]
        scores = np.round(rng.random(n_docs), 3).tolist()
        run[qid] = {docids[i]: s for i, s in zip(retrieved.tolist(), scores, strict=True)}
        # Judge ~10% of the retrieved docs (biased to the top) plus 50 unretrieved ones.
        judged_idx = retrieved[rng.random(n_docs) < 0.1].tolist() + unretrieved.tolist()
        grades = rng.choice(4, size=len(judged_idx), p=[0.6, 0.2, 0.15, 0.05]).tolist()
        qrels[qid] = {docids[i]: g for i, g in zip(judged_idx, grades, strict=True)}
    return qrels, run


def run_ours(qrels: Qrels, run: Run) -> tuple[PerQuery, dict]:
    per_query = compute_metrics(qrels, run, OUR_MEASURES)
    return per_query, aggregate(per_query)


def run_pytrec(qrels: Qrels, run: Run) -> tuple[PerQuery, dict]:
    per_query = pytrec_eval.RelevanceEvaluator(qrels, PYTREC_MEASURES).evaluate(run)
    names = list(next(iter(per_query.values())))
    summary = {
        m: pytrec_eval.compute_aggregated_measure(m, [pq[m] for pq in per_query.values()])
        for m in names
    }
    return per_query, summary


def timed(fn: Callable[[Qrels, Run], T], qrels: Qrels, run: Run) -> tuple[float, float, T]:
    """(wall seconds, CPU seconds, result). Both paths are single-threaded, so CPU time
    is the figure that other jobs on a shared machine disturb least."""
    gc.collect()
    wall, cpu = time.perf_counter(), time.process_time()
    result = fn(qrels, run)
    return time.perf_counter() - wall, time.process_time() - cpu, result


def check_reference() -> str:
    data = Path(os.environ.get("RANKPIPE_SHARED_DATA", REPO_ROOT.parent / "shared" / "data"))
    ref = data / "trec_eval"
    if not (ref / "out.test").is_file():
        return f"SKIPPED (no reference data at {ref})"
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rc = eval_cli.eval_main([str(ref / "qrels.test"), str(ref / "results.test")])
    expected = (ref / "out.test").read_text()
    if rc == 0 and out.getvalue() == expected:
        return f"OK ({len(expected.splitlines())} lines identical to out.test)"
    return "MISMATCH with out.test"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--queries", type=int, default=10_000)
    ap.add_argument("--docs", type=int, default=1_000)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--seed", type=int, default=13)
    args = ap.parse_args()

    t0 = time.perf_counter()
    qrels, run = synthetic(args.queries, args.docs, args.seed)
    print(
        f"synthetic data: {args.queries} queries x {args.docs} docs, "
        f"{sum(map(len, qrels.values()))} judgments, built in {time.perf_counter() - t0:.1f}s"
    )

    wall: dict[str, list[float]] = {"ours": [], "pytrec": []}
    cpu: dict[str, list[float]] = {"ours": [], "pytrec": []}
    results = {}
    paths = [("ours", run_ours), ("pytrec", run_pytrec)]
    for i in range(args.repeats):
        for name, fn in paths if i % 2 == 0 else paths[::-1]:  # alternate to spread drift
            results.pop(name, None)  # free the previous result before timing again
            seconds, cpu_seconds, results[name] = timed(fn, qrels, run)
            wall[name].append(seconds)
            cpu[name].append(cpu_seconds)
    ours, theirs = results["ours"], results["pytrec"]

    print()
    print(f"{'path':<34} {'min wall s':>10} {'median wall s':>13} {'min CPU s':>10}")
    labels = {"ours": "compute_metrics + aggregate", "pytrec": "pytrec_eval evaluate + aggregate"}
    for name, label in labels.items():
        print(
            f"{label:<34} {min(wall[name]):10.2f} {statistics.median(wall[name]):13.2f} "
            f"{min(cpu[name]):10.2f}"
        )
    ratios = [
        min(wall["ours"]) / min(wall["pytrec"]),
        statistics.median(wall["ours"]) / statistics.median(wall["pytrec"]),
        min(cpu["ours"]) / min(cpu["pytrec"]),
    ]
    verdict = "OK" if ratios[2] <= 1.1 else "OVER GOAL"
    print(
        f"{'ratio (goal <= 1.10x on CPU)':<34} {ratios[0]:9.3f}x {ratios[1]:12.3f}x "
        f"{ratios[2]:9.3f}x  {verdict}"
    )

    per_query, summary = ours
    their_pq, their_summary = theirs
    shared = [m for m in their_summary if m in summary]
    same_pq = all(per_query[q][m] == their_pq[q][m] for q in their_pq for m in shared)
    max_diff = max(abs(summary[m] - their_summary[m]) for m in shared)
    mrr_ok = all(
        per_query[q]["mrr_cut_10"]
        == (their_pq[q]["recip_rank"] if their_pq[q]["recip_rank"] >= 0.1 else 0.0)
        for q in their_pq
    )
    print()
    print(f"per-query values identical to pytrec_eval ({len(shared)} measures): {same_pq}")
    print(f"largest 'all' difference (summation order only): {max_diff:.2e}")
    print(f"mrr_cut_10 consistent with pytrec_eval recip_rank: {mrr_ok}")
    print(f"reference check, rankpipe eval vs trec_eval out.test: {check_reference()}")
    peak_gb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    print(f"peak RSS: {peak_gb:.1f} GiB")
    for m in ("map", "ndcg_cut_10", "P_10", "mrr_cut_10"):
        print(f"  all {m:<12} {summary[m]:.4f}")
    return 0 if same_pq and mrr_ok and max_diff < 1e-9 else 1


if __name__ == "__main__":
    sys.exit(main())
