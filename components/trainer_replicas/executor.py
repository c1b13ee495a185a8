"""The executor of the Trainer run as a TFJob. It only marshals; the work is in tfjob.py."""

from __future__ import annotations

from tfx.components.trainer import executor as trainer_executor
from tfx.types import artifact_utils, standard_component_specs
from tfx.utils import json_utils

from components.executor_types import Artifacts
from components.executor_types import ExecProperties as Props
from components.trainer_replicas import tfjob
from components.trainer_replicas.config import TrainerReplicasConfig

# custom_config key of the TFJob's settings: {"replicas": TrainerReplicasConfig dict,
# "image": the replicas' image, "pipeline_name": names the job}.
TFJOB_KEY = "rankpipe_tfjob"


def _uris(artifacts: Artifacts) -> dict[str, list[str]]:
    return {key: [a.uri for a in items] for key, items in artifacts.items()}


def _with_uris(artifacts: Artifacts, uris: dict[str, list[str]]) -> str:
    """TFX's artifact JSON of copies of `artifacts` at `uris`."""
    copies = artifact_utils.parse_artifact_dict(artifact_utils.jsonify_artifact_dict(artifacts))
    for key, items in copies.items():
        for artifact, uri in zip(items, uris[key]):
            artifact.uri = uri
    return artifact_utils.jsonify_artifact_dict(copies)


class TFJobTrainerExecutor(trainer_executor.GenericExecutor):
    """TFX's Trainer executor, run as a Kubeflow Training Operator TFJob (tfjob.run_tfjob):
    every replica runs TFX's GenericExecutor (replica.py) with this execution's input."""

    def Do(self, input_dict: Artifacts, output_dict: Artifacts, exec_properties: Props) -> None:
        self._log_startup(input_dict, output_dict, exec_properties)
        custom = json_utils.loads(
            exec_properties.get(standard_component_specs.CUSTOM_CONFIG_KEY) or "null"
        )
        job = (custom or {}).get(TFJOB_KEY)
        if not job:
            raise ValueError(f"custom_config has no {TFJOB_KEY!r}: not a replicated Trainer")
        tfjob.run_tfjob(
            _uris(input_dict),
            _uris(output_dict),
            lambda ins, outs: (_with_uris(input_dict, ins), _with_uris(output_dict, outs)),
            exec_properties,
            TrainerReplicasConfig(**job["replicas"]),
            image=job["image"],
            pipeline_name=job["pipeline_name"],
        )
