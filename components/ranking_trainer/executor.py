"""The Trainer's executors hand the run_fn the corpus vectors' and the judgments' URIs.

TFX's Trainer passes the run_fn its standard inputs only (fn_args_utils.get_common_fn_args:
examples, transform graph, schema, ...): an extra input channel reaches the executor's
input_dict but not the run_fn. `ExtraInputsFnArgs._GetFnArgs` adds each extra artifact's URI
to fn_args.custom_config (`extra_uris`: CORPUS_VECTORS_URI_KEY, QRELS_URI_KEY); every executor
that builds fn_args mixes it in (the local Executor here, components/trainer_replicas'
ReplicaExecutor, which the TFJob's and Vertex AI's replicas run, and the RankingTuner's).
"""

from __future__ import annotations

from tfx.components.trainer import executor as trainer_executor
from tfx.components.trainer import fn_args_utils

from components.executor_types import Artifacts
from components.executor_types import ExecProperties as Props
from components.process_memory import released_after

# The input channel (the CorpusEncoder's output) and the custom_config key the run_fn reads.
CORPUS_VECTORS_KEY = "corpus_vectors"
CORPUS_VECTORS_URI_KEY = "corpus_vectors_uri"
# RankingDataGen's qrels: the run_fn reads its dev splits' judgments there (the per-split files,
# rankcore/folds.py split_qrels_file), never another split's.
QRELS_KEY = "qrels"
QRELS_URI_KEY = "qrels_uri"
# Input channel -> the custom_config key its URI goes under, and what to wire when two are.
_EXTRA = {
    CORPUS_VECTORS_KEY: (CORPUS_VECTORS_URI_KEY, "one CorpusEncoder output"),
    QRELS_KEY: (QRELS_URI_KEY, "RankingDataGen's qrels output"),
}


def _single_uri(input_dict: Artifacts, key: str) -> str | None:
    artifacts = input_dict.get(key) or []
    if len(artifacts) > 1:
        raise ValueError(
            f"Trainer input {key!r}: one artifact expected, got {len(artifacts)} "
            f"(wire {_EXTRA[key][1]})"
        )
    return artifacts[0].uri if artifacts else None


def corpus_vectors_uri(input_dict: Artifacts) -> str | None:
    """The corpus vectors' URI among the Trainer's inputs, None when it is not wired."""
    return _single_uri(input_dict, CORPUS_VECTORS_KEY)


def extra_uris(input_dict: Artifacts) -> dict[str, str]:
    """custom_config key -> URI of each extra input that is wired (corpus vectors, qrels)."""
    found = {config_key: _single_uri(input_dict, key) for key, (config_key, _) in _EXTRA.items()}
    return {k: uri for k, uri in found.items() if uri is not None}


class ExtraInputsFnArgs(trainer_executor.GenericExecutor):
    """GenericExecutor whose fn_args carry the extra inputs' URIs (module docstring); without
    them, custom_config is TFX's as it was."""

    def _GetFnArgs(
        self, input_dict: Artifacts, output_dict: Artifacts, exec_properties: Props
    ) -> fn_args_utils.FnArgs:
        fn_args = super()._GetFnArgs(input_dict, output_dict, exec_properties)
        uris = extra_uris(input_dict)
        if uris:
            fn_args.custom_config = {**(fn_args.custom_config or {}), **uris}
        return fn_args


class Executor(ExtraInputsFnArgs):
    """The RankingTrainer's executor in one process (LocalDagRunner, a Kubeflow task); what
    the run_fn built is handed back when it ends (components/process_memory.py)."""

    @released_after
    def Do(self, input_dict: Artifacts, output_dict: Artifacts, exec_properties: Props) -> None:
        super().Do(input_dict, output_dict, exec_properties)
