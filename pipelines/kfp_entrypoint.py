"""The executors' container entrypoint on Kubeflow Pipelines v2 (and Vertex AI Pipelines).

    python -m pipelines.kfp_entrypoint --executor_class_path M.C \
        --json_serialized_invocation_args '<ExecutorInput JSON>' \
        [--json_serialized_inputs_spec_args '<ComponentInputsSpec JSON>'] [beam args...]

The arguments are those of TFX 1.16's own entrypoint
(tfx/orchestration/kubeflow/v2/container/kubeflow_v2_run_executor.py), which this module calls
after fixing what that entrypoint cannot handle on the open-source KFP v2 backend
(kubeflow/pipelines backend/src/v2, read at 7b70c7b; the same in 2.14 - 2.17):

1. Custom artifact types. TFX resolves an artifact class from its type's schema title, using the
   title as a Python import path for anything outside its own table
   (kubeflow_v2_entrypoint_utils._retrieve_class_path), so `rankpipe.Qrels` fails with "No module
   named 'rankpipe'" and `system.HTML` with "No module named 'system'". `register_artifact_types`
   adds our titles to that table (compiler_utils.TITLE_TO_CLASS_PATH).
2. Empty input types. The driver rebuilds input artifacts from MLMD with an empty instance
   schema (backend/src/v2/metadata/client.go, "TODO(Bobgy): figure out how to get schema";
   tensorflow/tfx#7768), and TFX then fails on `yaml.safe_load("").get`. `restore_input_types`
   copies each input's type from the --json_serialized_inputs_spec_args the compiler emits with
   schema 2.1.
3. Object-store URIs. Output URIs are `<pipeline root>/<task>/<salt>/<key>` under `minio://`,
   `s3://` or `gs://`; TensorFlow here has no minio/s3 filesystem ("File system scheme 'minio'
   not implemented"). The launcher downloads inputs to, and uploads outputs from, local paths
   `/minio/...`, `/s3/...`, `/gcs/...` (LocalPathForURI in backend/src/v2/component/
   launcher_v2.go), so the executor reads and writes those paths and the ExecutorOutput gives the
   original URIs back (the launcher copies a non-empty `uri` from it onto the artifact it records,
   mergeRuntimeArtifacts). `$RANKPIPE_KFP_LOCAL_ROOT` rebases the local paths (tests only).
4. Directory outputs the launcher can move. Written to a local directory, outputs reach the
   object store through the launcher's Go upload, which writes one object per file and no
   zero-byte directory markers, the markers that TF's GCS filesystem leaves and that break the
   launcher's download of directory artifacts such as `Format-Serving/`
   (kubeflow/pipelines#13476). Output directories are created before the executor runs (as
   TFX's LocalDagRunner does; an object store needs none, a local path does), and an input
   directory artifact that uploaded no file (an empty directory) is re-created empty.
5. The launcher's own output. Since KFP 2.14 the driver adds an `executor-logs` output (type
   title `system.Artifact`, backend/src/v2/driver/driver.go provisionOutputs) that the launcher
   writes itself; TFX would try to import `system.Artifact`. It is hidden from TFX.
6. Beam's worker count. The compiled spec carries `--direct_num_workers=0` (the compiling
   machine's CPU count must not reach it), and Beam's DirectRunner would turn 0 into
   `multiprocessing.cpu_count()`: the node's cores, not the pod's CPU limit, that many worker
   processes importing TensorFlow under the pod's memory limit. `resolve_beam_workers` replaces
   0 with pipelines/cpus.py available_cpus() (the cgroup CPU quota), here in the pod.
7. Pipeline parameters. TFX's compiler gives a task a RuntimeParameter only as a whole exec
   property, while the values a user changes per run (steps, learning rate, push destination)
   sit inside the Trainer's train_args and custom_config and the Pusher's PushDestination.
   pipelines/kubeflow_runner.py adds them as inputs `rankpipe_param_<name>`;
   `apply_pipeline_parameters` writes each value into the exec properties it stands for.

What the TFX entrypoint already does right is left to it: parameters from `parameterValues`
when the inputs spec is given (schema 2.1), the executor context, the ExecutorOutput format.
"""

from __future__ import annotations

import time

