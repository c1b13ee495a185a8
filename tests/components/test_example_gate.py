"""An anomaly in the examples stops the pipeline, and the error shows the anomaly."""

from __future__ import annotations

from pathlib import Path

import pytest
import tensorflow as tf
from tfx import v1 as tfx

from components.example_gate import ExampleGate
from pipelines import console
from pipelines.pipeline import SCHEMA_FILE


def _example(labels: list[float] | None) -> bytes:
    def ints(v):
        return tf.train.Feature(int64_list=tf.train.Int64List(value=v))

    def floats(v):
        return tf.train.Feature(float_list=tf.train.FloatList(value=v))

    def strs(v):
        return tf.train.Feature(bytes_list=tf.train.BytesList(value=[s.encode() for s in v]))

    feature = {
        "qid": strs(["1"]),
        "docids": strs(["d1"]),
        "query_ids": ints([7, 8]),
        "doc_ids": ints([9, 10, 11]),
        "doc_lengths": ints([3]),
        "judged": ints([1]),
        "first_stage_scores": floats([1.5]),
        "first_stage_ranks": ints([1]),
    }
    if labels is not None:
        feature["labels"] = floats(labels)
    return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()


def _pipeline(tmp_path: Path, drop_labels: bool) -> tfx.dsl.Pipeline:
    data = tmp_path / "data"
    data.mkdir()
    with tf.io.TFRecordWriter(str(data / "examples.tfrecord")) as writer:
        for i in range(20):
            writer.write(_example(None if drop_labels and i % 2 else [1.0]))
    example_gen = tfx.components.ImportExampleGen(input_base=str(data))
    statistics = tfx.components.StatisticsGen(examples=example_gen.outputs["examples"])
    schema = tfx.components.ImportSchemaGen(schema_file=str(SCHEMA_FILE))
    validator = tfx.components.ExampleValidator(
        statistics=statistics.outputs["statistics"], schema=schema.outputs["schema"]
    )
    gate = ExampleGate(anomalies=validator.outputs["anomalies"])
    return tfx.dsl.Pipeline(
        pipeline_name="gate-test",
        pipeline_root=str(tmp_path / "root"),
        components=[example_gen, statistics, schema, validator, gate],
        metadata_connection_config=tfx.orchestration.metadata.sqlite_metadata_connection_config(
            str(tmp_path / "m.sqlite")
        ),
        beam_pipeline_args=["--direct_running_mode=in_memory"],
    )


def test_anomaly_stops_the_pipeline_naming_feature(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match=r"feature labels: .*") as info:
        tfx.orchestration.LocalDagRunner().run(_pipeline(tmp_path, drop_labels=True))
    assert "ExampleValidator found anomalies" in str(info.value)
    # What `rankpipe run` prints for it: the error named, and the fix for anomalies.
    name, _, fix = console.describe_error(info.value)
    assert name == "ExampleAnomaliesError"
    assert fix and "schemas/ranking_examples/schema.pbtxt" in fix


def test_clean_examples_pass_the_gate(tmp_path: Path) -> None:
    tfx.orchestration.LocalDagRunner().run(_pipeline(tmp_path, drop_labels=False))
