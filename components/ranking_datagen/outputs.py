"""RankingDataGen's output files: staging, publishing, and the small text artifacts.

Everything is written under a staging directory first and moved into the artifact URIs only
once the whole run has succeeded; on failure the executor clears the URIs, so a failed run
never leaves a partial artifact that a later component (or a cache hit) could read.
"""

from __future__ import annotations

import json
import os
from typing import Any

import tensorflow as tf

from components.ranking_datagen.constants import SUMMARY_MD
from rankcore import folds, trec
from rankcore.constants import SUMMARY_JSON
from rankcore.file_io import write_text_atomic


def shard_name(shard: int, num_shards: int) -> str:
    return f"data_tfrecord-{shard:05d}-of-{num_shards:05d}.gz"


def split_dir(examples_dir: str, split: str) -> str:
    return os.path.join(examples_dir, f"Split-{split}")


def write_run(path: str, ranked: dict[str, list[tuple[str, float, int]]], run_id: str) -> None:
    """The first stage's TREC run through rankcore/trec.py's one writer. Ranks are the
    positions (candidates.rank_run and dense.join_candidates number them 1..n in order)."""
    trec.write_run(path, {q: [(d, s) for d, s, _ in docs] for q, docs in ranked.items()}, run_id)


def write_qrels(path: str, qrels: dict[str, dict[str, int]]) -> None:
    lines = [
        f"{qid} 0 {docid} {rel}\n"
        for qid in sorted(qrels)
        for docid, rel in sorted(qrels[qid].items())
    ]
    write_text_atomic(path, "".join(lines))


def write_split_queries(qrels_dir: str, record: dict[str, dict]) -> None:
    """The judged queries of each split and those without a first-stage candidate
    (planner.split_queries) beside qrels.txt, where the evaluator reads them with the
    judgments (rankcore/folds.py SPLIT_QUERIES_FILE)."""
    write_text_atomic(
        os.path.join(qrels_dir, folds.SPLIT_QUERIES_FILE),
        json.dumps({"splits": record}, indent=1) + "\n",
    )


def complete_shards(examples_dir: str, num_shards: dict[str, int]) -> None:
    """Writes an empty shard where hashing sent no example, so each -of-N set is whole."""
    for split, n in num_shards.items():
        tf.io.gfile.makedirs(split_dir(examples_dir, split))
        for shard in range(n):
            path = os.path.join(split_dir(examples_dir, split), shard_name(shard, n))
            if not tf.io.gfile.exists(path):
                with tf.io.TFRecordWriter(path, options="GZIP"):
                    pass


def _filesystem(path: str) -> str:
    """The scheme TensorFlow picks a path's filesystem by ("" for a local path)."""
    return path.split("://", 1)[0].lower() if "://" in path else ""


def _move(src: str, dst: str) -> None:
    """Renames a file or directory; across filesystems (TF cannot rename there) copies it and
    removes the source."""
    if _filesystem(src) == _filesystem(dst):
        tf.io.gfile.rename(src, dst, overwrite=True)
        return
    if not tf.io.gfile.isdir(src):
        tf.io.gfile.copy(src, dst, overwrite=True)
        tf.io.gfile.remove(src)
        return
    root = src.rstrip("/")
    for directory, _, files in tf.io.gfile.walk(root):
        relative = directory.rstrip("/")[len(root) :].lstrip("/")
        target = os.path.join(dst, relative) if relative else dst
        tf.io.gfile.makedirs(target)
        for file in files:
            tf.io.gfile.copy(os.path.join(directory, file), os.path.join(target, file), True)
    tf.io.gfile.rmtree(src)


def publish(staged: dict[str, str], uris: dict[str, str]) -> None:
    """Moves every entry of each staged directory into the artifact URI of the same name. The
    stage may be on another filesystem than the artifacts: with a distributed Beam runner it is
    an object store (components/worker_dirs.py) while on Kubeflow the artifacts are the
    launcher's local paths."""
    for name, stage_dir in staged.items():
        tf.io.gfile.makedirs(uris[name])
        for entry in sorted(tf.io.gfile.listdir(stage_dir)):
            entry = entry.rstrip("/")
            _move(os.path.join(stage_dir, entry), os.path.join(uris[name], entry))


def clear(uris: list[str]) -> None:
    """Removes whatever a failed run left in the artifact URIs (the directories stay)."""
    for uri in uris:
        if not tf.io.gfile.isdir(uri):
            continue
        for entry in tf.io.gfile.listdir(uri):
            path = os.path.join(uri, entry.rstrip("/"))
            if tf.io.gfile.isdir(path):
                tf.io.gfile.rmtree(path)
            else:
                tf.io.gfile.remove(path)


def _md_value(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4f}"
    if isinstance(value, dict):
        return ", ".join(f"{k}: {_md_value(v)}" for k, v in value.items()) or "-"
    return str(value)


def summary_markdown(summary: dict[str, Any]) -> str:
    """summary.json as a table, with the bad-record examples listed below it."""
    rows = [
        f"| {key} | {_md_value(value)} |" for key, value in summary.items() if key != "bad_records"
    ]
    bad = summary.get("bad_records", {})
    rows.append(f"| bad_records | {bad.get('total', 0)} ({_md_value(bad.get('by_kind', {}))}) |")
    text = "# RankingDataGen summary\n\n| count | value |\n|---|---|\n" + "\n".join(rows) + "\n"
    examples = bad.get("examples", {})
    if any(examples.values()):
        text += "\n## Skipped bad records (first few per kind)\n"
        for kind, lines in examples.items():
            text += f"\n### {kind} ({bad['by_kind'][kind]})\n\n"
            text += "".join(f"- `{line}`\n" for line in lines)
    return text


def write_summary(summary_dir: str, summary: dict[str, Any]) -> None:
    write_text_atomic(os.path.join(summary_dir, SUMMARY_JSON), json.dumps(summary, indent=2) + "\n")
    write_text_atomic(os.path.join(summary_dir, SUMMARY_MD), summary_markdown(summary))
