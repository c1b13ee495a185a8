"""Batched scoring of eval examples with SavedModels inside Beam (tfx-bsl RunInference)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import apache_beam as beam
import tensorflow as tf
from tensorflow_serving.apis import prediction_log_pb2
from tfx_bsl.public.beam import run_inference
from tfx_bsl.public.proto import model_spec_pb2

# The exported model's signature over serialized tf.Examples (see trainer_module/export.py).
SCORE_SIGNATURE = "score_examples"
SCORE_OUTPUT = "score"

Key = tuple[str, str]  # (qid, docid)
Scored = tuple[str, str, tuple[float, ...]]  # (qid, docid, one score per model)


def example_key(serialized: bytes) -> Key:
    """(qid, docid) of a dev/test example (one candidate each, see ranking_datagen)."""
    feature = tf.train.Example.FromString(serialized).features.feature
    return (
        feature["qid"].bytes_list.value[0].decode(),
        feature["docids"].bytes_list.value[0].decode(),
    )


def _key_batch(batch: list[bytes]) -> tuple[list[Key], list[bytes]]:
    # The serialized bytes go to RunInference as they are: no re-serialization.
    return [example_key(s) for s in batch], batch


def _score(log: prediction_log_pb2.PredictionLog) -> float:
    # score_examples returns float32 [batch]: one float_val per example (make_ndarray is ~8x
    # slower per element and this runs once per candidate).
    return float(log.predict_log.response.outputs[SCORE_OUTPUT].float_val[0])


def _unbatch(
    keyed: tuple[list[Key], tuple[list[prediction_log_pb2.PredictionLog], ...]],
) -> Iterator[Scored]:
    keys, per_model = keyed
    for i, (qid, docid) in enumerate(keys):
        yield qid, docid, tuple(_score(logs[i]) for logs in per_model)


def inference_spec(model_dir: str) -> model_spec_pb2.InferenceSpecType:
    return model_spec_pb2.InferenceSpecType(
        saved_model_spec=model_spec_pb2.SavedModelSpec(
            model_path=model_dir, signature_name=[SCORE_SIGNATURE]
        )
    )


class ScoreExamples(beam.PTransform):
    """Serialized eval examples -> (qid, docid, (score of model 1, score of model 2, ...)).

    Examples are grouped into lists of `batch_size` (keys ride along) and every model scores
    each list in one fused RunInferencePerModel pass, so the examples are read and parsed
    once however many models there are. RunInference may join several lists into one call;
    `batch_size` is the smallest batch a model sees, except for the last of a bundle.
    """

    def __init__(self, model_dirs: Sequence[str], batch_size: int = 256):
        super().__init__()
        if not model_dirs:
            raise ValueError("ScoreExamples needs at least one model")
        self._specs = [inference_spec(d) for d in model_dirs]
        self._batch_size = batch_size

    def expand(self, serialized_examples: beam.PCollection) -> beam.PCollection:
        return (
            serialized_examples
            | "Batch"
            >> beam.BatchElements(min_batch_size=self._batch_size, max_batch_size=self._batch_size)
            # The type hint is how RunInference tells keyed (pre-batched) input from examples.
            | "Key" >> beam.Map(_key_batch).with_output_types(tuple[list[Key], list[bytes]])
            | "RunInference" >> run_inference.RunInferencePerModel(self._specs)
            | "Unbatch" >> beam.FlatMap(_unbatch)
        )


def to_runs(scored: list[Scored], names: Sequence[str]) -> dict[str, dict[str, dict[str, float]]]:
    """(qid, docid, scores) rows -> one TREC-style run {qid: {docid: score}} per model name."""
    runs: dict[str, dict[str, dict[str, float]]] = {name: {} for name in names}
    for qid, docid, scores in scored:
        for name, score in zip(names, scores, strict=True):
            docs = runs[name].setdefault(qid, {})
            if docid in docs:
                raise ValueError(f"candidate {docid!r} of query {qid!r} appears twice")
            docs[docid] = score
    return runs
