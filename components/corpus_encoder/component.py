"""CorpusEncoder: a Beam TFX component embedding every document of the collection once per
sentence encoder (docs/corpus-encoder.md)."""

from __future__ import annotations

from collections.abc import Sequence

from tfx import types
from tfx.dsl.components.base import base_beam_component, executor_spec
from tfx.types import component_spec

from components import artifacts
from components.corpus_encoder import constants, executor
from components.corpus_encoder.config import DocumentsConfig, encoders_to_json, entries_of
from rankcore.corpus_vectors import EncoderSpec


class CorpusEncoderSpec(types.ComponentSpec):
    PARAMETERS = {
        # JSON of config.DocumentsConfig: the documents and how they are read and tokenized.
        constants.DOCUMENTS: component_spec.ExecutionParameter(type=str),
        # JSON list of config.EncoderEntry: checkpoint_dir, checkpoint_digest, max_length,
        # precision (the digest: a changed checkpoint under the same path misses the cache).
        constants.ENCODERS: component_spec.ExecutionParameter(type=str),
    }
    INPUTS = {}
    OUTPUTS = {
        constants.CORPUS_VECTORS: component_spec.ChannelParameter(type=artifacts.CorpusVectors),
    }


class CorpusEncoder(base_beam_component.BaseBeamComponent):
    """Writes `corpus_vectors` (rankpipe.CorpusVectors): each document's cut token ids and
    vector per encoder, in rankcore/corpus_vectors.py's format, read by RankingDataGen's dense
    retrieval, the Trainers and the RankingEvaluator."""

    SPEC_CLASS = CorpusEncoderSpec
    EXECUTOR_SPEC = executor_spec.BeamExecutorSpec(executor.Executor)

    def __init__(self, documents: DocumentsConfig, encoders: Sequence[EncoderSpec]):
        entries = entries_of(encoders)
        if not entries:
            raise ValueError(
                "CorpusEncoder: no encoder given (leave the component out of the pipeline when "
                "nothing reads corpus vectors)"
            )
        super().__init__(
            spec=CorpusEncoderSpec(
                **{
                    constants.DOCUMENTS: documents.to_json(),
                    constants.ENCODERS: encoders_to_json(entries),
                    constants.CORPUS_VECTORS: types.Channel(type=artifacts.CorpusVectors),
                }
            )
        )
