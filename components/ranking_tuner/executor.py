"""The RankingTuner's executor: TFX's Tuner executor with the corpus vectors' and the
judgments' URIs in fn_args.

TFX's Tuner executor builds fn_args from the standard inputs only (as its Trainer does:
components/ranking_trainer/executor.py) and writes best_hyperparameters from KerasTuner's
config alone. This one adds those URIs to fn_args.custom_config, and writes the
search's own best_config (every trial's values and dev score beside KerasTuner's), which the
Trainer's run_fn puts on the model card. It only marshals: the search is
trainer_module/tuning.py.
"""

from __future__ import annotations

import json
import os

from tfx.components.trainer import fn_args_utils
from tfx.components.tuner import executor as tuner_executor
from tfx.components.util import udf_utils
from tfx.dsl.components.base import base_executor
from tfx.types import artifact_utils, standard_component_specs

from components.executor_types import Artifacts
from components.executor_types import ExecProperties as Props
from components.process_memory import released_after
from components.ranking_trainer.executor import extra_uris
from components.ranking_tuner.constants import BEST_HYPERPARAMETERS_FILE, TUNER_RESULTS_FILE
from rankcore.file_io import write_text_atomic


class Executor(base_executor.BaseExecutor):
    """Runs the tuner_fn's search and writes its choice (module docstring)."""

    @released_after
    def Do(self, input_dict: Artifacts, output_dict: Artifacts, exec_properties: Props) -> None:
        if tuner_executor.get_tune_args(exec_properties):
            raise ValueError("RankingTuner: tune_args (parallel trials) is not supported")
        fn_args = fn_args_utils.get_common_fn_args(input_dict, exec_properties, self._get_tmp_dir())
        uris = extra_uris(input_dict)
        if uris:
            fn_args.custom_config = {**(fn_args.custom_config or {}), **uris}
        result = udf_utils.get_fn(exec_properties, "tuner_fn")(fn_args)
        result.tuner.search_space_summary()
        result.tuner.search(**result.fit_kwargs)
        result.tuner.results_summary()
        best = result.tuner.best_config()
        best_dir = artifact_utils.get_single_uri(
            output_dict[standard_component_specs.BEST_HYPERPARAMETERS_KEY]
        )
        results_dir = artifact_utils.get_single_uri(
            output_dict[standard_component_specs.TUNER_RESULTS_KEY]
        )
        write_text_atomic(os.path.join(best_dir, BEST_HYPERPARAMETERS_FILE), json.dumps(best))
        write_text_atomic(
            os.path.join(results_dir, TUNER_RESULTS_FILE), json.dumps(result.tuner.trials())
        )
