"""Runs the pipeline locally: LocalDagRunner, SQLite MLMD under the pipeline root.

Also a TFX CLI DSL file:
  tfx pipeline create --engine local --pipeline_path pipelines/local_runner.py
  tfx run create --engine local --pipeline_name <runner.pipeline_name>
The config comes from $RANKPIPE_CONFIG (a path or a name in pipelines/configs/; default: demo),
with overrides from $RANKPIPE_SET (space-separated key=value pairs).
"""

from __future__ import annotations

import os

from tfx import v1 as tfx

from pipelines import demo_data
from pipelines.config import PipelineConfig, load_config
from pipelines.pipeline import create_pipeline

CONFIG_ENV, OVERRIDES_ENV = "RANKPIPE_CONFIG", "RANKPIPE_SET"


def prepare_collection(config: PipelineConfig) -> None:
    """Generates the demo collection when the config asks for it and its files are missing."""
    demo = config.collection.demo
    paths = (config.collection.documents, config.collection.queries, config.collection.qrels)
    if demo.enabled and not all(os.path.exists(p) for p in paths):
        made = demo_data.generate(
            os.path.dirname(config.collection.documents),
            demo.seed,
            demo.num_documents,
            demo.num_queries,
        )
        expected = dict(zip(("documents", "queries", "qrels"), paths))
        if made != expected:
            raise ValueError(
                f"{config.source}: collection paths must be corpus.jsonl, queries.jsonl and "
                f"qrels.txt in one directory when collection.demo.enabled (got {expected})"
            )


def build_pipeline(config: PipelineConfig) -> tfx.dsl.Pipeline:
    os.makedirs(config.runner.pipeline_root, exist_ok=True)
    return create_pipeline(
        config,
        tfx.orchestration.metadata.sqlite_metadata_connection_config(config.runner.metadata_path),
    )


def run(config: PipelineConfig) -> None:
    prepare_collection(config)
    tfx.orchestration.LocalDagRunner().run(build_pipeline(config))


if __name__ == "__main__":
    _config = load_config(
        os.environ.get(CONFIG_ENV, "demo"), os.environ.get(OVERRIDES_ENV, "").split()
    )
    run(_config)
