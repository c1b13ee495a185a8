"""Compiles the pipeline for Kubeflow Pipelines v2 and Vertex AI Pipelines.

`compile_pipeline(config, output, fmt)` writes either
- "yaml": a bare KFP `PipelineSpec` (schema 2.1.0), what the KFP UI's upload and the `kfp` client
  (`kfp pipeline create`, `kfp run create -f`) accept, and what `rankpipe submit`
  (pipelines/kfp_submit.py) starts a run of, the pipeline root sent with the run; or
- "vertex": a Vertex AI `PipelineJob` JSON (`pipelineSpec` + `runtimeConfig`) for
  `google.cloud.aiplatform.PipelineJob(template_path=...)`.

TFX 1.16's KubeflowV2DagRunner builds the spec (with `use_pipeline_spec_2_1`: the open-source
backend only fills `parameterValues`, which TFX's container entrypoint reads only with the
inputs-spec argument that schema 2.1 adds); this module then sets what TFX has no option for:
`defaultPipelineRoot`, per-component resources and display names (runner.kubeflow), and writes
the file itself with sorted keys, so the same config gives the same bytes. Every executor runs
`python -m pipelines.kfp_entrypoint` (our wrapper of TFX's kubeflow_v2_run_executor) in the
image built from deploy/Dockerfile, where the project lives at IMAGE_PROJECT_ROOT.

Nothing of the compiling machine may reach the spec: the schema file is the path inside the
image, and every path in the config must be a URI the cluster reads or a path inside the image
(a ConfigError names the key otherwise); a last scan of the written text checks it.

Run as a script (`python -m pipelines.kubeflow_runner`) it compiles $RANKPIPE_CONFIG with
$RANKPIPE_SET overrides (as local_runner.py reads them) to $RANKPIPE_SPEC. It is not a TFX CLI
DSL file: TFX 1.16's `tfx pipeline create --engine kubeflow` imports the removed v1 runner and
fails (docs/kubeflow.md, "Not the TFX CLI"), and the CLI's vertex engine replaces `runner.run`
and would skip everything this module adds.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import tempfile
from pathlib import Path
from typing import Any

import yaml
from google.protobuf import json_format
from kfp.pipeline_spec import pipeline_spec_pb2
from tfx import v1 as tfx

from components import worker_dirs
from pipelines import component_table
from pipelines.config import PATH_DEFAULTS, REPO_ROOT, KubeflowComponentConfig, PipelineConfig
from pipelines.pipeline import SCHEMA_FILE, create_pipeline
from rankcore.config_loader import ConfigError
from rankcore.file_io import write_text_atomic

CONFIG_ENV, OVERRIDES_ENV = "RANKPIPE_CONFIG", "RANKPIPE_SET"
FORMATS = ("yaml", "vertex")
# Where deploy/Dockerfile puts the project (its WORKDIR); tests check the two agree.
IMAGE_PROJECT_ROOT = "/rankpipe"
# The executors' container command: TFX's v2 entrypoint wrapped by ours (same argv).
ENTRYPOINT_COMMAND = ["python", "-m", "pipelines.kfp_entrypoint"]
# Where artifacts can live (runner.pipeline_root): the KFP launcher moves them between the object
# store and the pod (backend/src/v2/objectstore accepts these three); Vertex AI has gs:// only.
PIPELINE_ROOT_SCHEMES = ("gs://", "s3://", "minio://")
VERTEX_SCHEMES = ("gs://",)
# What the components open themselves (collection files, checkpoints, the push destination):
# TensorFlow's filesystems in the image, where tf.io.gfile has gs:// built in; s3:// and minio://
# would need tensorflow-io, which is not installed ("File system scheme 's3' not implemented").
COMPONENT_SCHEMES = ("gs://",)
# What the KFP UI shows for each component (its row in pipelines/component_table.py) with
# runner.kubeflow.display_names true, unless runner.kubeflow.components.<id>.display_name says
# otherwise. Off by default: KFP 2.0 to 2.5 resolve inputs by the name in taskInfo.name
# (pipelines/config.py KubeflowConfig).
DISPLAY_NAMES = component_table.DISPLAY_NAMES
# KFP's pipeline name rule (backend/src/apiserver/template/v2_template.go), anchored.
_PIPELINE_NAME = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


def image_path(local: Path) -> str:
    """The path inside the image of a file of this checkout."""
    return f"{IMAGE_PROJECT_ROOT}/{local.resolve().relative_to(REPO_ROOT).as_posix()}"


def _in_image(value: str) -> bool:
    return value.startswith(IMAGE_PROJECT_ROOT + "/")


def _leaves(value: Any, key: str):
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _leaves(v, f"{key}.{k}" if key else str(k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _leaves(v, f"{key}[{i}]")
    else:
        yield key, value


def check_cluster_paths(config: PipelineConfig, fmt: str = "yaml") -> None:
    """Fails, naming the key, on anything the cluster could not use: a path of this machine, or a
    storage scheme that the pipeline root or the components' own file access does not have."""
    where = "Vertex AI" if fmt == "vertex" else "Kubeflow"
    src = config.source
    name = config.runner.pipeline_name
    if not _PIPELINE_NAME.fullmatch(name):
        raise ConfigError(
            f"{src}: runner.pipeline_name: {name!r}: {where} needs lower-case letters, digits, "
            "'-' and '.', starting and ending with a letter or digit"
        )
    # Beam workers outside the pod would open the launcher's pod-local copies of StatisticsGen's
    # and the RankingEvaluator's input artifacts; both executors would refuse at run time
    # (components/worker_dirs.py), after RankingDataGen's work: refuse here instead.
    beam_args = config.runner.beam.extra_args
    if not worker_dirs.workers_see_local_disk(beam_args):
        raise ConfigError(
            f"{src}: runner.beam.extra_args: the Beam runner "
            f"{worker_dirs.describe_runner(beam_args)} runs workers outside the components' "
            f"pods, and on {where} StatisticsGen's and the RankingEvaluator's workers would "
            "read the launcher's local copies of their input artifacts in the pod; remove "
            "--runner to run Beam in each pod (docs/datagen.md, 'Distributed runners')"
        )
    # Written by the cluster, kept after the run: object storage only.
    for key, value, schemes in (
        (
            "runner.pipeline_root",
            config.runner.pipeline_root,
            VERTEX_SCHEMES if fmt == "vertex" else PIPELINE_ROOT_SCHEMES,
        ),
        ("pusher.destination", config.pusher.destination, COMPONENT_SCHEMES),
    ):
        if not value.startswith(schemes):
            raise ConfigError(
                f"{src}: {key}: {value!r} is not a URI the cluster can write; on {where} use "
                f"{', '.join(schemes)} (e.g. --set {key}={schemes[0]}BUCKET/...)"
            )
    # Read by the components: storage TensorFlow opens in the image, or a path inside the image.
    listed = ", ".join(COMPONENT_SCHEMES)
    data = {k: v for k, v in dataclasses.asdict(config).items() if k != "source"}
    for key, value in _leaves(data, ""):
        if key in ("runner.pipeline_root", "pusher.destination") or not isinstance(value, str):
            continue
        if "://" in value:
            if not value.startswith(COMPONENT_SCHEMES):
                raise ConfigError(
                    f"{src}: {key}: {value!r}: the components open {listed} URIs or paths "
                    f"inside the image ({IMAGE_PROJECT_ROOT}/...); TensorFlow in the image has "
                    "no other filesystem"
                )
        elif os.path.isabs(value) and not _in_image(value):
            raise ConfigError(
                f"{src}: {key}: {value!r} is a path on this machine, which the cluster cannot "
                f"read; on {where} use a {listed} URI or a path inside the image "
                f"({IMAGE_PROJECT_ROOT}/..., see deploy/README.md)"
            )


