"""Compiles the pipeline for Kubeflow Pipelines (KubeflowV2DagRunner -> a PipelineSpec file).

Also a TFX CLI DSL file (`tfx pipeline create --engine vertex|kubeflow --pipeline_path ...`);
the config comes from $RANKPIPE_CONFIG as in local_runner.py.
"""

from __future__ import annotations

import os

from tfx import v1 as tfx

from pipelines.config import PipelineConfig, load_config
from pipelines.pipeline import create_pipeline

CONFIG_ENV, OVERRIDES_ENV = "RANKPIPE_CONFIG", "RANKPIPE_SET"


def compile_pipeline(config: PipelineConfig, output_file: str) -> str:
    """Writes the KFP PipelineSpec (JSON, which is also valid YAML) to output_file."""
    runner = tfx.orchestration.experimental.KubeflowV2DagRunner(
        config=tfx.orchestration.experimental.KubeflowV2DagRunnerConfig(
            default_image=config.runner.image
        ),
        output_dir=os.path.dirname(os.path.abspath(output_file)),
        output_filename=os.path.basename(output_file),
    )
    runner.run(create_pipeline(config))
    return output_file


if __name__ == "__main__":
    _config = load_config(
        os.environ.get(CONFIG_ENV, "cranfield"),
        os.environ.get(OVERRIDES_ENV, "").split(),
        check_inputs=False,
    )
    compile_pipeline(
        _config, os.environ.get("RANKPIPE_SPEC", f"{_config.runner.pipeline_name}.json")
    )
