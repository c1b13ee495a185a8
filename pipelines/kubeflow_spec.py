"""What rankpipe sets in the pipeline spec TFX's KubeflowV2DagRunner compiles: per task the
settings of runner.kubeflow.components.<id> over runner.kubeflow.defaults (pipelines/config.py
KubeflowComponentConfig): resources (requests and limits), env, the retryPolicy, display names,
and the Kubernetes platform spec (node selector, tolerations, secrets; kfp-kubernetes'
KubernetesExecutorConfig, the YAML's second document); the defaults of the pipeline parameters;
and, for the file's header, what the Trainer tasks of a cross-validated pipeline ask for together.

pipelines/kubeflow_runner.py compiles the pipeline and calls `finish_spec` on TFX's output. Each
value is built with the kfp SDK's own parsers and protos, so it means what it means in a kfp
pipeline, and the spec is checked as a proto before it is written.
"""

from __future__ import annotations

import dataclasses

from google.protobuf import json_format
from kfp.pipeline_spec import pipeline_spec_pb2

from pipelines import component_table
from pipelines.config import KubeflowComponentConfig, PipelineConfig
from rankcore.config_loader import ConfigError


def _resources(spec: KubeflowComponentConfig) -> dict | None:
    """The container's ResourceSpec (kfp-pipeline-spec's proto) as a dict; None when unset. The
    kfp SDK's own unit parsers (as PipelineTask.set_cpu_limit/set_memory_request use): the spec
    stores CPUs and memory (in GB) as numbers in kfp-pipeline-spec 0.2."""
    from kfp.dsl.pipeline_task import PipelineTask

    resources = pipeline_spec_pb2.PipelineDeploymentConfig.PipelineContainerSpec.ResourceSpec()
    if spec.cpu_request is not None:
        resources.cpu_request = PipelineTask._validate_cpu_request_limit(None, spec.cpu_request)
    if spec.cpu_limit is not None:
        resources.cpu_limit = PipelineTask._validate_cpu_request_limit(None, spec.cpu_limit)
    if spec.memory_request is not None:
        resources.memory_request = PipelineTask._validate_memory_request_limit(
            None, spec.memory_request
        )
    if spec.memory_limit is not None:
        resources.memory_limit = PipelineTask._validate_memory_request_limit(
            None, spec.memory_limit
        )
    if spec.accelerator_type:
        resources.accelerator.type = spec.accelerator_type
        resources.accelerator.count = spec.accelerator_count or 1
    return json_format.MessageToDict(resources) or None


def _retry_policy(spec: KubeflowComponentConfig) -> dict | None:
    """The task's retryPolicy, built by the kfp SDK's own RetryPolicy (PipelineTask.set_retry):
    durations normalised to seconds, a single wait capped at 1 h as KFP caps it."""
    if not spec.retries:
        return None
    from kfp.dsl.structures import RetryPolicy

    policy = RetryPolicy(
        max_retry_count=spec.retries,
        backoff_duration=spec.retry_backoff,
        backoff_factor=spec.retry_backoff_factor,
        backoff_max_duration=spec.retry_backoff_max,
    )
    return json_format.MessageToDict(policy.to_proto())


def kubernetes_config(spec: KubeflowComponentConfig) -> dict:
    """The executor's Kubernetes settings for the KFP backend (kfp-kubernetes'
    KubernetesExecutorConfig proto, what kfp.kubernetes.use_secret_as_volume etc. write), as a
    dict; empty when the component sets none. Tolerations are written in the fields of the
    proto's later `tolerations` (kfp-kubernetes >= 1.1, which needs kfp >= 2.6): 1.0, the
    release for kfp 2.5, has no such field."""
    from kfp.kubernetes import kubernetes_executor_config_pb2 as k8s

    config = k8s.KubernetesExecutorConfig()
    if spec.node_selector:
        config.node_selector.labels.update(spec.node_selector)
    for secret, path in sorted(spec.secret_volumes.items()):
        config.secret_as_volume.append(k8s.SecretAsVolume(secret_name=secret, mount_path=path))
    by_secret: dict[str, list[tuple[str, str]]] = {}
    for variable, ref in sorted(spec.secret_env.items()):
        secret, _, key = ref.partition("/")
        by_secret.setdefault(secret, []).append((key, variable))
    for secret, pairs in sorted(by_secret.items()):
        config.secret_as_env.append(
            k8s.SecretAsEnv(
                secret_name=secret,
                key_to_env=[
                    k8s.SecretAsEnv.SecretKeyToEnvMap(secret_key=k, env_var=v) for k, v in pairs
                ],
            )
        )
    result = json_format.MessageToDict(config)
    tolerations = []
    for toleration in spec.tolerations:
        item = {"key": toleration.key, "operator": toleration.operator}
        if toleration.value:
            item["value"] = toleration.value
        if toleration.effect:
            item["effect"] = toleration.effect
        if toleration.toleration_seconds is not None:
            item["tolerationSeconds"] = toleration.toleration_seconds
        tolerations.append(item)
    if tolerations:
        result["tolerations"] = tolerations
    return result


KUBERNETES_ONLY = ("node_selector", "tolerations", "secret_volumes", "secret_env")


