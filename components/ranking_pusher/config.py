"""Typed configuration of RankingPusher: the `pusher:` section of the pipeline YAML.

Beside its owner (issue 19); pipelines/config.py composes it into PipelineConfig. The pipeline
passes `destination` to the Pusher (and to the evaluator, for the baseline) as a plain string.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class PusherConfig:
    # Base directory (local path or any tf.io.gfile URI); versions go to <base>/<version>/.
    destination: str = "${RANKPIPE_OUTPUTS}/serving/${RANKPIPE_PIPELINE_NAME}"