def _machine_paths() -> list[str]:
    """Paths of this machine that must not appear in a compiled spec."""
    paths = {str(REPO_ROOT), os.path.expanduser("~"), os.getcwd(), *PATH_DEFAULTS.values()}
    paths |= {os.environ.get(v, "") for v in PATH_DEFAULTS}
    return sorted(
        p.rstrip("/")
        for p in paths
        if os.path.isabs(p) and p.rstrip("/") and not _in_image(p + "/")
    )


def find_machine_paths(text: str) -> list[str]:
    """Paths of this machine (checkout, home, working directory, data and output roots) that
    occur in `text` as a path of their own (so gs://bucket/home/... is not one)."""
    found = []
    for path in _machine_paths():
        pattern = r"(?<![\w.:/-])" + re.escape(path) + r"(?![\w.-])"
        found += [m.group(0) for m in re.finditer(pattern, text)]
    return sorted(set(found))


def _resources(spec: KubeflowComponentConfig) -> dict | None:
    # The kfp SDK's own unit parsers (as PipelineTask.set_cpu_limit/set_memory_limit use): the
    # spec stores CPUs and memory (in GB) as numbers in kfp-pipeline-spec 0.2.
    from kfp.dsl.pipeline_task import PipelineTask

    resources: dict[str, Any] = {}
    if spec.cpu_limit is not None:
        resources["cpuLimit"] = PipelineTask._validate_cpu_request_limit(None, spec.cpu_limit)
    if spec.memory_limit is not None:
        resources["memoryLimit"] = PipelineTask._validate_memory_request_limit(
            None, spec.memory_limit
        )
    if spec.accelerator_type:
        resources["accelerator"] = {
            "type": spec.accelerator_type,
            "count": str(spec.accelerator_count or 1),
        }
    return resources or None


