"""Reusing the Trainer's vectors in EmbedAndScore (embed_once.py): a dual encoder's Trainer
already embedded its dev split's texts with the very SavedModel the evaluator scores
(rankcore/embeddings.py), so the texts among them whose cut token ids match are not embedded
again; with a frozen document tower, other Trainers' files lend their documents too. The
model's fingerprint says whether a file is of this model (reusable_embeddings), and a sample
of the reused texts is embedded again and compared (_Reuse, _Check), so that a vector the
SavedModel would not give is caught and score_split scores the split again without reuse."""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Iterator, Sequence
from typing import NamedTuple

import apache_beam as beam
import numpy as np
from apache_beam.utils import shared

from components.ranking_evaluator.embedding import embed_texts
from components.ranking_evaluator.eval_examples import Text
from rankcore import embeddings

# Reusing the Trainer's vectors (EmbedAndScore `reuse`): every CHECK_EVERY-th reused text is
# embedded again and must agree with the stored vector to REUSE_TOLERANCE in every component
# (the same model on other batches: float32 rounding is about 1e-7 here); the counters below
# say how many were checked and how many differed. One in 256: a wrong file or tower makes
# every vector wrong, so a few per split find it; at one in 64, Cranfield's cross-validated
# evaluator (6,155 texts reused, most of them documents lent by other folds) re-embedded 107
# texts, 100 of them abstracts through MPNet, about a third of its model time.
CHECK_EVERY = 256
REUSE_TOLERANCE = 1e-5
REUSE_CHECKED, REUSE_MISMATCHED = "reuse_checked", "reuse_mismatched"
# Reused documents taken from another model's file (a shared frozen document tower).
REUSED_FROM_OTHERS = "documents_of_other_models"


class StoredVectors(NamedTuple):
    """The Trainer's vectors file (rankcore/embeddings.py) and its meta.json, and the files of
    other models whose documents are this model's too (embeddings.shares_documents)."""

    path: str
    meta: embeddings.EmbeddingsMeta
    document_paths: tuple[str, ...] = ()


def reusable_embeddings(
    model_run_dir: str | None,
    model_dir: str,
    other_runs: Sequence[str | None] = (),
    split: str | None = None,
) -> StoredVectors | None:
    """The Trainer's embeddings under `model_run_dir` when they are of this very SavedModel
    (the fingerprints agree), else None (then everything is embedded); with them, the vectors
    files of those `other_runs` (other models' ModelRun directories) that share its frozen
    document tower, for their documents: only the one that embedded `split` (the split to
    score; it holds every document of it) when there is one, else all of them (each file read
    is a pass over its records in Beam: on Cranfield 5 files per fold cost 20 s more than 1)."""
    if not model_run_dir:
        return None
    meta = embeddings.read_meta(model_run_dir)
    if meta is None or not meta.model:
        return None
    if meta.model != embeddings.model_fingerprint(model_dir):
        logging.info("the embeddings in %s are of another model: not reused", model_run_dir)
        return None
    lenders = []
    for other in dict.fromkeys(other_runs):  # in order, once each
        if not other or other == model_run_dir:
            continue
        other_meta = embeddings.read_meta(other)
        if other_meta is not None and embeddings.shares_documents(meta, other_meta):
            lenders.append((other, other_meta))
    of_split = [(o, m) for o, m in lenders if split and m.split == split]
    paths = tuple(embeddings.vectors_path(o) for o, _ in (of_split[:1] or lenders))
    return StoredVectors(embeddings.vectors_path(model_run_dir), meta, paths)


