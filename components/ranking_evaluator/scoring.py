"""Batched scoring of eval examples with a SavedModel inside Beam (tfx-bsl RunInference)."""

from __future__ import annotations

import apache_beam as beam
import tensorflow as tf
from tfx_bsl.public.beam import run_inference
from tfx_bsl.public.proto import model_spec_pb2

# The exported model's signature over serialized tf.Examples (see trainer_module/export.py).
SCORE_SIGNATURE = "score_examples"
SCORE_OUTPUT = "score"


def _key_example(serialized: bytes):
    example = tf.train.Example.FromString(serialized)
    feature = example.features.feature
    qid = feature["qid"].bytes_list.value[0].decode()
    docid = feature["docids"].bytes_list.value[0].decode()
    return f"{qid}\t{docid}", example


def _to_score(keyed_log):
    key, log = keyed_log
    qid, docid = key.split("\t", 1)
    tensor = log.predict_log.response.outputs[SCORE_OUTPUT]
    return qid, docid, float(tf.make_ndarray(tensor).reshape(-1)[0])


class ScoreExamples(beam.PTransform):
    """Serialized eval examples (one candidate each) -> (qid, docid, score), batched."""

    def __init__(self, model_dir: str):
        super().__init__()
        self._spec = model_spec_pb2.InferenceSpecType(
            saved_model_spec=model_spec_pb2.SavedModelSpec(
                model_path=model_dir, signature_name=[SCORE_SIGNATURE]
            )
        )

    def expand(self, serialized_examples):
        return (
            serialized_examples
            # The type hint is how RunInference tells keyed input from plain examples.
            | "Key" >> beam.Map(_key_example).with_output_types(tuple[str, tf.train.Example])
            | "RunInference" >> run_inference.RunInference(self._spec)
            | "ToScore" >> beam.Map(_to_score)
        )


def to_run(scores: list[tuple[str, str, float]]) -> dict[str, dict[str, float]]:
    run: dict[str, dict[str, float]] = {}
    for qid, docid, score in scores:
        run.setdefault(qid, {})[docid] = score
    return run