def _finish_spec(spec: dict, config: PipelineConfig) -> dict:
    """Sets what TFX's compiler has no option for; returns the spec, checked as a proto."""
    spec["defaultPipelineRoot"] = config.runner.pipeline_root
    executors = spec["deploymentSpec"]["executors"]
    tasks = spec["root"]["dag"]["tasks"]
    kubeflow = config.runner.kubeflow
    for component_id, task in tasks.items():
        # A fold branch's copy (Trainer_fold2) takes its component's settings (Trainer's).
        row = component_table.row_of(component_id)
        settings = kubeflow.components.get(row.id if row else component_id)
        settings = settings or KubeflowComponentConfig()
        if kubeflow.display_names:
            display = component_table.display_name(component_id, settings.display_name)
            task.setdefault("taskInfo", {})["name"] = display
        label = spec["components"][task["componentRef"]["name"]]["executorLabel"]
        container = executors[label].get("container")
        if container is None:
            continue
        if container.get("command") != ENTRYPOINT_COMMAND:
            raise AssertionError(f"{component_id}: unexpected command {container.get('command')}")
        resources = _resources(settings)
        if resources:
            container["resources"] = resources
    # A round trip through the proto: unknown or mistyped fields fail here, not on upload.
    parsed = json_format.ParseDict(spec, pipeline_spec_pb2.PipelineSpec())
    return json_format.MessageToDict(parsed)


def build_pipeline_job(config: PipelineConfig, fmt: str = "yaml") -> dict:
    """The compiled PipelineJob as a dict (its `pipelineSpec` is what the YAML holds)."""
    if fmt not in FORMATS:
        raise ConfigError(f"--format {fmt!r}: one of {', '.join(FORMATS)}")
    check_cluster_paths(config, fmt)
    pipeline = create_pipeline(
        config,
        schema_file=image_path(SCHEMA_FILE),
        # 0 workers stays 0: Beam then uses the pod's CPUs, not this machine's count.
        beam_pipeline_args=config.runner.beam.pipeline_args(resolve_workers=False),
    )
    runner = tfx.orchestration.experimental.KubeflowV2DagRunner(
        config=tfx.orchestration.experimental.KubeflowV2DagRunnerConfig(
            default_image=config.runner.image,
            default_commands=list(ENTRYPOINT_COMMAND),
            use_pipeline_spec_2_1=True,
        ),
        output_dir=tempfile.gettempdir(),  # unused: nothing is written (write_out=False)
    )
    job = runner.run(pipeline, write_out=False)
    job["pipelineSpec"] = _finish_spec(job["pipelineSpec"], config)
    return job


def render(job: dict, fmt: str, config_name: str) -> str:
    """The file's text: deterministic (sorted keys, nothing time- or machine-dependent)."""
    if fmt == "vertex":
        return json.dumps(job, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
    spec = job["pipelineSpec"]
    header = (
        "# PIPELINE DEFINITION\n"
        f"# Name: {spec['pipelineInfo']['name']}\n"
        f"# Compiled by `rankpipe compile` from {config_name} ({spec['sdkVersion']}, "
        f"pipeline spec schema {spec['schemaVersion']}).\n"
    )
    return header + yaml.safe_dump(spec, sort_keys=True, allow_unicode=True, width=100)


def compile_pipeline(config: PipelineConfig, output_file: str, fmt: str = "yaml") -> str:
    """Writes the compiled pipeline (see the module docstring) to output_file."""
    job = build_pipeline_job(config, fmt)
    text = render(job, fmt, os.path.basename(config.source))
    leaked = find_machine_paths(text)
    if leaked:
        raise ConfigError(
            f"{config.source}: the compiled spec would contain paths of this machine "
            f"({', '.join(leaked)}); set the config keys holding them to cluster URIs"
        )
    write_text_atomic(output_file, text)
    return output_file


if __name__ == "__main__":
    from pipelines.config import load_config

    _config = load_config(
        os.environ.get(CONFIG_ENV, "cranfield"),
        os.environ.get(OVERRIDES_ENV, "").split(),
        check_inputs=False,
    )
    compile_pipeline(
        _config, os.environ.get("RANKPIPE_SPEC", f"{_config.runner.pipeline_name}.yaml")
    )
