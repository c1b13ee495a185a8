"""Per-pair scoring (scoring.py's first path): tfx-bsl RunInference runs the `score_examples`
signature over every (query, document) example. Cross-encoders (KNRM, Conv-KNRM, Transformer,
BERT) read query and document together, so this is inherent to them."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import apache_beam as beam
from tensorflow_serving.apis import prediction_log_pb2
from tfx_bsl.public.beam import run_inference
from tfx_bsl.public.proto import model_spec_pb2

from components.ranking_evaluator.eval_examples import Key, Scored, example_key
from rankcore.constants import SCORE_OUTPUT, SCORE_SIGNATURE


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
