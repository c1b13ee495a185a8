"""Compiles the pipeline for Kubeflow Pipelines v2 and Vertex AI Pipelines.

`compile_pipeline(config, output, fmt)` writes either
- "yaml": a bare KFP `PipelineSpec` (schema 2.1.0), what the KFP UI's upload and the `kfp` client
  (`kfp pipeline create`, `kfp run create -f`) accept, and what `rankpipe submit`
  (pipelines/kfp_submit.py) starts a run of, the pipeline root sent with the run; or
- "vertex": a Vertex AI `PipelineJob` JSON (`pipelineSpec` + `runtimeConfig`) for
  `google.cloud.aiplatform.PipelineJob(template_path=...)`.

TFX 1.16's KubeflowV2DagRunner builds the spec (with `use_pipeline_spec_2_1`: the open-source
backend only fills `parameterValues`, which TFX's container entrypoint reads only with the
inputs-spec argument that schema 2.1 adds), with the image's source tag (pipelines/image_tag.py)
and the pipeline parameters (PIPELINE_PARAMETERS, TFX RuntimeParameters); then
pipelines/kubeflow_spec.py sets what TFX has no option for: `defaultPipelineRoot`; per
component (runner.kubeflow.defaults and .components) resources (requests and limits), env, the
retryPolicy, display names, and the Kubernetes platform spec (node selector, tolerations,
secrets; kfp-kubernetes' KubernetesExecutorConfig, the YAML's second document); the defaults of
the pipeline parameters. This module writes the file itself with sorted keys, so the same config
gives the same bytes. Every executor runs `python -m pipelines.kfp_entrypoint` (our wrapper of
TFX's kubeflow_v2_run_executor) in the image built from deploy/Dockerfile, where the project
lives at IMAGE_PROJECT_ROOT.

Nothing of the compiling machine may reach the spec: the schema file is the path inside the
image, and every path in the config must be a URI the cluster reads or a path inside the image
(a ConfigError names the key otherwise); a last scan of the written text checks it.

Run as a script (`python -m pipelines.kubeflow_runner`) it compiles $RANKPIPE_CONFIG with
$RANKPIPE_SET overrides (as local_runner.py reads them) to $RANKPIPE_SPEC ($RANKPIPE_FORMAT).
It is also the DSL file of TFX's CLI with `--engine vertex`: `tfx pipeline create|update`
wraps KubeflowV2DagRunner.run and sets where it keeps pipeline.json on the runner; `main()`
sees that and writes the Vertex AI PipelineJob there, the bytes `rankpipe compile --format
vertex` writes (docs/kubeflow.md, "The TFX CLI"). TFX 1.16's `--engine kubeflow` imports the
removed v1 runner and fails.
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
from tfx import v1 as tfx

from components import worker_dirs
from pipelines import component_table, image_tag
from pipelines.config import PATH_DEFAULTS, REPO_ROOT, PipelineConfig
from pipelines.kfp_entrypoint import PARAMETER_PREFIX
from pipelines.kubeflow_spec import finish_spec, trainer_totals
from pipelines.pipeline import SCHEMA_FILE, create_pipeline
from rankcore.config_loader import ConfigError
from rankcore.file_io import write_text_atomic

CONFIG_ENV, OVERRIDES_ENV = "RANKPIPE_CONFIG", "RANKPIPE_SET"
SPEC_ENV, FORMAT_ENV = "RANKPIPE_SPEC", "RANKPIPE_FORMAT"
# The job dict's key for the platform spec (kfp-kubernetes settings): the YAML's 2nd document.
PLATFORM_SPEC_KEY = "platformSpec"
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


@dataclasses.dataclass(frozen=True)
class PipelineParameter:
    """A value a user changes per run without recompiling: a root input parameter of the spec
    (default: the config's value at config_key), given to the tasks of `components`."""

    name: str
    ptype: type
    config_key: str
    components: tuple[str, ...]


# Set per run with the KFP UI's run form, kfp.Client(...).create_run_from_pipeline_package(
# arguments=...), `rankpipe submit --param NAME=VALUE`, Vertex AI's parameter_values or
# `tfx run create --runtime_parameter NAME=VALUE`. pipelines/kfp_entrypoint.py
# (apply_pipeline_parameters) puts each value where the executors read it.
PIPELINE_PARAMETERS = (
    PipelineParameter("train_steps", int, "trainer.train_steps", ("Tuner", "Trainer")),
    PipelineParameter("learning_rate", float, "trainer.learning_rate", ("Tuner", "Trainer")),
    PipelineParameter(
        "push_destination", str, "pusher.destination", ("RankingEvaluator", "Pusher")
    ),
)
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


def _config_leaves(config: PipelineConfig):
    """(dotted key, value) of every leaf of the config's keys (lists indexed: `a.b[0]`)."""
    yield from _leaves({k: v for k, v in dataclasses.asdict(config).items() if k != "source"}, "")


def check_cluster_paths(config: PipelineConfig, fmt: str = "yaml") -> None:
    """Fails on anything the cluster could not use: a path of this machine, or a storage scheme
    that the pipeline root or the components' own file access does not have. One ConfigError
    names every such key, a line each, so a config is mended in one go, not one key a try."""
    problems = _cluster_path_problems(config, fmt)
    if problems:
        raise ConfigError("\n".join(problems))


def _cluster_path_problems(config: PipelineConfig, fmt: str = "yaml") -> list[str]:
    """check_cluster_paths' problems, one line each naming the config file and the key."""
    where = "Vertex AI" if fmt == "vertex" else "Kubeflow"
    src = config.source
    problems = []
    name = config.runner.pipeline_name
    if not _PIPELINE_NAME.fullmatch(name):
        problems.append(
            f"{src}: runner.pipeline_name: {name!r}: {where} needs lower-case letters, digits, "
            "'-' and '.', starting and ending with a letter or digit"
        )
    # Beam workers outside the pod would open the launcher's pod-local copies of StatisticsGen's
    # and the RankingEvaluator's input artifacts; both executors would refuse at run time
    # (components/worker_dirs.py), after RankingDataGen's work: refuse here instead.
    beam_args = config.runner.beam.extra_args
    if not worker_dirs.workers_see_local_disk(beam_args):
        problems.append(
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
            problems.append(
                f"{src}: {key}: {value!r} is not a URI the cluster can write; on {where} use "
                f"{', '.join(schemes)} (e.g. --set {key}={schemes[0]}BUCKET/...)"
            )
    return problems + _read_path_problems(config, where)


def _read_path_problems(config: PipelineConfig, where: str) -> list[str]:
    """The values the components read that the cluster cannot: storage TensorFlow opens in the
    image, or a path inside the image, is what they can."""
    src, listed = config.source, ", ".join(COMPONENT_SCHEMES)
    problems = []
    for key, value in _config_leaves(config):
        if key in ("runner.pipeline_root", "pusher.destination") or not isinstance(value, str):
            continue
        if key.startswith("runner.kubeflow."):
            continue  # paths inside the pod (secret mounts, env values), not files we read
        if "://" in value:
            if not value.startswith(COMPONENT_SCHEMES):
                problems.append(
                    f"{src}: {key}: {value!r}: the components open {listed} URIs or paths "
                    f"inside the image ({IMAGE_PROJECT_ROOT}/...); TensorFlow in the image has "
                    "no other filesystem"
                )
        elif os.path.isabs(value) and not _in_image(value):
            problems.append(
                f"{src}: {key}: {value!r} is a path on this machine, which the cluster cannot "
                f"read; on {where} use a {listed} URI or a path inside the image "
                f"({IMAGE_PROJECT_ROOT}/..., see deploy/README.md)"
            )
    return problems


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


def _with_parameters(pipeline: Any, config: PipelineConfig) -> dict[str, Any]:
    """Adds the pipeline parameters (PIPELINE_PARAMETERS) to the components that read them, as
    TFX RuntimeParameters (the v2 compiler makes each a root input parameter and the task's
    input `rankpipe_param_<name>`, which pipelines/kfp_entrypoint.py folds into the exec
    properties it stands for); returns name -> default, the config's value."""
    defaults = {}
    for parameter in PIPELINE_PARAMETERS:
        value = config
        for part in parameter.config_key.split("."):
            value = getattr(value, part)
        defaults[parameter.name] = parameter.ptype(value)
        runtime = tfx.dsl.experimental.RuntimeParameter(
            name=parameter.name, ptype=parameter.ptype, default=defaults[parameter.name]
        )
        for component in pipeline.components:
            row = component_table.row_of(component.id)
            if (row.id if row else component.id) in parameter.components:
                component.exec_properties[PARAMETER_PREFIX + parameter.name] = runtime
    return defaults


def _new_runner(config: PipelineConfig) -> Any:
    return tfx.orchestration.experimental.KubeflowV2DagRunner(
        config=tfx.orchestration.experimental.KubeflowV2DagRunnerConfig(
            default_image=image_with_tag(config),
            default_commands=list(ENTRYPOINT_COMMAND),
            use_pipeline_spec_2_1=True,
        ),
        # Nothing is written there (write_out=False); the TFX CLI's vertex engine replaces it
        # with where it keeps pipeline.json (tfx_cli_output below).
        output_dir=_NOT_THE_CLI,
    )


_NOT_THE_CLI = os.path.join(tempfile.gettempdir(), "rankpipe-kubeflow-runner-unused")


def image_with_tag(config: PipelineConfig) -> str:
    """runner.image, with the source tag `make image` builds appended when it names no tag or
    digest (pipelines/image_tag.py)."""
    return image_tag.with_tag(config.runner.image)


def _compile(config: PipelineConfig, fmt: str) -> tuple[dict, Any]:
    if fmt not in FORMATS:
        raise ConfigError(f"--format {fmt!r}: one of {', '.join(FORMATS)}")
    check_cluster_paths(config, fmt)
    pipeline = create_pipeline(
        config,
        schema_file=image_path(SCHEMA_FILE),
        # 0 workers stays 0: Beam then uses the pod's CPUs, not this machine's count.
        beam_pipeline_args=config.runner.beam.pipeline_args(resolve_workers=False),
        kubeflow=True,  # runner.kubeflow.trainer_replicas picks the Trainer's class
    )
    defaults = _with_parameters(pipeline, config)
    runner = _new_runner(config)
    # parameter_values: the defaults also go to the PipelineJob's runtimeConfig (Vertex AI).
    job = runner.run(pipeline, parameter_values=defaults, write_out=False)
    job["pipelineSpec"], platform = finish_spec(
        job["pipelineSpec"], config, ENTRYPOINT_COMMAND, fmt, defaults
    )
    if platform:
        job[PLATFORM_SPEC_KEY] = platform
    return job, runner


def build_pipeline_job(config: PipelineConfig, fmt: str = "yaml") -> dict:
    """The compiled PipelineJob as a dict (its `pipelineSpec` is what the YAML holds; with
    Kubernetes options, PLATFORM_SPEC_KEY holds the platform spec, the YAML's second
    document)."""
    return _compile(config, fmt)[0]


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
    parameters = spec["root"].get("inputDefinitions", {}).get("parameters", {})
    if parameters:
        shown = []
        for name in sorted(parameters):
            value = parameters[name].get("defaultValue")
            if parameters[name].get("parameterType") == "NUMBER_INTEGER":
                value = int(value)
            shown.append(f"{name}={json.dumps(value)}")
        header += f"# Parameters (defaults; set per run): {', '.join(shown)}\n"
    totals = trainer_totals(spec)
    if totals:
        header += f"# {totals}.\n"
    documents = [spec]
    if job.get(PLATFORM_SPEC_KEY):
        # As kfp's compiler writes it (pipeline_spec_builder.write_pipeline_spec_to_file): the
        # platform spec is a second YAML document, which kfp.Client and the loader read.
        documents.append(job[PLATFORM_SPEC_KEY])
    return header + yaml.safe_dump_all(documents, sort_keys=True, allow_unicode=True, width=100)


def compile_pipeline(config: PipelineConfig, output_file: str, fmt: str = "yaml") -> str:
    """Writes the compiled pipeline (see the module docstring) to output_file."""
    return _write(config, build_pipeline_job(config, fmt), output_file, fmt)


def _write(config: PipelineConfig, job: dict, output_file: str, fmt: str) -> str:
    text = render(job, fmt, os.path.basename(config.source))
    leaked = find_machine_paths(text)
    if leaked:
        raise ConfigError(
            f"{config.source}: the compiled spec would contain paths of this machine "
            f"({', '.join(leaked)}); set the config keys holding them to cluster URIs"
        )
    write_text_atomic(output_file, text)
    return output_file


def under_tfx_cli() -> bool:
    """Whether the TFX CLI runs this file (`tfx pipeline create|update|compile --engine
    vertex`): its KubeflowV2DagRunnerPatcher has wrapped KubeflowV2DagRunner.run
    (tfx/tools/cli/handler/dag_runner_patcher.py, functools.wraps)."""
    runner_class = tfx.orchestration.experimental.KubeflowV2DagRunner
    return hasattr(runner_class.run, "__wrapped__")


def tfx_cli_output(runner: Any) -> str | None:
    """Where the TFX CLI wants the spec: `<VERTEX_HOME or ~/tfx/vertex>/<pipeline>/pipeline.json`,
    which its patcher set on the runner before run() (kubeflow_v2_dag_runner_patcher.py
    _before_run); None under `tfx pipeline compile`, which sets no directory."""
    output_dir = runner._output_dir  # noqa: SLF001 - the attribute the TFX CLI sets
    if output_dir == _NOT_THE_CLI:
        return None
    return os.path.join(output_dir, runner._output_filename)  # noqa: SLF001


def main() -> str:
    """The script: compiles $RANKPIPE_CONFIG with $RANKPIPE_SET to $RANKPIPE_SPEC
    ($RANKPIPE_FORMAT, yaml by default); under the TFX CLI's vertex engine, the Vertex AI
    PipelineJob JSON to the CLI's pipeline.json, byte for byte `rankpipe compile --format
    vertex`'s file. Returns the path written."""
    from pipelines.config import load_config

    config = load_config(
        os.environ.get(CONFIG_ENV, "cranfield"),
        os.environ.get(OVERRIDES_ENV, "").split(),
        check_inputs=False,
    )
    cli = under_tfx_cli()
    fmt = "vertex" if cli else os.environ.get(FORMAT_ENV, "yaml")
    job, runner = _compile(config, fmt)
    output = (tfx_cli_output(runner) if cli else None) or os.environ.get(
        SPEC_ENV, f"{config.runner.pipeline_name}.{'json' if fmt == 'vertex' else 'yaml'}"
    )
    return _write(config, job, output, fmt)


if __name__ == "__main__":
    main()
