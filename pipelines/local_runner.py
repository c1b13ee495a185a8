"""Runs the pipeline locally: LocalDagRunner, SQLite MLMD under the pipeline root.

Also a TFX CLI DSL file:
  tfx pipeline create --engine local --pipeline_path pipelines/local_runner.py
  tfx run create --engine local --pipeline_name <runner.pipeline_name>
The config comes from $RANKPIPE_CONFIG (a path or a name in pipelines/configs/; default: demo),
with overrides from $RANKPIPE_SET (space-separated key=value pairs). `tfx run create` shows the
same console as `rankpipe run` (pipelines/console/: a line per component, the full log in a
file under the pipeline root, a short error block and exit 1 on failure); RANKPIPE_VERBOSE=1
puts every log line on the console instead.
"""

from __future__ import annotations

import os
import sys
from typing import Any

CONFIG_ENV, OVERRIDES_ENV, VERBOSE_ENV = "RANKPIPE_CONFIG", "RANKPIPE_SET", "RANKPIPE_VERBOSE"


def rankpipe_run_argv() -> list[str]:
    """`rankpipe run` arguments equivalent to the environment's config and overrides."""
    argv = ["run", os.environ.get(CONFIG_ENV, "demo")]
    for override in os.environ.get(OVERRIDES_ENV, "").split():
        argv += ["--set", override]
    if os.environ.get(VERBOSE_ENV, "") not in ("", "0"):
        argv.append("--verbose")
    return argv


# `tfx run create` runs this file as a script in a new process: it becomes `rankpipe run` (same
# console, log file, error blocks and exit codes) before TensorFlow is imported below, whose
# C++ start-up lines would otherwise reach the console first. `tfx pipeline create` instead
# executes this file inside the CLI's own process (tfx.tools.cli loaded, LocalDagRunner.run
# patched) only to read the pipeline's arguments: the __main__ block at the end serves it.
if __name__ == "__main__" and "tfx.tools.cli.handler.base_handler" not in sys.modules:
    sys.stdout.flush()
    os.execv(sys.executable, [sys.executable, "-m", "pipelines.cli", *rankpipe_run_argv()])

from tfx import v1 as tfx  # noqa: E402

from components import process_memory  # noqa: E402
from pipelines import demo_data  # noqa: E402
from pipelines.config import PipelineConfig, load_config  # noqa: E402
from pipelines.pipeline import create_pipeline  # noqa: E402
from rankcore.config_loader import ConfigError  # noqa: E402


def prepare_collection(config: PipelineConfig) -> None:
    """Generates the demo collection when the config asks for it and its files are missing or
    were generated with other settings (pipelines/demo_data.py is_current).

    Only into a directory the demo owns (pipelines/demo_data.py check_writable): the config's
    own check (pipelines/config_checks.py check_demo_paths) already keeps it under the outputs
    directory; this one holds for a config built in memory too."""
    coll = config.collection
    demo = coll.demo
    if not demo.enabled:
        return
    directory = os.path.dirname(coll.documents)
    wrong = demo_data.misplaced(coll.documents, coll.queries, coll.qrels)
    if wrong:
        raise ConfigError(
            f"{config.source}: {wrong}: collection.demo.enabled generates corpus.jsonl, "
            "queries.jsonl and qrels.txt in one directory; to read your own files set "
            "collection.demo.enabled: false"
        )
    if demo_data.is_current(directory, demo.seed, demo.num_documents, demo.num_queries):
        return
    try:
        demo_data.generate(directory, demo.seed, demo.num_documents, demo.num_queries)
    except demo_data.NotADemoDirectory as e:
        raise ConfigError(
            f"{config.source}: collection.demo.enabled: {e}; to read your own files set "
            "collection.demo.enabled: false"
        ) from None


def build_pipeline(config: PipelineConfig) -> tfx.dsl.Pipeline:
    os.makedirs(config.runner.pipeline_root, exist_ok=True)
    return create_pipeline(
        config,
        tfx.orchestration.metadata.sqlite_metadata_connection_config(config.runner.metadata_path),
    )


class IrKeepingDagRunner(tfx.orchestration.LocalDagRunner):
    """LocalDagRunner that keeps the pipeline IR it runs in `ir`, its run id substituted (TFX
    does that in place): after an interrupt, pipelines/interrupts.py finds the run's unfinished
    executions and their output directories from it."""

    ir = None

    def run_with_ir(self, pipeline: Any, run_options: Any = None, **kwargs: Any) -> Any:
        self.ir = pipeline
        return super().run_with_ir(pipeline, run_options=run_options, **kwargs)


def run(
    config: PipelineConfig,
    console: Any = None,
    runner: tfx.orchestration.LocalDagRunner | None = None,
) -> None:
    """Runs the pipeline; `console` (pipelines.console.RunConsole) gets the component count;
    `runner` (default: a new LocalDagRunner) runs it."""
    prepare_collection(config)
    pipeline = build_pipeline(config)
    if console is not None:
        console.total = len(pipeline.components)
    # The imported libraries' objects out of the collections each component's release runs
    # (components/process_memory.py).
    with process_memory.frozen_heap():
        (runner or tfx.orchestration.LocalDagRunner()).run(pipeline)


if __name__ == "__main__":  # inside `tfx pipeline create` (see the top of this file)
    run(load_config(os.environ.get(CONFIG_ENV, "demo"), os.environ.get(OVERRIDES_ENV, "").split()))