class _Reuse(beam.DoFn):
    """A distinct text joined with the Trainer's vector of it (rankcore/embeddings.py) -> the
    vector (main output) when the text's cut token ids have the stored digest, else the text
    to embed ("embed"). Stored vectors come as (rank, digest, vector): the model's own file is
    rank 0, other models' documents (StoredVectors.document_paths) rank 1, 2, ...; the lowest
    rank with the digest wins, so every runner picks the same one. Every CHECK_EVERY-th reused
    text (by a hash of its key, so the same ones on every runner) is also sent to be embedded
    again ("check") with the stored vector, so that a vector the SavedModel would not give is
    caught (_Check)."""

    def __init__(self, meta: embeddings.EmbeddingsMeta):
        self._meta = meta
        self._reused = beam.metrics.Metrics.counter("rankpipe", "texts_reused")
        self._shared = beam.metrics.Metrics.counter("rankpipe", REUSED_FROM_OTHERS)

    def process(self, joined: tuple[Text, dict]) -> Iterator:
        key, parts = joined
        if not parts["ids"]:
            return  # a text of the Trainer's split that this split does not have
        (ids,) = parts["ids"]
        digest = embeddings.text_digest(ids, self._meta.max_length(key[0]))
        stored = min(
            ((rank, vector) for rank, d, vector in parts["stored"] if d == digest),
            key=lambda rv: rv[0],
            default=None,
        )
        if stored is None:
            yield beam.pvalue.TaggedOutput("embed", (key, ids))
            return
        self._reused.inc()
        if stored[0]:
            self._shared.inc()
        yield key, stored[1]
        if int(hashlib.sha1(repr(key).encode()).hexdigest(), 16) % CHECK_EVERY == 0:
            yield beam.pvalue.TaggedOutput("check", (key, ids))
            yield beam.pvalue.TaggedOutput("check_stored", (key, stored[1]))


class _Check(beam.DoFn):
    """A re-embedded text against its stored vector: counts the texts checked and those whose
    vector differs by more than REUSE_TOLERANCE in any component (score_split then scores the
    split again without reuse)."""

    def __init__(self):
        self._checked = beam.metrics.Metrics.counter("rankpipe", REUSE_CHECKED)
        self._mismatched = beam.metrics.Metrics.counter("rankpipe", REUSE_MISMATCHED)

    def process(self, joined: tuple[Text, dict]) -> Iterator:
        _, parts = joined
        (vector,), (stored,) = parts["embedded"], parts["stored"]
        self._checked.inc()
        if float(np.max(np.abs(vector - stored))) > REUSE_TOLERANCE:
            self._mismatched.inc()
        return iter(())


def reused_vectors(
    distinct: beam.PCollection,
    stored_vectors: StoredVectors,
    model_dir: str,
    handle: shared.Shared,
    batch_size: int,
    i: int,
) -> beam.PCollection:
    """(text key, ids) of every distinct text -> (text key, vector) with model `i`: the stored
    vector where its digest matches (_Reuse), else the text embedded; a sample of the reused
    texts is embedded again and compared (_Check)."""
    stored = [
        distinct.pipeline
        | f"ReadStored{i}-{rank}"
        >> beam.io.ReadFromTFRecord(path, compression_type=beam.io.filesystem.CompressionTypes.GZIP)
        | f"ParseStored{i}-{rank}" >> beam.Map(embeddings.from_example)
        # Other models' files lend their documents only (their queries' towers differ).
        | f"KeyStored{i}-{rank}"
        >> beam.FlatMap(
            lambda r, rank=rank: (
                [(r[0], (rank, r[1], r[2]))] if rank == 0 or r[0][0] == embeddings.DOCUMENT else []
            )
        )
        for rank, path in enumerate([stored_vectors.path, *stored_vectors.document_paths])
    ]
    if len(stored) > 1:
        stored = stored | f"StoredFiles{i}" >> beam.Flatten()
    else:
        (stored,) = stored
    joined = (
        {"ids": distinct, "stored": stored}
        | f"JoinStored{i}" >> beam.CoGroupByKey()
        | f"Reuse{i}"
        >> beam.ParDo(_Reuse(stored_vectors.meta)).with_outputs(
            "embed", "check", "check_stored", main="reused"
        )
    )
    embedded = embed_texts(joined.embed, model_dir, handle, batch_size, f"{i}")
    checked = embed_texts(joined.check, model_dir, handle, batch_size, f"Check{i}")
    _ = (
        {"embedded": checked, "stored": joined.check_stored}
        | f"JoinChecks{i}" >> beam.CoGroupByKey()
        | f"Compare{i}" >> beam.ParDo(_Check())
    )
    return (embedded, joined.reused) | f"Vectors{i}" >> beam.Flatten()
