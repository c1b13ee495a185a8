"""RankingDataGen executor: marshals the artifacts around generate.py's work.

It reads the two JSON parameters and the optional `corpus_vectors` input (its URI goes to
dense hybrid retrieval), picks the work directory the workers open (the executor's
temp dir on the DirectRunner, object-store URIs on a runner whose workers may be elsewhere:
components/worker_dirs.py), runs `generate.generate` (the steps are in its docstring) and
publishes the staged outputs into the artifacts, with the examples' split names and lineage
record. A failure clears the artifact directories, so a failed run leaves nothing a later
component could read.
"""

from __future__ import annotations

import json
import logging
import time

import tensorflow as tf
from tfx.dsl.components.base import base_beam_executor
from tfx.types import artifact_utils

from components import beam_mode, worker_dirs
from components.executor_types import Artifacts
from components.executor_types import ExecProperties as Props
from components.process_memory import released_after
from components.ranking_datagen import generate, outputs
from components.ranking_datagen.config import (
    CORPUS_VECTORS,
    CROSS_VALIDATION_FOLDS,
    CollectionConfig,
    DatagenConfig,
    cross_validation_folds,
)
from components.ranking_datagen.generate import OUTPUT_KEYS
from rankcore import lineage


class Executor(base_beam_executor.BaseBeamExecutor):
    """Runs RankingDataGen; see the module docstring."""

    @released_after
    def Do(self, input_dict: Artifacts, output_dict: Artifacts, exec_properties: Props) -> None:
        out = {name: artifact_utils.get_single_instance(output_dict[name]) for name in OUTPUT_KEYS}
        # What the workers open: the documents, the corpus vectors (when given) and the work
        # directory (pickles, pass 1's texts, the staged artifacts). The executor's temp dir on
        # the DirectRunner; on a runner whose workers may be elsewhere, object-store URIs or an
        # error naming the setting, before any work (components/worker_dirs.py).
        coll = CollectionConfig.from_dict(json.loads(exec_properties["collection"]))
        vectors = input_dict.get(CORPUS_VECTORS)
        vectors_uri = artifact_utils.get_single_uri(vectors) if vectors else None
        reads = {"collection.documents": coll.documents}
        reads.update({"corpus_vectors": vectors_uri} if vectors_uri else {})
        work_dir = worker_dirs.work_dir(self, "ranking_datagen", "RankingDataGen", reads)
        try:
            start = time.time()
            cfg = DatagenConfig.from_dict(json.loads(exec_properties["datagen"]))
            folds = exec_properties.get(CROSS_VALIDATION_FOLDS) or 0
            generated = generate.generate(
                coll,
                cfg,
                cross_validation_folds(folds, cfg.split),
                work_dir,
                lambda size: beam_mode.pipeline_maker(self, size, "RankingDataGen"),
                vectors_uri,
            )
            record = generated.summary[lineage.RECORD_KEY]
            out["examples"].set_string_custom_property(
                lineage.RECORD_KEY, json.dumps(record, sort_keys=True)
            )
            outputs.publish(generated.stage, {name: a.uri for name, a in out.items()})
            out["examples"].split_names = artifact_utils.encode_split_names(generated.split_names)
            logging.info(
                "RankingDataGen finished in %.1fs: %s", time.time() - start, generated.summary
            )
        except BaseException:
            outputs.clear([a.uri for a in out.values()])
            raise
        finally:
            if tf.io.gfile.exists(work_dir):
                tf.io.gfile.rmtree(work_dir)