_STARTED = time.monotonic()  # before the heavy imports: the timing line below reports them

import argparse  # noqa: E402
import json  # noqa: E402
import logging  # noqa: E402
import os  # noqa: E402
import sys  # noqa: E402
from collections.abc import Callable, Sequence  # noqa: E402
from typing import Any  # noqa: E402

from google.protobuf import json_format  # noqa: E402
from kfp.pipeline_spec import pipeline_spec_pb2  # noqa: E402

# Schema title -> class path of rankpipe's artifact types, from the rows of the components that
# introduce them (tests/pipelines/test_kfp_entrypoint.py checks that every path imports to a
# class of that TYPE_NAME). The table imports no TFX: this runs before TFX's imports.
from pipelines.component_table import ARTIFACT_TYPES  # noqa: E402

# backend/src/v2/component/launcher_v2.go LocalPathForURI: scheme -> local mount directory.
LOCAL_MOUNTS = {"gs://": "gcs", "minio://": "minio", "s3://": "s3"}
LOCAL_ROOT_ENV = "RANKPIPE_KFP_LOCAL_ROOT"
# The launcher-managed log output (backend/src/v2/driver/driver.go provisionOutputs).
LAUNCHER_OUTPUTS = ("executor-logs",)


class EntrypointError(ValueError):
    """A problem with the ExecutorInput or inputs spec this entrypoint was given."""


def local_root() -> str:
    return os.environ.get(LOCAL_ROOT_ENV, "/")


def local_path_for_uri(uri: str, root: str | None = None) -> str | None:
    """The launcher's local path for an object-store URI; None for any other URI (left as is)."""
    for scheme, mount in LOCAL_MOUNTS.items():
        if uri.startswith(scheme):
            return os.path.join(root or local_root(), mount, uri[len(scheme) :])
    return None


def register_artifact_types() -> None:
    """Adds rankpipe's schema titles to TFX's title -> class path table (fix 1)."""
    from tfx.orchestration.kubeflow.v2 import compiler_utils

    compiler_utils.TITLE_TO_CLASS_PATH.update(ARTIFACT_TYPES)


def _type_is_empty(artifact_type: pipeline_spec_pb2.ArtifactTypeSchema) -> bool:
    kind = artifact_type.WhichOneof("kind")
    return kind is None or not getattr(artifact_type, kind).strip()


def restore_input_types(
    executor_input: pipeline_spec_pb2.ExecutorInput,
    inputs_spec: pipeline_spec_pb2.ComponentInputsSpec | None,
) -> list[str]:
    """Gives every input artifact with an empty type the type its input definition declares
    (fix 2); returns the keys it restored."""
    restored = []
    for key, artifact_list in executor_input.inputs.artifacts.items():
        for artifact in artifact_list.artifacts:
            if not _type_is_empty(artifact.type):
                continue
            spec = inputs_spec.artifacts.get(key) if inputs_spec is not None else None
            if spec is None:
                raise EntrypointError(
                    f"input artifact {key!r} ({artifact.uri}) has no type and "
                    + (
                        "--json_serialized_inputs_spec_args declares no such input"
                        if inputs_spec is not None
                        else "no --json_serialized_inputs_spec_args was given to restore it "
                        "from (compile with KubeflowV2DagRunnerConfig(use_pipeline_spec_2_1="
                        "True))"
                    )
                )
            artifact.type.CopyFrom(spec.artifact_type)
            restored.append(key)
    return restored


def _is_value_artifact(artifact: pipeline_spec_pb2.RuntimeArtifact) -> bool:
    """Whether the artifact is a file at its URI (a TFX ValueArtifact) rather than a directory."""
    from tfx.orchestration.kubeflow.v2.container import kubeflow_v2_entrypoint_utils as utils
    from tfx.types import value_artifact
    from tfx.utils import import_utils

    cls = import_utils.import_class_by_path(utils._retrieve_class_path(artifact.type))
    return issubclass(cls, value_artifact.ValueArtifact)


