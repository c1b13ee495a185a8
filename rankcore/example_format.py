"""The tf.Example format of a candidate group: one place for its keys, types and writer.

RankingDataGen writes one serialized tf.Example per (query, candidate group); the Trainer's
input pipeline, the exported `score_examples` signature and the RankingEvaluator read them.
components and trainer_module never import each other, so the format lives in the layer both
import. schemas/ranking_examples/schema.pbtxt is the same format as a TFDV schema (what
ImportSchemaGen hands the ExampleValidator); tests/rankcore/test_example_format.py checks that
the two agree.

A group of n candidates:
- `qid` (bytes), `docids` (n bytes);
- `query_ids` (the query's WordPiece ids), `doc_ids` (the n documents' ids concatenated) and
  `doc_lengths` (n: how many of `doc_ids` each document has), int64;
- `labels` (n graded judgments, float), `judged` (n: 1 where the pair is judged), int64;
- `first_stage_scores` (n, float) and `first_stage_ranks` (n, int64) of the candidate generator.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import tensorflow as tf

QID = "qid"
DOCIDS = "docids"
QUERY_IDS = "query_ids"
DOC_IDS = "doc_ids"
DOC_LENGTHS = "doc_lengths"
LABELS = "labels"
JUDGED = "judged"
FIRST_STAGE_SCORES = "first_stage_scores"
FIRST_STAGE_RANKS = "first_stage_ranks"

# Every key with its parsing spec, in the order the writer writes them.
FEATURES: dict[str, tf.io.FixedLenFeature | tf.io.VarLenFeature] = {
    QID: tf.io.FixedLenFeature([], tf.string),
    DOCIDS: tf.io.VarLenFeature(tf.string),
    QUERY_IDS: tf.io.VarLenFeature(tf.int64),
    DOC_IDS: tf.io.VarLenFeature(tf.int64),
    DOC_LENGTHS: tf.io.VarLenFeature(tf.int64),
    LABELS: tf.io.VarLenFeature(tf.float32),
    JUDGED: tf.io.VarLenFeature(tf.int64),
    FIRST_STAGE_SCORES: tf.io.VarLenFeature(tf.float32),
    FIRST_STAGE_RANKS: tf.io.VarLenFeature(tf.int64),
}


def spec(*keys: str) -> dict[str, tf.io.FixedLenFeature | tf.io.VarLenFeature]:
    """The parsing spec of `keys` (a reader parses only what it uses: parsing costs per key)."""
    return {key: FEATURES[key] for key in keys}


def _int64(values) -> tf.train.Feature:
    return tf.train.Feature(int64_list=tf.train.Int64List(value=values))


def _float(values) -> tf.train.Feature:
    return tf.train.Feature(float_list=tf.train.FloatList(value=values))


def _bytes(values) -> tf.train.Feature:
    return tf.train.Feature(bytes_list=tf.train.BytesList(value=[v.encode() for v in values]))


def serialize_group(
    qid: str,
    docids: Sequence[str],
    query_ids: Sequence[int],
    docs: Sequence[Sequence[int]],
    labels: Sequence[float],
    judged: Sequence[int],
    first_stage_scores: Sequence[float],
    first_stage_ranks: Sequence[int],
) -> bytes:
    """One group as a serialized tf.Example. Deterministic serialization: map fields (the
    features) otherwise serialize in hash order, which differs between processes and would
    break byte-identical reruns."""
    feature = {
        QID: _bytes([qid]),
        DOCIDS: _bytes(docids),
        QUERY_IDS: _int64(query_ids),
        DOC_IDS: _int64(np.concatenate(docs)),
        DOC_LENGTHS: _int64([len(d) for d in docs]),
        LABELS: _float(labels),
        JUDGED: _int64(judged),
        FIRST_STAGE_SCORES: _float(first_stage_scores),
        FIRST_STAGE_RANKS: _int64(first_stage_ranks),
    }
    example = tf.train.Example(features=tf.train.Features(feature=feature))
    return example.SerializeToString(deterministic=True)
