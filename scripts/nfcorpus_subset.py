"""Writes a small BEIR-layout collection cut from NFCorpus: a collection no config was made for,
to try `rankpipe init` and `rankpipe run` on as a new user would (docs/results.md, "Your own
collection"). Reads ../shared/data/nfcorpus by path and writes only under OUT.

  python scripts/nfcorpus_subset.py OUT --qrels dev --seed 7 --documents 300 --max-judged 160 \
      --queries 40 --splits test
  python scripts/nfcorpus_subset.py OUT --qrels train --seed 11 --documents 400 --max-judged 200 \
      --queries 60 --max-per-query 20 --splits train,dev,test --cuts 36,48

Queries with 3 to --max-per-query judged documents are drawn (seeded) while the documents they
judge stay within --max-judged; the corpus is those documents plus random others up to
--documents. With one split its qrels (test.tsv) hold 0/1 grades; with three, the queries are
cut 60/20/20 (or at --cuts) and keep NFCorpus's grades.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import random
from pathlib import Path

SHARED = Path(
    os.environ.get("RANKPIPE_SHARED_DATA", Path(__file__).resolve().parents[2] / "shared" / "data")
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--qrels", choices=("train", "dev"), default="dev")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--documents", type=int, default=300)
    parser.add_argument("--max-judged", type=int, default=160)
    parser.add_argument("--queries", type=int, default=40)
    parser.add_argument("--max-per-query", type=int, default=30)
    parser.add_argument("--splits", default="test")
    parser.add_argument(
        "--cuts", help="with three splits: where train and dev end (default: 60%% and 80%%)"
    )
    args = parser.parse_args()

    src = SHARED / "nfcorpus"
    rng = random.Random(args.seed)
    docs = {d["_id"]: d for d in map(json.loads, (src / "corpus.jsonl").open())}
    queries = {q["_id"]: q for q in map(json.loads, (src / "queries.jsonl").open())}
    qrels: dict[str, dict[str, int]] = collections.defaultdict(dict)
    with (src / "qrels" / f"{args.qrels}.tsv").open() as f:
        next(f)  # header
        for line in f:
            qid, docid, grade = line.split("\t")
            qrels[qid][docid] = int(grade)
    candidates = [q for q in sorted(qrels) if 3 <= len(qrels[q]) <= args.max_per_query]
    rng.shuffle(candidates)
    chosen: list[str] = []
    keep: set[str] = set()
    for qid in candidates:
        if len(keep | set(qrels[qid])) > args.max_judged:
            continue
        chosen.append(qid)
        keep |= set(qrels[qid])
        if len(chosen) >= args.queries:
            break
    keep |= set(rng.sample([d for d in sorted(docs) if d not in keep], args.documents - len(keep)))

    (args.out / "qrels").mkdir(parents=True, exist_ok=False)
    with (args.out / "corpus.jsonl").open("w") as f:
        for d in sorted(keep):
            f.write(
                json.dumps({"_id": d, "title": docs[d].get("title", ""), "text": docs[d]["text"]})
                + "\n"
            )
    with (args.out / "queries.jsonl").open("w") as f:
        for q in chosen:
            f.write(json.dumps({"_id": q, "text": queries[q]["text"]}) + "\n")
    splits = args.splits.split(",")
    if len(splits) == 1:
        parts, binary = {splits[0]: chosen}, True
    else:
        rng.shuffle(chosen)
        a, b = int(len(chosen) * 0.6), int(len(chosen) * 0.8)
        if args.cuts:
            a, b = map(int, args.cuts.split(","))
        parts, binary = dict(zip(splits, (chosen[:a], chosen[a:b], chosen[b:]))), False
    for name, qids in parts.items():
        with (args.out / "qrels" / f"{name}.tsv").open("w") as f:
            f.write("query-id\tcorpus-id\tscore\n")
            for q in qids:
                for d, g in sorted(qrels[q].items()):
                    f.write(f"{q}\t{d}\t{min(g, 1) if binary else g}\n")
    print(f"{args.out}: {len(keep)} documents, {len(chosen)} queries, splits {', '.join(parts)}")


if __name__ == "__main__":
    main()
