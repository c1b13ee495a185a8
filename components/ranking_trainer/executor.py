"""The Trainer's executors hand the run_fn the corpus vectors' URI.

TFX's Trainer passes the run_fn its standard inputs only (fn_args_utils.get_common_fn_args:
examples, transform graph, schema, ...): an extra input channel reaches the executor's
input_dict but not the run_fn. `CorpusVectorsFnArgs._GetFnArgs` adds the artifact's URI to
fn_args.custom_config under CORPUS_VECTORS_URI_KEY; every executor that builds fn_args mixes it
in (the local Executor here, components/trainer_replicas' ReplicaExecutor, which the TFJob's
and Vertex AI's replicas run).
"""

from __future__ import annotations

from tfx.components.trainer import executor as trainer_executor
from tfx.components.trainer import fn_args_utils

from components.executor_types import Artifacts
from components.executor_types import ExecProperties as Props

# The input channel (the CorpusEncoder's output) and the custom_config key the run_fn reads.
CORPUS_VECTORS_KEY = "corpus_vectors"
CORPUS_VECTORS_URI_KEY = "corpus_vectors_uri"


def corpus_vectors_uri(input_dict: Artifacts) -> str | None:
    """The corpus vectors' URI among the Trainer's inputs, None when it is not wired."""
    artifacts = input_dict.get(CORPUS_VECTORS_KEY) or []
    if len(artifacts) > 1:
        raise ValueError(
            f"Trainer input {CORPUS_VECTORS_KEY!r}: one artifact expected, got {len(artifacts)} "
            "(wire one CorpusEncoder output)"
        )
    return artifacts[0].uri if artifacts else None


class CorpusVectorsFnArgs(trainer_executor.GenericExecutor):
    """GenericExecutor whose fn_args carry the corpus vectors' URI (module docstring); without
    the input, custom_config is TFX's as it was."""

    def _GetFnArgs(
        self, input_dict: Artifacts, output_dict: Artifacts, exec_properties: Props
    ) -> fn_args_utils.FnArgs:
        fn_args = super()._GetFnArgs(input_dict, output_dict, exec_properties)
        uri = corpus_vectors_uri(input_dict)
        if uri is not None:
            fn_args.custom_config = {**(fn_args.custom_config or {}), CORPUS_VECTORS_URI_KEY: uri}
        return fn_args


class Executor(CorpusVectorsFnArgs):
    """The RankingTrainer's executor in one process (LocalDagRunner, a Kubeflow task)."""