def component_settings(config: PipelineConfig, component_id: str) -> KubeflowComponentConfig:
    """The settings of a task (a fold's copy, Trainer_fold2, takes its component's, Trainer's):
    runner.kubeflow.components.<id> over runner.kubeflow.defaults."""
    kubeflow = config.runner.kubeflow
    row = component_table.row_of(component_id)
    key = row.id if row else component_id
    own = kubeflow.components.get(key) or KubeflowComponentConfig()
    try:
        return own.merged_over(kubeflow.defaults)
    except ValueError as e:
        raise ConfigError(
            f"{config.source}: runner.kubeflow.components.{key} over runner.kubeflow.defaults: {e}"
        ) from None


def finish_spec(
    spec: dict,
    config: PipelineConfig,
    command: list[str],
    fmt: str = "yaml",
    parameters: dict | None = None,
) -> tuple[dict, dict]:
    """Sets what TFX's compiler has no option for; returns the spec, checked as a proto, and
    the platform spec (kfp-pipeline-spec's PlatformSpec as a dict, empty when no task sets
    Kubernetes options). `command` is the executors' container command the runner was given."""
    from kfp.compiler import pipeline_spec_builder

    spec["defaultPipelineRoot"] = config.runner.pipeline_root
    executors = spec["deploymentSpec"]["executors"]
    tasks = spec["root"]["dag"]["tasks"]
    kubeflow = config.runner.kubeflow
    platform = pipeline_spec_pb2.PlatformSpec()
    # The root's pipeline parameters (TFX's RuntimeParameters) get their defaults: the config's.
    for name, value in (parameters or {}).items():
        definition = spec["root"]["inputDefinitions"]["parameters"][name]
        definition["defaultValue"] = value
        definition["isOptional"] = True
    for component_id, task in tasks.items():
        settings = component_settings(config, component_id)
        if kubeflow.display_names:
            display = component_table.display_name(component_id, settings.display_name)
            task.setdefault("taskInfo", {})["name"] = display
        label = spec["components"][task["componentRef"]["name"]]["executorLabel"]
        container = executors[label].get("container")
        if container is None:
            continue
        if container.get("command") != command:
            raise AssertionError(f"{component_id}: unexpected command {container.get('command')}")
        resources = _resources(settings)
        if resources:
            container["resources"] = resources
        if settings.env:
            env = {item["name"]: item for item in container.get("env", [])}
            env.update({k: {"name": k, "value": v} for k, v in settings.env.items()})
            container["env"] = [env[k] for k in sorted(env)]
        retry = _retry_policy(settings)
        if retry:
            task["retryPolicy"] = retry
        kubernetes = kubernetes_config(settings)
        if kubernetes and fmt == "vertex":
            row = component_table.row_of(component_id)
            key = f"runner.kubeflow.components.{row.id if row else component_id}"
            used = [k for k in KUBERNETES_ONLY if getattr(settings, k)]
            raise ConfigError(
                f"{config.source}: {key}.{used[0]} (or runner.kubeflow.defaults.{used[0]}): "
                "Vertex AI runs no Kubernetes pods of ours; remove it for --format vertex "
                "(Vertex AI reads gs:// with the run's service account, docs/kubeflow.md)"
            )
        if kubernetes:
            pipeline_spec_builder.merge_platform_specs(
                platform,
                pipeline_spec_builder.platform_config_to_platform_spec(
                    {"kubernetes": kubernetes}, label
                ),
            )
    # A round trip through the proto: unknown or mistyped fields fail here, not on upload.
    parsed = json_format.ParseDict(spec, pipeline_spec_pb2.PipelineSpec())
    return json_format.MessageToDict(parsed), json_format.MessageToDict(platform)


def trainer_totals(spec: dict) -> str | None:
    """What the Trainer tasks ask for together when cross-validation runs k+1 of them at once
    (None without folds), e.g. "6 Trainer tasks at once (cross-validation): requests 12 CPU,
    48 GB; limits 24 CPU, 96 GB; 6 x nvidia.com/gpu"."""
    tasks = spec["root"]["dag"]["tasks"]
    trainers = [t for t in sorted(tasks) if (component_table.row_of(t) or _NO_ROW).id == "Trainer"]
    if len(trainers) < 2:
        return None
    total: dict[str, float] = {}
    accelerators: dict[str, int] = {}
    for name in trainers:
        label = spec["components"][tasks[name]["componentRef"]["name"]]["executorLabel"]
        container = spec["deploymentSpec"]["executors"][label].get("container", {})
        resources = container.get("resources", {})
        for key in ("cpuRequest", "memoryRequest", "cpuLimit", "memoryLimit"):
            if key in resources:
                total[key] = total.get(key, 0.0) + resources[key]
        if "accelerator" in resources:
            kind = resources["accelerator"]["type"]
            count = int(resources["accelerator"].get("count", 1))
            accelerators[kind] = accelerators.get(kind, 0) + count
    parts = []
    for what, cpu, memory in (
        ("requests", "cpuRequest", "memoryRequest"),
        ("limits", "cpuLimit", "memoryLimit"),
    ):
        got = [f"{total[cpu]:g} CPU" if cpu in total else "", ""]
        got[1] = f"{total[memory]:g} GB" if memory in total else ""
        got = [g for g in got if g]
        parts.append(f"{what} {', '.join(got) if got else 'unset'}")
    parts += [f"{count} x {kind}" for kind, count in sorted(accelerators.items())]
    return f"{len(trainers)} Trainer tasks at once (cross-validation): {'; '.join(parts)}"


_NO_ROW = dataclasses.make_dataclass("_NoRow", [("id", str, "")])()
