"""RankingDataGen executor: raw collection -> vocabulary, TransformGraph, sharded examples.

Two Beam pipelines run in order, both built with `beam_pipeline_args` (DirectRunner, Dataflow,
Flink or Spark alike):
  1. collection pass: document ids, word counts -> WordPiece vocabulary (unless a vocab file is
     given) and, without a first-stage run, BM25 candidates;
  2. encoding pass: tf.Transform tokenizes every query and document in batches, writes the
     TransformGraph, and the sampled groups are joined with token ids and written as shards.
Queries, qrels and the first-stage run are read in the driver: they are small next to the
documents, and sampling needs all of a query's judgments and candidates together.
Everything is written under a temporary directory inside each artifact and moved into place at
the end, so a failed run leaves nothing a later component could read.
"""

from __future__ import annotations

import json
import logging
import math
import os
import time
from collections import Counter
from typing import Any

import apache_beam as beam
import tensorflow as tf
from tfx import types
from tfx.dsl.components.base import base_beam_executor
from tfx.types import artifact_utils

from components import artifacts
from components.ranking_datagen import (
    beam_transforms,
    candidates,
    collection as collection_io,
    sampling,
    splits,
)

EXAMPLES_PER_SHARD = 20_000


def _pipeline_counters(result: beam.runners.runner.PipelineResult) -> dict[str, int]:
    counters = {}
    for counter in result.metrics().query()["counters"]:
        if counter.key.metric.namespace == beam_transforms._NS:
            name = counter.key.metric.name
            counters[name] = counters.get(name, 0) + int(counter.committed or counter.attempted)
    return counters


def _atomic_write(path: str, text: str) -> None:
    tmp = path + ".tmp"
    with tf.io.gfile.GFile(tmp, "w") as f:
        f.write(text)
    tf.io.gfile.rename(tmp, path, overwrite=True)


def write_run(path: str, ranked: dict[str, list[tuple[str, float, int]]], run_id: str) -> None:
    lines = [
        f"{qid} Q0 {docid} {rank} {score:.6f} {run_id}\n"
        for qid in sorted(ranked)
        for docid, score, rank in ranked[qid]
    ]
    _atomic_write(path, "".join(lines))


def write_qrels(path: str, qrels: dict[str, dict[str, int]]) -> None:
    lines = [
        f"{qid} 0 {docid} {rel}\n"
        for qid in sorted(qrels)
        for docid, rel in sorted(qrels[qid].items())
    ]
    _atomic_write(path, "".join(lines))


