"""TFX's StatisticsGen executor, running small inputs' Beam pipeline in process.

Why: StatisticsGen is TFX's own component; on the DirectRunner's default `multi_processing` it
starts Beam workers (each importing TensorFlow) to compute statistics of a few thousand
examples: on the demo most of its 14 s (docs/speed.md, "The pipeline's own cost"). Same
statistics computation, same component (MLMD type, inputs, outputs, caching); only the Beam args
of a small input change, as for RankingDataGen and the RankingEvaluator (components/beam_mode.py).
The statistics are not byte-stable between two multi_processing runs of the same input either
(TFDV's combiners merge in bundle order), and ExampleValidator's verdict does not depend on it.
pipelines/component_table.py puts this executor into the pipeline's StatisticsGen.
"""

from __future__ import annotations

import os
from collections.abc import Callable

import apache_beam as beam
from tfx.components.statistics_gen import executor as tfx_executor
from tfx.types import artifact_utils, standard_component_specs

from components import beam_mode, worker_dirs
from components.executor_types import Artifacts
from components.executor_types import ExecProperties as Props
from components.process_memory import released_after


class Executor(tfx_executor.Executor):
    """tfx.components.StatisticsGen's executor; small inputs run in process."""

    _make_pipeline: Callable[[], beam.Pipeline] | None = None

    @released_after
    def Do(self, input_dict: Artifacts, output_dict: Artifacts, exec_properties: Props) -> None:
        examples = artifact_utils.get_single_instance(
            input_dict[standard_component_specs.EXAMPLES_KEY]
        )
        # Its workers read the examples and write the statistics themselves: on a runner whose
        # workers may be elsewhere both must be object-store URIs (components/worker_dirs.py).
        statistics = artifact_utils.get_single_uri(
            output_dict[standard_component_specs.STATISTICS_KEY]
        )
        worker_dirs.check_worker_paths(
            self._beam_pipeline_args or [],
            {"examples": examples.uri, "statistics": statistics},
            "StatisticsGen",
        )
        size = beam_mode.input_bytes([os.path.join(examples.uri, "*", "*")])
        # In process for a small input; on multi_processing and multi_threading without the
        # timed data-plane flush that loses elements (components/beam_direct.py); else TFX's
        # own pipeline.
        self._make_pipeline = beam_mode.pipeline_maker(self, size, "StatisticsGen")
        super().Do(input_dict, output_dict, exec_properties)

    def _make_beam_pipeline(self) -> beam.Pipeline:
        maker = self._make_pipeline
        if maker is None or maker == self._make_beam_pipeline:
            return super()._make_beam_pipeline()
        return maker()
