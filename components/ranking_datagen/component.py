"""RankingDataGen: a Beam TFX component turning a raw collection into ranking examples."""

from __future__ import annotations

import json

from tfx import types
from tfx.dsl.components.base import base_beam_component, executor_spec
from tfx.types import component_spec, standard_artifacts

from components import artifacts
from components.ranking_datagen import config, executor
from components.ranking_datagen.config import DatagenConfig


class RankingDataGenSpec(types.ComponentSpec):
    PARAMETERS = {
        # JSON of components.ranking_datagen.config.CollectionConfig / DatagenConfig.
        "collection": component_spec.ExecutionParameter(type=str),
        "datagen": component_spec.ExecutionParameter(type=str),
        # k > 0: k-fold cross-validation splits fold<f>_train / fold<f>_eval instead of
        # train/dev/test (rankcore/folds.py); absent or 0: off.
        config.CROSS_VALIDATION_FOLDS: component_spec.ExecutionParameter(type=int, optional=True),
    }
    INPUTS = {
        # The CorpusEncoder's vectors: dense hybrid retrieval reads the documents' vectors
        # there instead of embedding them (dense.py). Optional: absent, it embeds them.
        config.CORPUS_VECTORS: component_spec.ChannelParameter(
            type=artifacts.CorpusVectors, optional=True
        ),
    }
    OUTPUTS = {
        "examples": component_spec.ChannelParameter(type=standard_artifacts.Examples),
        "transform_graph": component_spec.ChannelParameter(type=standard_artifacts.TransformGraph),
        "vocabulary": component_spec.ChannelParameter(type=artifacts.Vocabulary),
        "qrels": component_spec.ChannelParameter(type=artifacts.Qrels),
        "first_stage_run": component_spec.ChannelParameter(type=artifacts.TrecRun),
        "summary": component_spec.ChannelParameter(type=artifacts.DatagenSummary),
    }


class RankingDataGen(base_beam_component.BaseBeamComponent):
    """Reads documents/queries/qrels (and optionally a first-stage run) and writes:

    examples (train/dev/test, or fold<f>_train/fold<f>_eval for f < `cross_validation_folds`
    when that is > 0; sharded gzip TFRecords), the tf.Transform graph that tokenizes raw
    text, the WordPiece vocabulary, the qrels and the first-stage run, and a summary of counts.
    With `corpus_vectors` (the CorpusEncoder's output) and `datagen.hybrid` on, the dense
    retrieval takes the documents' vectors from that artifact.
    """

    SPEC_CLASS = RankingDataGenSpec
    EXECUTOR_SPEC = executor_spec.BeamExecutorSpec(executor.Executor)

    def __init__(
        self,
        collection: dict,
        datagen: dict,
        cross_validation_folds: int = 0,
        corpus_vectors: types.BaseChannel | None = None,
    ):
        # Off, the property is left out: the compiled pipeline stays what it was before it. On,
        # a fold count the datagen split cannot give fails here, when the pipeline is built.
        cv = {}
        if cross_validation_folds:
            config.cross_validation_folds(
                cross_validation_folds, DatagenConfig.from_dict(datagen).split
            )
            cv = {config.CROSS_VALIDATION_FOLDS: cross_validation_folds}
        # Absent, the input is left out: the compiled pipeline is what it was without it.
        vectors = {config.CORPUS_VECTORS: corpus_vectors} if corpus_vectors is not None else {}
        super().__init__(
            spec=RankingDataGenSpec(
                **cv,
                **vectors,
                collection=json.dumps(collection, sort_keys=True),
                datagen=json.dumps(datagen, sort_keys=True),
                examples=types.Channel(type=standard_artifacts.Examples),
                transform_graph=types.Channel(type=standard_artifacts.TransformGraph),
                vocabulary=types.Channel(type=artifacts.Vocabulary),
                qrels=types.Channel(type=artifacts.Qrels),
                first_stage_run=types.Channel(type=artifacts.TrecRun),
                summary=types.Channel(type=artifacts.DatagenSummary),
            )
        )