class Executor(base_beam_executor.BaseBeamExecutor):
    """Runs RankingDataGen; see the module docstring."""

    def Do(
        self,
        input_dict: dict[str, list[types.Artifact]],
        output_dict: dict[str, list[types.Artifact]],
        exec_properties: dict[str, Any],
    ) -> None:
        start = time.time()
        collection = json.loads(exec_properties["collection"])
        config = json.loads(exec_properties["datagen"])
        out = {name: artifact_utils.get_single_instance(output_dict[name]) for name in output_dict}
        policy = config["on_bad_record"]
        report = collection_io.BadRecordReport(policy)

        queries = collection_io.read_queries(
            collection["queries"], collection["queries_format"], report
        )
        qrels = collection_io.read_qrels(collection["qrels"], collection["qrels_format"], report)
        logging.info("Read %d queries and %d judged queries", len(queries), len(qrels))

        vocab_path = os.path.join(out["vocabulary"].uri, artifacts.VOCAB_FILE)
        temp_root = os.path.join(self._get_tmp_dir(), "ranking_datagen")
        doc_source = (collection["documents"], collection["documents_format"])

        # ---- pass 1: document ids, vocabulary, BM25 --------------------------------------
        pass1_dir = os.path.join(temp_root, "pass1")
        tf.io.gfile.makedirs(pass1_dir)
        docids_path = os.path.join(pass1_dir, "docids")
        bm25_path = os.path.join(pass1_dir, "bm25.json")
        need_bm25 = not collection.get("first_stage_run")
        vocab_cfg = config["vocab"]
        t0 = time.time()
        with self._make_beam_pipeline() as p:
            docs = p | "ReadDocuments" >> collection_io.ReadDocuments(
                *doc_source, policy, collection["allow_empty_documents"]
            )
            _ = (
                docs
                | "DocIds" >> beam.Map(lambda d: d[0])
                | "AllDocIds" >> beam.combiners.ToList()
                | "WriteDocIds" >> beam.Map(lambda ids: _atomic_write(docids_path, "\n".join(ids)))
            )
            if not vocab_cfg.get("vocab_file"):
                texts = (docs, p | "Queries" >> beam.Create(sorted(queries.items())))
                _ = (
                    texts
                    | "AllTexts" >> beam.Flatten()
                    | "LearnVocab"
                    >> beam_transforms.LearnVocabulary(vocab_cfg["size"], vocab_cfg["lowercase"])
                    | "WriteVocab"
                    >> beam.Map(lambda v: _atomic_write(vocab_path, "".join(t + "\n" for t in v)))
                )
            if need_bm25:
                bm25_cfg = config["bm25"]
                depth = config["candidates_depth"]
                _ = (
                    docs
                    | "AllDocs" >> beam.combiners.ToList()
                    | "BM25"
                    >> beam.Map(
                        lambda d: candidates.bm25_run(
                            d, queries, depth, bm25_cfg["k1"], bm25_cfg["b"]
                        )
                    )
                    | "WriteBM25" >> beam.Map(lambda r: _atomic_write(bm25_path, json.dumps(r)))
                )
        logging.info("Collection pass done in %.1fs", time.time() - t0)

        if vocab_cfg.get("vocab_file"):
            tf.io.gfile.copy(vocab_cfg["vocab_file"], vocab_path, overwrite=True)
        with tf.io.gfile.GFile(docids_path) as f:
            docids = set(f.read().split("\n")) - {""}
        collection_io.check_collection(queries, qrels, docids, collection["qrels"], report)

        if need_bm25:
            with tf.io.gfile.GFile(bm25_path) as f:
                raw_run = json.load(f)
            run_id = "bm25"
        else:
            raw_run = collection_io.read_run(collection["first_stage_run"], report)
            run_id = "first_stage"
        ranked = candidates.rank_run(raw_run, config["candidates_depth"])

        # ---- splits and sampling (driver) -------------------------------------------------
        split_of = self._assign_splits(config["split"], qrels)
        groups: list[sampling.Group] = []
        sampling_cfg = config["sampling"]
        queries_per_split = Counter()
        for qid in sorted(qrels):
            if qid not in queries:
                continue  # reported by check_collection (or skipped by policy)
            split = split_of.get(qid)
            if split is None:
                continue
            queries_per_split[split] += 1
            cands = ranked.get(qid, [])
            if split == "train":
                groups.extend(
                    sampling.train_groups(
                        qid,
                        cands,
                        qrels[qid],
                        sampling_cfg["mode"],
                        sampling_cfg["samples_per_query"],
                        sampling_cfg["negatives_per_positive"],
                        sampling_cfg["positive_threshold"],
                        sampling_cfg["seed"],
                    )
                )
            else:
                groups.extend(sampling.eval_groups(split, qid, cands, qrels[qid]))
        per_split = Counter(g.split for g in groups)
        for split in splits.SPLITS:
            if per_split[split] == 0:
                raise ValueError(
                    f"split {split!r} is empty ({queries_per_split[split]} queries, 0 examples): "
                    "check datagen.split and that the qrels match the queries"
                )
        num_shards = {
            s: config["num_shards"] or max(1, math.ceil(per_split[s] / EXAMPLES_PER_SHARD))
            for s in splits.SPLITS
        }
        logging.info("Sampled groups per split: %s; shards: %s", dict(per_split), num_shards)

        # ---- pass 2: tf.Transform encoding and example writing ----------------------------
        examples_tmp = os.path.join(out["examples"].uri, ".tmp")
        graph_tmp = os.path.join(out["transform_graph"].uri, ".tmp")
        t0 = time.time()
        p = self._make_beam_pipeline()
        docs = p | "ReadDocuments" >> collection_io.ReadDocuments(
            *doc_source, policy, collection["allow_empty_documents"]
        )
        texts = (
            docs | "KeyDocs" >> beam.Map(lambda d: ("d:" + d[0], d[1])),
            p | "Queries" >> beam.Create([("q:" + q, t) for q, t in sorted(queries.items())]),
        ) | "AllTexts" >> beam.Flatten()
        tokens = (
            texts
            | "Tokenize"
            >> beam_transforms.TokenizeWithTransform(
                vocab_path,
                vocab_cfg["lowercase"],
                graph_tmp,
                os.path.join(temp_root, "tft"),
            )
            | "CountTokens"
            >> beam.ParDo(
                beam_transforms.CountTokens(config["max_query_length"], config["max_doc_length"])
            )
        )
        _ = (
            p | "Groups" >> beam.Create(groups),
            tokens,
        ) | "WriteExamples" >> beam_transforms.WriteExamples(
            examples_tmp,
            num_shards,
            config["shuffle_seed"],
            config["max_query_length"],
            config["max_doc_length"],
        )
        result = p.run()
        result.wait_until_finish()
        counters = _pipeline_counters(result)
        logging.info("Encoding pass done in %.1fs", time.time() - t0)
        self._publish(out, examples_tmp, graph_tmp, num_shards)
        summary = self._summary(
            collection, queries, qrels, docids, queries_per_split, per_split, counters, report
        )
        summary["seconds"] = round(time.time() - start, 1)
        write_qrels(os.path.join(out["qrels"].uri, artifacts.QRELS_FILE), qrels)
        write_run(os.path.join(out["first_stage_run"].uri, artifacts.RUN_FILE), ranked, run_id)
        self._write_summary(out["summary"].uri, summary)
        logging.info("RankingDataGen finished in %.1fs: %s", summary["seconds"], summary)

    def _assign_splits(self, cfg: dict, qrels: dict) -> dict[str, str]:
        if cfg["method"] == "explicit":
            return splits.explicit_split(cfg["train_qids"], cfg["dev_qids"], cfg["test_qids"])
        return {
            qid: splits.kfold_split(
                qid, cfg["num_folds"], cfg["dev_fold"], cfg["test_fold"], cfg["seed"]
            )
            for qid in qrels
        }

    def _publish(self, out, examples_tmp: str, graph_tmp: str, num_shards: dict[str, int]) -> None:
        # Splits whose hashing left a shard empty still get the file, so the -of-N set is whole.
        for split, n in num_shards.items():
            split_dir = os.path.join(examples_tmp, f"Split-{split}")
            tf.io.gfile.makedirs(split_dir)
            for shard in range(n):
                path = os.path.join(split_dir, f"data_tfrecord-{shard:05d}-of-{n:05d}.gz")
                if not tf.io.gfile.exists(path):
                    with tf.io.TFRecordWriter(path, options="GZIP"):
                        pass
            tf.io.gfile.rename(split_dir, os.path.join(out["examples"].uri, f"Split-{split}"))
        tf.io.gfile.rmtree(examples_tmp)
        for name in tf.io.gfile.listdir(graph_tmp):
            tf.io.gfile.rename(
                os.path.join(graph_tmp, name),
                os.path.join(out["transform_graph"].uri, name.rstrip("/")),
            )
        tf.io.gfile.rmtree(graph_tmp)
        out["examples"].split_names = artifact_utils.encode_split_names(list(splits.SPLITS))

    def _summary(
        self, collection, queries, qrels, docids, queries_per_split, per_split, counters, report
    ):
        texts = counters.get("texts_d", 0) + counters.get("texts_q", 0)
        return {
            "collection": collection.get("name"),
            "documents": len(docids),
            "queries": len(queries),
            "judged_queries": len(qrels),
            "judged_pairs": sum(len(v) for v in qrels.values()),
            "queries_per_split": dict(queries_per_split),
            "examples_per_split": dict(per_split),
            "truncation_rate_queries": counters.get("truncated_q", 0)
            / max(1, counters.get("texts_q", 0)),
            "truncation_rate_documents": counters.get("truncated_d", 0)
            / max(1, counters.get("texts_d", 0)),
            "oov_rate": counters.get("unk_tokens", 0) / max(1, counters.get("tokens", 0)),
            "texts_encoded": texts,
            "bad_records": report.counts(),
        }

    def _write_summary(self, uri: str, summary: dict) -> None:
        _atomic_write(os.path.join(uri, "summary.json"), json.dumps(summary, indent=2))
        rows = "\n".join(f"| {k} | {v} |" for k, v in summary.items())
        _atomic_write(
            os.path.join(uri, "summary.md"),
            f"# RankingDataGen summary\n\n| count | value |\n|---|---|\n{rows}\n",
        )
