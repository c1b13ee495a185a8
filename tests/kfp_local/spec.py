"""Reading and checking a compiled spec as the KFP API server and Argo compiler do, the DAG's
task order, and the conversions of MLMD (kubeflow/pipelines backend/src/v2 at 7b70c7b: compiler/,
metadata/converter.go, metadata/client.go)."""

from __future__ import annotations

import graphlib
import os

import yaml
from google.protobuf import json_format, struct_pb2
from kfp.pipeline_spec import pipeline_spec_pb2 as pb

from kfp_local.records import BackendError


def load_spec(path: str | os.PathLike) -> pb.PipelineSpec:
    """The PipelineSpec of a package file: the first YAML document (a bare PipelineSpec, as
    kfp.Client reads it), or a PipelineJob JSON's `pipelineSpec`."""
    with open(path) as f:
        data = next(iter(yaml.safe_load_all(f)), None)
    if not isinstance(data, dict):
        raise BackendError(f"{path}: not a pipeline spec (no YAML mapping in its first document)")
    if "pipelineSpec" in data:
        data = data["pipelineSpec"]
    return json_format.ParseDict(data, pb.PipelineSpec())


def check_executors(spec: pb.PipelineSpec) -> None:
    """Refuses executors the Argo compiler cannot run (compiler/visitor.go: only container and
    importer executors; argocompiler/dag.go says "resolver executors not implemented")."""
    for name in sorted(spec.components):
        label = spec.components[name].executor_label
        if not label:
            continue
        executor = spec.deployment_spec.fields["executors"].struct_value.fields.get(label)
        if executor is None:
            raise BackendError(
                f'error processing component name="{name}": executor(label="{label}") not '
                "found in deployment config"
            )
        kinds = set(executor.struct_value.fields)
        if not kinds & {"container", "importer"}:
            raise BackendError(
                f'error processing component name="{name}": executor(label="{label}"): '
                "non-container and non-importer executor not implemented"
                + (" (resolver executors not implemented)" if "resolver" in kinds else "")
            )


def task_producers(dag: pb.DagSpec) -> dict[str, set[str]]:
    """Each task's producers: its dependentTasks and the tasks its inputs name."""
    graph: dict[str, set[str]] = {}
    for name in sorted(dag.tasks):
        task = dag.tasks[name]
        producers = set(task.dependent_tasks)
        producers |= {
            a.task_output_artifact.producer_task
            for a in task.inputs.artifacts.values()
            if a.HasField("task_output_artifact")
        }
        producers |= {
            p.task_output_parameter.producer_task
            for p in task.inputs.parameters.values()
            if p.HasField("task_output_parameter")
        }
        missing = producers - set(dag.tasks)
        if missing:
            raise BackendError(f"task {name!r}: cannot find producer task(s) {sorted(missing)}")
        graph[name] = producers
    return graph


def task_order(dag: pb.DagSpec) -> list[str]:
    """Tasks in an order where every producer runs first (dependentTasks and input producers)."""
    graph = graphlib.TopologicalSorter()
    for name, producers in task_producers(dag).items():
        graph.add(name, *sorted(producers))
    try:
        return list(graph.static_order())
    except graphlib.CycleError as e:
        raise BackendError(f"the DAG has a cycle: {e.args[1]}") from None


def _mlmd_round_trip(value: struct_pb2.Value) -> struct_pb2.Value:
    """A metadata value as the driver reads it back from MLMD: numbers and bools become doubles,
    lists and structs come back wrapped in {"list": ...} / {"struct": ...}
    (metadata/converter.go StructValueToMLMDValue, then toRuntimeArtifact)."""
    kind = value.WhichOneof("kind")
    if kind == "bool_value":
        return struct_pb2.Value(number_value=float(value.bool_value))
    if kind == "list_value":
        wrapped = struct_pb2.Value()
        wrapped.struct_value.fields["list"].list_value.CopyFrom(value.list_value)
        return wrapped
    if kind == "struct_value":
        wrapped = struct_pb2.Value()
        wrapped.struct_value.fields["struct"].struct_value.CopyFrom(value.struct_value)
        return wrapped
    return value


def _title(schema: pb.ArtifactTypeSchema) -> str:
    """launcher_v2.go getArtifactSchema + metadata/client.go SchemaToArtifactType."""
    kind = schema.WhichOneof("kind")
    if kind == "schema_title":
        return schema.schema_title
    if kind == "instance_schema":
        title = (yaml.safe_load(schema.instance_schema) or {}).get("title", "")
        if title:
            return title
    raise BackendError(f"no title specified in artifact type schema {schema}")


def root_parameters(spec: pb.PipelineSpec, given: dict[str, object]) -> dict[str, struct_pb2.Value]:
    """The run's pipeline parameters as the root DAG's driver resolves them (driver.go RootDAG
    and resolve.go's type check): the run's value, else the root input definition's
    defaultValue; a parameter the spec does not declare, a missing required one or a value of
    the wrong type fails the run."""
    definitions = spec.root.input_definitions.parameters
    unknown = sorted(set(given) - set(definitions))
    if unknown:
        raise BackendError(f"run parameters {unknown}: not parameters of the pipeline")
    resolved = {}
    for name, definition in definitions.items():
        if name in given:
            value = json_format.ParseDict(given[name], struct_pb2.Value())
        elif definition.HasField("default_value"):
            value = definition.default_value
        elif definition.is_optional:
            continue
        else:
            raise BackendError(f"neither value nor default value provided for parameter {name!r}")
        ptype = definition.parameter_type
        kind = value.WhichOneof("kind")
        number = (pb.ParameterType.NUMBER_INTEGER, pb.ParameterType.NUMBER_DOUBLE)
        ok = {
            "string_value": ptype == pb.ParameterType.STRING,
            "number_value": ptype in number,
            "bool_value": ptype == pb.ParameterType.BOOLEAN,
        }.get(kind, False)
        if ptype == pb.ParameterType.NUMBER_INTEGER and ok:
            ok = float(value.number_value).is_integer()
        if not ok:
            raise BackendError(
                f"parameter {name!r}: {json_format.MessageToDict(value)!r} is not a "
                f"{pb.ParameterType.ParameterTypeEnum.Name(ptype)}"
            )
        resolved[name] = value
    return resolved