def localize_uris(executor_input: pipeline_spec_pb2.ExecutorInput) -> dict[str, str]:
    """Rewrites object-store URIs of inputs and outputs to the launcher's local paths, creates
    output directories (fix 3, 4); returns local path -> original URI for the outputs."""
    for key, artifact_list in executor_input.inputs.artifacts.items():
        for artifact in artifact_list.artifacts:
            local = local_path_for_uri(artifact.uri)
            if local is None:
                continue
            if not os.path.exists(local) and not _is_value_artifact(artifact):
                # Object stores hold no empty directories: the launcher downloaded no file.
                logging.warning("input %r: %s has no file; using an empty directory", key, local)
                os.makedirs(local, exist_ok=True)
            artifact.uri = local
    original = {}
    for _, artifact_list in executor_input.outputs.artifacts.items():
        for artifact in artifact_list.artifacts:
            local = local_path_for_uri(artifact.uri)
            if local is None:
                continue
            original[local] = artifact.uri
            # LocalDagRunner's outputs_utils.make_output_dirs does the same before an executor.
            os.makedirs(
                os.path.dirname(local) if _is_value_artifact(artifact) else local, exist_ok=True
            )
            artifact.uri = local
    return original


def restore_output_uris(output_file: str, original: dict[str, str]) -> None:
    """Puts the object-store URIs back into the ExecutorOutput TFX wrote (fix 3)."""
    if not original or not os.path.exists(output_file):
        return
    with open(output_file) as f:
        executor_output = json_format.Parse(f.read(), pipeline_spec_pb2.ExecutorOutput())
    for key, artifact_list in executor_output.artifacts.items():
        for artifact in artifact_list.artifacts:
            if artifact.uri in original:
                artifact.uri = original[artifact.uri]
            elif local_path_for_uri(artifact.uri) is None and artifact.uri.startswith("/"):
                raise EntrypointError(
                    f"{output_file}: output {key!r} has the local path {artifact.uri}, which the "
                    "launcher would record as the artifact's URI"
                )
    tmp = f"{output_file}.tmp-{os.getpid()}"
    with open(tmp, "w") as f:
        f.write(json_format.MessageToJson(executor_output))
    os.replace(tmp, output_file)


def resolve_beam_workers(beam_args: Sequence[str], cpus: int | None = None) -> list[str]:
    """The Beam args with `--direct_num_workers=0` (or `--direct_num_workers 0`) replaced by
    `cpus`, default available_cpus() of this pod (fix 6); other values are kept."""
    from pipelines.cpus import available_cpus

    out = list(beam_args)
    for i, arg in enumerate(out):
        if arg == "--direct_num_workers" and i + 1 < len(out) and out[i + 1].strip() == "0":
            out[i + 1] = str(cpus or available_cpus())
        elif arg.startswith("--direct_num_workers=") and arg.split("=", 1)[1].strip() == "0":
            out[i] = f"--direct_num_workers={cpus or available_cpus()}"
    return out


# Task inputs that carry pipeline parameters (pipelines/kubeflow_runner.py PIPELINE_PARAMETERS):
# `rankpipe_param_<name>`, folded into the exec properties they stand for before TFX runs.
PARAMETER_PREFIX = "rankpipe_param_"


def _edit_json(values: Any, key: str, edit: Callable[[dict], None]) -> None:
    """Applies `edit` to the JSON object in string parameter `key`, when the task has it."""
    if key not in values:
        return
    data = json.loads(values[key].string_value or "{}")
    edit(data)
    values[key].string_value = json.dumps(data, sort_keys=True)


