"""The CorpusEncoder's executor. It only marshals: exec properties -> encode.encode_corpus into
a work directory every Beam worker reaches (components/worker_dirs.py) -> the shards moved into
the artifact, corpus_vectors.json written last (its presence means the shards are whole), and
the artifact's custom properties. A failure clears the artifact directory, so a failed run
leaves nothing a later component could read as vectors."""

from __future__ import annotations

import logging
import os
import time

import tensorflow as tf
from tfx.dsl.components.base import base_beam_executor
from tfx.types import artifact_utils

from components import beam_mode, worker_dirs
from components.corpus_encoder import constants, encode
from components.corpus_encoder.config import DocumentsConfig, encoders_from_json
from components.executor_types import Artifacts
from components.executor_types import ExecProperties as Props
from components.process_memory import released_after
from components.ranking_datagen import outputs
from rankcore import corpus_vectors


class Executor(base_beam_executor.BaseBeamExecutor):
    """Runs the CorpusEncoder; see the module docstring."""

    @released_after
    def Do(self, input_dict: Artifacts, output_dict: Artifacts, exec_properties: Props) -> None:
        out = artifact_utils.get_single_instance(output_dict[constants.CORPUS_VECTORS])
        docs = DocumentsConfig.from_json(exec_properties[constants.DOCUMENTS])
        entries = encoders_from_json(exec_properties[constants.ENCODERS])
        reads = {"collection.documents": docs.documents}
        reads.update({f"encoder {i}": e.checkpoint_dir for i, e in enumerate(entries)})
        work_dir = worker_dirs.work_dir(self, "corpus_encoder", "CorpusEncoder", reads)
        stage = os.path.join(work_dir, "stage")
        try:
            start = time.time()
            # A small collection runs in process: no Beam worker start-up (beam_mode.py).
            size = beam_mode.input_bytes([docs.documents])
            meta = encode.encode_corpus(
                beam_mode.pipeline_maker(self, size, "CorpusEncoder"),
                docs,
                [e.spec for e in entries],
                stage,
            )
            outputs.publish({constants.CORPUS_VECTORS: stage}, {constants.CORPUS_VECTORS: out.uri})
            corpus_vectors.write_meta(out.uri, meta)  # last: the shards are whole and in place
            documents = max((e.documents for e in meta.encoders), default=0)
            out.set_int_custom_property(constants.DOCUMENTS_PROPERTY, documents)
            out.set_int_custom_property(constants.ENCODERS_PROPERTY, len(meta.encoders))
            logging.info(
                "CorpusEncoder finished in %.1fs: %s",
                time.time() - start,
                ", ".join(f"{e.key} {e.documents} x {e.dim}" for e in meta.encoders),
            )
        except BaseException:
            outputs.clear([out.uri])
            raise
        finally:
            if tf.io.gfile.exists(work_dir):
                tf.io.gfile.rmtree(work_dir)
