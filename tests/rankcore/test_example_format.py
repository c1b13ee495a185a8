"""The example format's one module agrees with the TFDV schema and reads back what it writes."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import tensorflow as tf
from google.protobuf import text_format
from tensorflow_metadata.proto.v0 import schema_pb2

from rankcore import example_format as fmt

SCHEMA = Path(__file__).resolve().parents[2] / "schemas" / "ranking_examples" / "schema.pbtxt"
_TYPES = {tf.string: schema_pb2.BYTES, tf.int64: schema_pb2.INT, tf.float32: schema_pb2.FLOAT}


def test_the_schema_names_every_key_with_its_type() -> None:
    schema = text_format.Parse(SCHEMA.read_text(), schema_pb2.Schema())
    in_schema = {f.name: f.type for f in schema.feature}
    assert in_schema == {key: _TYPES[spec.dtype] for key, spec in fmt.FEATURES.items()}


def test_a_serialized_group_parses_back_with_the_spec() -> None:
    record = fmt.serialize_group(
        "q1",
        ["d1", "d2"],
        np.array([7, 8], np.int64),
        [np.array([9, 10, 11], np.int64), np.array([12], np.int64)],
        [2.0, 0.0],
        [1, 0],
        [3.5, 1.25],
        [1, 2],
    )
    parsed = tf.io.parse_single_example(record, fmt.FEATURES)
    dense = {k: tf.sparse.to_dense(v).numpy().tolist() for k, v in parsed.items() if k != fmt.QID}
    assert parsed[fmt.QID].numpy() == b"q1"
    assert dense == {
        fmt.DOCIDS: [b"d1", b"d2"],
        fmt.QUERY_IDS: [7, 8],
        fmt.DOC_IDS: [9, 10, 11, 12],
        fmt.DOC_LENGTHS: [3, 1],
        fmt.LABELS: [2.0, 0.0],
        fmt.JUDGED: [1, 0],
        fmt.FIRST_STAGE_SCORES: [3.5, 1.25],
        fmt.FIRST_STAGE_RANKS: [1, 2],
    }
    # Deterministic bytes: a rerun (another process) writes the very same record.
    assert record == fmt.serialize_group(
        "q1", ["d1", "d2"], [7, 8], [[9, 10, 11], [12]], [2.0, 0.0], [1, 0], [3.5, 1.25], [1, 2]
    )