def apply_pipeline_parameters(
    executor_input: pipeline_spec_pb2.ExecutorInput,
    inputs_spec: pipeline_spec_pb2.ComponentInputsSpec | None = None,
) -> dict[str, Any]:
    """Fix 7: puts the run's pipeline parameters where the executors read them and removes
    their `rankpipe_param_*` inputs (from the inputs spec too); returns name -> value.

    - train_steps: the Trainer's train_args.num_steps and custom_config trainer.train_steps;
    - learning_rate: custom_config trainer.learning_rate;
    - push_destination: the RankingEvaluator's push_destination (where it finds its baseline)
      and the Pusher's push_destination.filesystem.base_directory;
    and each in the Pusher's model card config (the config it records)."""
    values = executor_input.inputs.parameter_values
    given = {}
    for key in sorted(k for k in values if k.startswith(PARAMETER_PREFIX)):
        value = json_format.MessageToDict(values[key])
        given[key[len(PARAMETER_PREFIX) :]] = value
        del values[key]
        if inputs_spec is not None and key in inputs_spec.parameters:
            del inputs_spec.parameters[key]
    if "train_steps" in given:
        steps = int(given["train_steps"])
        given["train_steps"] = steps
        _edit_json(values, "train_args", lambda d: d.__setitem__("num_steps", steps))
        _edit_json(
            values, "custom_config", lambda d: d.setdefault("trainer", {}).update(train_steps=steps)
        )
        _edit_json(
            values,
            "model_card_config",
            lambda d: d.setdefault("trainer", {}).update(train_steps=steps),
        )
    if "learning_rate" in given:
        rate = float(given["learning_rate"])
        given["learning_rate"] = rate
        for key in ("custom_config", "model_card_config"):
            _edit_json(
                values, key, lambda d: d.setdefault("trainer", {}).update(learning_rate=rate)
            )
    if "push_destination" in given:
        destination = str(given["push_destination"])
        if "push_destination" in values:
            current = values["push_destination"].string_value
            if current.lstrip().startswith("{"):  # the Pusher's PushDestination proto as JSON
                _edit_json(
                    values,
                    "push_destination",
                    lambda d: d.setdefault("filesystem", {}).update(base_directory=destination),
                )
            else:  # the RankingEvaluator's plain string
                values["push_destination"].string_value = destination
        _edit_json(
            values,
            "model_card_config",
            lambda d: d.setdefault("pusher", {}).update(destination=destination),
        )
    return given


def prepare(
    args: argparse.Namespace,
) -> tuple[pipeline_spec_pb2.ExecutorInput, dict[str, str]]:
    """Applies fixes 1-5 and 7 to the parsed arguments in place; returns the rewritten ExecutorInput
    and the output local path -> URI map."""
    register_artifact_types()
    executor_input = json_format.Parse(
        args.json_serialized_invocation_args,
        pipeline_spec_pb2.ExecutorInput(),
        ignore_unknown_fields=True,
    )
    inputs_spec = None
    if getattr(args, "json_serialized_inputs_spec_args", None):
        inputs_spec = json_format.Parse(
            args.json_serialized_inputs_spec_args,
            pipeline_spec_pb2.ComponentInputsSpec(),
            ignore_unknown_fields=True,
        )
    parameters = apply_pipeline_parameters(executor_input, inputs_spec)
    if parameters:
        logging.info("pipeline parameters of this run: %s", parameters)
        if inputs_spec is not None:
            args.json_serialized_inputs_spec_args = json_format.MessageToJson(inputs_spec)
    restored = restore_input_types(executor_input, inputs_spec)
    if restored:
        logging.info("restored the types of inputs %s from the inputs spec", sorted(restored))
    for key in LAUNCHER_OUTPUTS:
        if key in executor_input.outputs.artifacts:
            del executor_input.outputs.artifacts[key]
    original = localize_uris(executor_input)
    args.json_serialized_invocation_args = json_format.MessageToJson(executor_input)
    return executor_input, original


def main(argv: Sequence[str] | None = None) -> int:
    from tfx.orchestration.kubeflow.v2.container import kubeflow_v2_run_executor
    from tfx.utils import import_utils

    # Timestamps on every line of the task's log (TFX's imports leave a bare default format).
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s", force=True
    )
    imported = time.monotonic()
    args, beam_args = kubeflow_v2_run_executor._parse_flags(
        list(sys.argv[1:] if argv is None else argv)
    )
    executor_input, original = prepare(args)
    resolved = resolve_beam_workers(beam_args)
    if resolved != beam_args:
        logging.info("Beam: --direct_num_workers=0 resolved to this pod's CPUs: %s", resolved)
        beam_args = resolved
    import_utils.import_class_by_path(args.executor_class_path)  # timed apart from the run
    ready = time.monotonic()
    kubeflow_v2_run_executor.main((args, beam_args))
    restore_output_uris(executor_input.outputs.output_file, original)
    done = time.monotonic()
    # One line for tests/benchmarks/bench_kfp.py: where a task's time goes.
    logging.info(
        "rankpipe entrypoint timing: imports %.2fs, executor import %.2fs, executor %.2fs",
        imported - _STARTED,
        ready - imported,
        done - ready,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
