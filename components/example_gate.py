"""ExampleGate: stops the pipeline when ExampleValidator found anomalies, showing them.

ExampleValidator records anomalies but lets downstream components run; a reranker trained on
examples that break the schema is not worth evaluating, so the Trainer waits on this gate.
"""

import os

import tensorflow as tf
from tensorflow_metadata.proto.v0 import anomalies_pb2
from tfx import v1 as tfx
from tfx.types import artifact_utils


class ExampleAnomaliesError(RuntimeError):
    """Raised with every anomaly's feature and description."""


def describe_anomalies(anomalies_uri: str, split_names: "list[str]") -> "list[str]":
    problems = []
    for split in split_names:
        path = os.path.join(anomalies_uri, f"Split-{split}", "SchemaDiff.pb")
        if not tf.io.gfile.exists(path):
            continue
        proto = anomalies_pb2.Anomalies()
        with tf.io.gfile.GFile(path, "rb") as f:
            proto.ParseFromString(f.read())
        for feature, info in sorted(proto.anomaly_info.items()):
            reasons = "; ".join(r.description or r.short_description for r in info.reason)
            problems.append(f"split {split}, feature {feature}: {reasons}")
        if proto.HasField("dataset_anomaly_info"):
            reasons = "; ".join(r.description for r in proto.dataset_anomaly_info.reason)
            problems.append(f"split {split}, dataset: {reasons}")
    return problems


@tfx.dsl.components.component
def ExampleGate(
    anomalies: tfx.dsl.components.InputArtifact[tfx.types.standard_artifacts.ExampleAnomalies],
):  # noqa: N802
    """Raises ExampleAnomaliesError listing the anomalies, if any."""
    splits = artifact_utils.decode_split_names(anomalies.split_names)
    problems = describe_anomalies(anomalies.uri, splits)
    if problems:
        raise ExampleAnomaliesError(
            "ExampleValidator found anomalies in the examples:\n  " + "\n  ".join(problems)
        )
