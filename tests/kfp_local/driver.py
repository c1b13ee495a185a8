"""The KFP v2 driver of the local backend: a task's ExecutorInput (driver/container.go,
driver/resolve.go, driver/driver.go provisionOutputs) and its cache (driver/cache.go,
cacheutils/cache.go), read from kubeflow/pipelines backend/src/v2 at 7b70c7b.

A mixin of LocalKfpBackend (backend.py), which holds the state it reads (pipeline root, cache,
lock) and the launcher (launcher.py)."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import os
import time
import uuid
from typing import Any

from google.protobuf import json_format
from kfp.pipeline_spec import pipeline_spec_pb2 as pb

from kfp_local.records import LOGS_KEY, BackendError, TaskResult
from pipelines import kfp_entrypoint


class Driver:
    """The driver's half of a task: inputs resolved from the producers' recorded outputs, outputs
    provisioned under the pipeline root, and the cache lookup before the launcher runs."""

    def _drive(
        self,
        spec: pb.PipelineSpec,
        name: str,
        task: pb.PipelineTaskSpec,
        component: pb.ComponentSpec,
        results: dict[str, TaskResult],
    ) -> pb.ExecutorInput:
        """driver/container.go Container: resolveInputs + provisionOutputs."""
        executor_input = pb.ExecutorInput()
        inputs = executor_input.inputs
        for key, param in task.inputs.parameters.items():
            where = f"task {name!r}: resolving input parameter with spec {key}"
            kind = param.WhichOneof("kind")
            if kind == "runtime_value":
                value_kind = param.runtime_value.WhichOneof("value")
                if value_kind != "constant":
                    # resolve.go: only ValueOrRuntimeParameter_Constant is handled.
                    go_type = {
                        "constant_value": "ValueOrRuntimeParameter_ConstantValue",
                        "runtime_parameter": "ValueOrRuntimeParameter_RuntimeParameter",
                    }.get(value_kind, str(value_kind))
                    raise BackendError(
                        f"{where}: param runtime value spec of type "
                        f"*pipelinespec.{go_type} not implemented"
                    )
                inputs.parameter_values[key].CopyFrom(param.runtime_value.constant)
            elif kind == "component_input_parameter":
                # The root DAG's parameters: the run's values over the spec's defaults (the
                # root driver, driver.go RootDAG; resolved once per run in backend.run).
                source = param.component_input_parameter
                if source not in self.run_parameters:
                    raise BackendError(
                        f"{where}: parent DAG does not have input parameter {source}"
                    )
                inputs.parameter_values[key].CopyFrom(self.run_parameters[source])
            elif kind == "task_output_parameter":
                producer = results[param.task_output_parameter.producer_task]
                values = producer.executor_output.get("parameterValues", {})
                out_key = param.task_output_parameter.output_parameter_key
                if out_key not in values:
                    raise BackendError(f"{where}: producer has no output parameter {out_key!r}")
                json_format.ParseDict(values[out_key], inputs.parameter_values[key])
            else:
                raise BackendError(f"{where}: parameter spec of type {kind} not implemented yet")
        # resolve.go handleParamTypeValidationAndConversion.
        for key, definition in component.input_definitions.parameters.items():
            if key not in inputs.parameter_values:
                if not definition.is_optional and not definition.HasField("default_value"):
                    raise BackendError(
                        f"task {name!r}: neither value nor default value provided for "
                        f"non-optional parameter {key!r}"
                    )
                continue
            value = inputs.parameter_values[key]
            ptype = pb.ParameterType.ParameterTypeEnum.Name(definition.parameter_type)
            kind = value.WhichOneof("kind")
            if definition.parameter_type == pb.ParameterType.STRING:
                if kind != "string_value":
                    value.string_value = json.dumps(json_format.MessageToDict(value))
                continue
            expected = {
                "string_value": (),
                "number_value": (pb.ParameterType.NUMBER_DOUBLE, pb.ParameterType.NUMBER_INTEGER),
                "bool_value": (pb.ParameterType.BOOLEAN,),
                "list_value": (pb.ParameterType.LIST,),
                "struct_value": (pb.ParameterType.STRUCT,),
            }.get(kind, ())
            if definition.parameter_type not in expected:
                actual = {"string_value": "string", "number_value": "number"}.get(
                    kind, str(kind).replace("_value", "")
                )
                raise BackendError(
                    f"task {name!r}: failed to resolve inputs: input parameter {key!r} type "
                    f"mismatch: expect {ptype}, got {actual}"
                )
        for key, spec_artifact in task.inputs.artifacts.items():
            if not spec_artifact.HasField("task_output_artifact"):
                raise BackendError(
                    f"task {name!r}: artifact spec of type {spec_artifact.WhichOneof('kind')} "
                    "not implemented yet"
                )
            ref = spec_artifact.task_output_artifact
            recorded = results[ref.producer_task].outputs.get(ref.output_artifact_key)
            if recorded is None:
                raise BackendError(
                    f"task {name!r}: cannot find output artifact key "
                    f"{ref.output_artifact_key!r} in producer task {ref.producer_task!r}"
                )
            inputs.artifacts[key].artifacts.append(self._as_input(recorded))

        # driver.go provisionOutputs.
        task_root = f"{self.pipeline_root}/{name}/{uuid.uuid4()}"
        outputs = executor_input.outputs
        definitions = dict(component.output_definitions.artifacts)
        if self.publish_logs:
            definitions[LOGS_KEY] = pb.ComponentOutputsSpec.ArtifactSpec(
                artifact_type=pb.ArtifactTypeSchema(schema_title="system.Artifact")
            )
        for key, definition in definitions.items():
            artifact = outputs.artifacts[key].artifacts.add(name=key, uri=f"{task_root}/{key}")
            artifact.type.CopyFrom(definition.artifact_type)
            artifact.metadata.CopyFrom(definition.metadata)
        for key in component.output_definitions.parameters:
            outputs.parameters[key].output_file = f"/tmp/kfp/outputs/{key}"
        outputs.output_file = os.path.join(
            kfp_entrypoint.local_path_for_uri(task_root, "/"), "output_metadata.json"
        )
        return executor_input

    # ---- the cache --------------------------------------------------------------------------
    @staticmethod
    def fingerprint(
        executor_input: pb.ExecutorInput, component: pb.ComponentSpec, container: dict[str, Any]
    ) -> str:
        """driver/cache.go getFingerPrint with cacheutils/cache.go GenerateCacheKey and
        GenerateFingerPrint: sha256 of the JSON of the input artifacts' names (their MLMD ids),
        the input parameter values, the provisioned outputs with their URIs wiped, the output
        parameters' types, and the image with the unsubstituted command and arguments. So a
        task is served from the cache exactly when its inputs are the same artifacts and its
        parameters and container are the same; nothing it reads outside its inputs (the
        served model under the push destination, say) is part of the key."""
        inputs, outputs = executor_input.inputs, executor_input.outputs
        key = {
            "inputArtifactNames": {
                k: {"artifactNames": [a.name for a in v.artifacts]}
                for k, v in inputs.artifacts.items()
            },
            "inputParameterValues": {
                k: json_format.MessageToDict(v) for k, v in inputs.parameter_values.items()
            },
            "outputArtifactsSpec": {
                k: json_format.MessageToDict(
                    pb.RuntimeArtifact(
                        name=v.artifacts[0].name,
                        type=v.artifacts[0].type,
                        metadata=v.artifacts[0].metadata,
                    )
                )
                for k, v in outputs.artifacts.items()
                if v.artifacts
            },
            "outputParametersSpec": {
                k: pb.ParameterType.ParameterTypeEnum.Name(d.parameter_type)
                for k, d in component.output_definitions.parameters.items()
                if k in outputs.parameters
            },
            "containerSpec": {
                "image": container.get("image", ""),
                "cmdArgs": list(container.get("command", [])) + list(container.get("args", [])),
            },
        }
        # encoding/json writes map keys sorted and no spaces (GenerateFingerPrint).
        text = json.dumps(key, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()

    def _launch_or_reuse(
        self,
        pipeline_name: str,
        name: str,
        task: pb.PipelineTaskSpec,
        component: pb.ComponentSpec,
        executor: dict[str, Any],
        executor_input: pb.ExecutorInput,
    ) -> TaskResult:
        """driver/container.go Container: with caching on for the server and the task, a
        fingerprint found among the pipeline's earlier executions (cacheutils
        GetExecutionCache, scoped to "pipeline/<name>") reuses that execution's outputs
        (reuseCachedOutputs) and no launcher runs; otherwise the task runs and, once it
        succeeded, its fingerprint is recorded (launcher_v2.go, createCache)."""
        if self.cache_disabled or not task.caching_options.enable_cache:
            return self._launch_with_retries(
                name, task, component, executor["container"], executor_input
            )
        fingerprint = self.fingerprint(executor_input, component, executor["container"])
        with self._lock:
            hit = self._cache.get((pipeline_name, fingerprint))
        if hit is not None:
            return dataclasses.replace(
                hit,
                name=name,
                seconds=0.0,
                returncode=None,
                executor_input=json_format.MessageToDict(executor_input),
                executor_output={"parameterValues": hit.executor_output.get("parameterValues", {})},
                log="",
                phases={},
                fingerprint=fingerprint,
                cached=True,
            )
        result = self._launch_with_retries(
            name, task, component, executor["container"], executor_input
        )
        result.fingerprint = fingerprint
        with self._lock:
            self._cache[(pipeline_name, fingerprint)] = result
        return result

    # ---- retries ----------------------------------------------------------------------------
    def _launch_with_retries(
        self,
        name: str,
        task: pb.PipelineTaskSpec,
        component: pb.ComponentSpec,
        container: dict[str, Any],
        executor_input: pb.ExecutorInput,
    ) -> TaskResult:
        """The task's retryPolicy as Argo's retryStrategy runs it (the KFP Argo compiler turns
        maxRetryCount, backoffDuration, backoffFactor and backoffMaxDuration into the executor
        template's retryStrategy limit and backoff): after a failed attempt, a new pod with the
        same ExecutorInput (the driver is not run again: same outputs, same URIs) after waiting
        duration * factor^(n-1); no retry starts once backoffMaxDuration has passed since the
        first attempt began. Without a policy, the first failure fails the task."""
        policy = task.retry_policy
        retries = policy.max_retry_count
        wait = policy.backoff_duration.ToTimedelta().total_seconds()
        factor = policy.backoff_factor or 2.0
        limit = policy.backoff_max_duration.ToTimedelta().total_seconds() or 3600.0
        started = time.monotonic()
        attempt = 0
        waits = []
        while True:
            try:
                with self._lock:
                    killed = self.fail_first.get(name, 0) > 0
                    if killed:
                        self.fail_first[name] -= 1
                if killed:
                    raise BackendError(
                        f"task {name!r}: failed to execute component: exit status 137 "
                        "(the pod was killed: fail_first)"
                    )
                result = self._launch(name, component, container, executor_input)
            except BackendError:
                attempt += 1
                if attempt > retries or time.monotonic() - started + wait > limit:
                    raise
                logging.info(
                    "KFP local backend: %s failed, retry %d of %d in %.1fs",
                    name,
                    attempt,
                    retries,
                    wait,
                )
                time.sleep(wait)
                waits.append(wait)
                wait *= factor
                continue
            result.attempts = attempt + 1
            result.retry_waits = waits
            return result
