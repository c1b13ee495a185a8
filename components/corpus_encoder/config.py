"""The CorpusEncoder's exec properties, typed: which documents, read and tokenized how, and
which encoders.

Only what the vectors depend on is a property, so TFX's cache (and KFP's) reuses the artifact
when anything else changes (the Trainer's or the evaluator's settings, the queries, the
judgments): the documents and how RankingDataGen reads and tokenizes them, and per encoder its
checkpoint directory, the digest of the checkpoint's files (a new checkpoint under the same path
is a new encoder), the cut and the precision.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from components.ranking_datagen.readers import READERS
from rankcore import config_loader
from rankcore.corpus_vectors import FLOAT32, EncoderSpec
from rankcore.encoders import hf_checkpoint

DOC_FORMATS = tuple(READERS["documents"])


@dataclass(frozen=True)
class DocumentsConfig:
    """The collection's documents, read as RankingDataGen reads them (collection.documents,
    documents_format, allow_empty_documents; datagen.on_bad_record) and tokenized as its
    examples are (datagen.vocab.lowercase)."""

    documents: str
    documents_format: str
    allow_empty_documents: bool = False
    on_bad_record: str = "fail"
    lowercase: bool = True
    batch_size: int = 64  # texts per encoder call (datagen.hybrid.batch_size)

    def __post_init__(self) -> None:
        config_loader.one_of("documents_format", self.documents_format, DOC_FORMATS)
        config_loader.one_of("on_bad_record", self.on_bad_record, ("fail", "skip"))
        config_loader.positive("batch_size", self.batch_size)

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> DocumentsConfig:
        return config_loader.build(cls, json.loads(text), "CorpusEncoder documents")


@dataclass(frozen=True)
class EncoderEntry:
    """One encoder as an exec property: an EncoderSpec and its checkpoint's file digest."""

    checkpoint_dir: str
    max_length: int
    precision: str = FLOAT32
    # hf_checkpoint.checkpoint_digest when the pipeline was built; None where the compiling
    # machine cannot read the checkpoint (a bucket or an in-image path on Kubeflow).
    checkpoint_digest: str | None = None

    def __post_init__(self) -> None:
        config_loader.positive("max_length", self.max_length)

    @property
    def spec(self) -> EncoderSpec:
        return EncoderSpec(self.checkpoint_dir, self.max_length, self.precision)


def local_digest(checkpoint_dir: str) -> str | None:
    """The checkpoint's file digest when it is a local directory this machine can read; None
    for a URI (gs://...: `rankpipe compile` must not need the bucket) or a missing one (the
    config checks name that key; the executor fails naming it too)."""
    if "://" in checkpoint_dir or not os.path.isdir(checkpoint_dir):
        return None
    return hf_checkpoint.checkpoint_digest(checkpoint_dir)


def entries_of(specs: Sequence[EncoderSpec]) -> list[EncoderEntry]:
    """The specs' entries, one per distinct key (by checkpoint path, cut and precision here: the
    executor checks the files), sorted by that key: the artifact holds the same vectors whichever
    encoder is the model's own and which its companion, so TFX's cache (and KFP's) reuses it when
    the two swap roles."""
    seen: set[tuple[str, int, str]] = set()
    out = []
    for spec in specs:
        ident = (spec.checkpoint_dir, spec.max_length, spec.precision)
        if ident in seen:
            continue
        seen.add(ident)
        out.append(
            EncoderEntry(
                spec.checkpoint_dir,
                spec.max_length,
                spec.precision,
                local_digest(spec.checkpoint_dir),
            )
        )
    return sorted(out, key=lambda e: (e.checkpoint_dir, e.max_length, e.precision))


def encoders_to_json(entries: Sequence[EncoderEntry]) -> str:
    return json.dumps([dataclasses.asdict(e) for e in entries], sort_keys=True)


def encoders_from_json(text: str) -> list[EncoderEntry]:
    data: Any = json.loads(text)
    if not isinstance(data, list) or not data:
        raise ValueError(
            f"CorpusEncoder exec property 'encoders': a non-empty JSON list of encoders, got "
            f"{text[:200]!r} (the pipeline leaves the component out when no encoder is needed)"
        )
    return [config_loader.build(EncoderEntry, e, "CorpusEncoder encoder") for e in data]
