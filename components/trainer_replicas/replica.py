"""One replica of the Trainer: TFX's Trainer GenericExecutor under the TF_CONFIG the Kubeflow
Training Operator (or Vertex AI) set for this process.

    python -m components.trainer_replicas.replica --inputs JSON --outputs JSON \
        --exec-properties JSON

The arguments are those of tfx.scripts.run_executor (TFX's artifact JSON), the same for every
replica. The chief writes the outputs it was given; another replica writes beside them, into
`<output>.<task type>-<index>` scratch directories (whose parent is the chief's, so
trainer_module/checkpointing.py finds the same checkpoints for every replica). The run_fn
(trainer_module/run_fn.py) sees TF_CONFIG naming several tasks and trains with
MultiWorkerMirroredStrategy; only the chief exports the model it keeps and writes the run's
results.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from collections.abc import Sequence

from tfx.components.util import udf_utils
from tfx.types import artifact_utils

from components.executor_types import Artifacts
from components.executor_types import ExecProperties as Props
from components.ranking_trainer.executor import ExtraInputsFnArgs


def replica_role(environ: dict[str, str] | None = None) -> tuple[str, int, bool]:
    """(task type, index, is chief) from TF_CONFIG: the chief is task `chief`, or `worker` 0
    when the cluster has no chief (as trainer_module.training.is_chief decides); without
    TF_CONFIG, a lone chief."""
    raw = (os.environ if environ is None else environ).get("TF_CONFIG", "").strip()
    if not raw:
        return "chief", 0, True
    tf_config = json.loads(raw)
    task = tf_config.get("task") or {}
    kind, index = task.get("type") or "chief", int(task.get("index") or 0)
    has_chief = bool((tf_config.get("cluster") or {}).get("chief"))
    chief = kind == "chief" or (kind == "worker" and index == 0 and not has_chief)
    return kind, index, chief


def scratch_uri(uri: str, kind: str, index: int) -> str:
    """A non-chief replica's output beside the chief's `uri`."""
    return f"{uri.rstrip('/')}.{kind}-{index}"


class ReplicaExecutor(ExtraInputsFnArgs):
    """TFX's Trainer GenericExecutor for one replica of several (its fn_args with the corpus
    vectors' and the qrels' URIs, components/ranking_trainer/executor.py).

    The chief runs it unchanged. Another replica writes into scratch outputs and skips TFX's
    check that the model exists after run_fn: its export is a collective's scratch copy that
    run_fn deletes (only the chief's is kept), so that check can only hold on the chief."""

    def Do(self, input_dict: Artifacts, output_dict: Artifacts, exec_properties: Props) -> None:
        kind, index, chief = replica_role()
        if chief:
            return super().Do(input_dict, output_dict, exec_properties)
        for artifacts in output_dict.values():
            for artifact in artifacts:
                artifact.uri = scratch_uri(artifact.uri, kind, index)
        self._log_startup(input_dict, output_dict, exec_properties)
        fn_args = self._GetFnArgs(input_dict, output_dict, exec_properties)
        run_fn = udf_utils.get_fn(exec_properties, "run_fn")
        logging.info("replica %s-%d (not the chief): training", kind, index)
        run_fn(fn_args)
        return None


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--inputs", required=True)
    parser.add_argument("--outputs", required=True)
    parser.add_argument("--exec-properties", dest="exec_properties", required=True)
    args = parser.parse_args(list(sys.argv[1:] if argv is None else argv))
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s", force=True
    )
    kind, index, chief = replica_role()
    logging.info("Trainer replica %s-%d%s", kind, index, " (chief)" if chief else "")
    ReplicaExecutor().Do(
        artifact_utils.parse_artifact_dict(args.inputs),
        artifact_utils.parse_artifact_dict(args.outputs),
        json.loads(args.exec_properties),
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
