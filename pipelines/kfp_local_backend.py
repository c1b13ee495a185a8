"""A local stand-in for the open-source Kubeflow Pipelines v2 backend, for tests and benchmarks.

`LocalKfpBackend(workdir).run(spec)` executes a compiled PipelineSpec (YAML or JSON; the first
YAML document, as the KFP client reads a package) the way the backend's Argo compiler, driver
and launcher do, read from kubeflow/pipelines `backend/src/v2` at 7b70c7b (the same behaviour
in 2.14 - 2.17):

- at run creation, a `resolver` executor (or any that is neither container nor importer) is
  refused with the compiler's message (compiler/visitor.go; compiler/argocompiler/dag.go);
- tasks run as Argo runs a DAG: every task whose producers (dependentTasks plus the tasks its
  inputs name) are done starts at once, in a thread of its own (at most `parallelism` at a
  time when set); after a failure nothing new starts, the running tasks end, and the run fails;
- caching as the driver does it (driver/cache.go, cacheutils/cache.go): a task whose
  `cachingOptions.enableCache` is set and whose fingerprint (input artifact ids, parameter
  values, output specs, image, command and arguments) matches an earlier successful execution
  of the same pipeline on this backend reuses that execution's outputs without running; so an
  unchanged second run is served from the cache entirely, as on a cluster;
- per task, the driver (driver/container.go, driver/resolve.go, driver/driver.go
  provisionOutputs) builds the ExecutorInput: `inputs.parameterValues` only, from `constant`
  runtime values (schema 2.0 `constantValue` is refused as resolve.go refuses it, and a legacy
  `type` instead of `parameterType` fails its type check); input artifacts as read back from
  MLMD (metadata/client.go, metadata/converter.go): numeric `name` (the MLMD id), the producer's
  merged URI and metadata, and an EMPTY instance schema; outputs at
  `<pipeline root>/<task>/<uuid salt>/<key>` with the output definition's type, the
  launcher-written `executor-logs` output, and `outputFile` under the task root's local path;
- the launcher (component/launcher_v2.go) runs in a fresh directory standing for the pod's
  filesystem: it downloads input artifacts from the object store to their local paths
  (LocalPathForURI: /minio/..., /s3/..., /gcs/...), creates the output paths' parents,
  substitutes `{{$}}` and the `{{$.inputs/outputs...}}` placeholders (compileCmdAndArgs), runs
  the container's command and args as a subprocess, reads the ExecutorOutput, merges each
  output's `uri` (when non-empty) and `metadata` into the provisioned artifact
  (mergeRuntimeArtifacts), uploads the output local paths and records the artifacts with the
  type named by their schema title (SchemaToArtifactType) and a default `display_name`;
- importer tasks (component/importer_launcher.go) record the constant artifact URI.

The object store is a directory (`<workdir>/object-store/<minio|s3|gcs>/<bucket>/<key>`) with
the Go object store's semantics (objectstore/object_store.go): an upload writes one object per
file (no directory objects, so an empty directory uploads nothing), a download writes every
object under the key's prefix. MLMD is an in-memory record of the run's artifacts.

Where a task's container runs is a pluggable "pod" (`pods`, a PodFactory: one fresh Pod per
task). The default, HostPods, differs from a cluster on purpose, for CI: the container runs in
this machine's environment (its `python` is the interpreter running this module, i.e. the
project's venv, and the working directory is the checkout, as the image's WORKDIR holds the
project), and the launcher's local paths are rebased under the task's directory, which the
command learns from $RANKPIPE_KFP_LOCAL_ROOT (pipelines/kfp_entrypoint.py honours it). A pod
with `rebased = False` runs the spec's command and arguments unchanged in a file system of its
own where the launcher's paths are the real ones (tests/image/buildah_pods.py: the built image,
`make image-test`). The run stops at the first failed task; container resources are not
enforced. Written by hand because no tool runs a TFX
spec this way: kfp 2.5's `kfp.local` runs single components only, and later versions' pipeline
support needs a protobuf 4 stack and rewrites TFX artifacts as `dsl.Artifact`s.
"""

from __future__ import annotations

import concurrent.futures
import copy
import dataclasses
import functools
import graphlib
import hashlib
import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any, Protocol

import yaml
from google.protobuf import json_format, struct_pb2
from kfp.pipeline_spec import pipeline_spec_pb2 as pb

from pipelines import kfp_entrypoint

DEFAULT_PIPELINE_ROOT = "minio://mlpipeline/v2/artifacts"  # backend/src/v2/config/env.go
REPO_ROOT = Path(__file__).resolve().parent.parent
LOGS_KEY = "executor-logs"


class BackendError(RuntimeError):
    """The backend refused the spec or a task failed; the message is the backend's own."""


@dataclasses.dataclass
class Artifact:
    """An artifact as recorded in MLMD: id, output key, type name (the schema title), URI and
    custom properties (the launcher stores ExecutorOutput metadata as custom properties)."""

    id: int
    key: str
    type_name: str
    uri: str
    custom_properties: dict[str, Any]


@dataclasses.dataclass
class TaskResult:
    name: str
    seconds: float
    returncode: int | None  # None for importer tasks (no container)
    executor_input: dict[str, Any]
    executor_output: dict[str, Any]
    outputs: dict[str, Artifact]
    log: str  # the executor's stdout and stderr
    # Launcher phases, seconds: input download, the command's process, output upload.
    phases: dict[str, float] = dataclasses.field(default_factory=dict)
    # The driver's cache fingerprint ("" when the task's caching is off) and whether the task
    # was served from the cache (driver/container.go: no launcher, the cached execution's
    # outputs reused as they are, same MLMD artifacts).
    fingerprint: str = ""
    cached: bool = False
    started: float = 0.0  # time.time() when the driver began (tasks run in parallel)


@dataclasses.dataclass
class RunResult:
    run_id: str
    pipeline_root: str
    tasks: dict[str, TaskResult]
    seconds: float


class Pod(Protocol):
    """One task's container: a fresh file system that the backend (the launcher's side) reads
    and writes at `root`, and in which `run` executes the command."""

    # Where this process sees the pod's "/".
    root: Path
    # Where the command sees the pod's "/": "/" in a real container; for host pods a path of
    # this machine, the same for every task (as /minio/<key> is the same string in every pod:
    # an evaluation that names the model's local path still names it in the Pusher's pod).
    seen_root: Path
    # True: the command sees this machine's file system, so the launcher's local paths it is
    # given are rebased under `root` and `python` is this interpreter (HostPods). False: the
    # command sees `root` as "/" and gets the spec's command and paths unchanged.
    rebased: bool

    def run(
        self, argv: list[str], env: dict[str, str], log: IO[bytes], timeout: float | None
    ) -> int:
        """Runs argv with the container spec's `env` added to the pod's own environment, stdout
        and stderr to `log`; returns the exit status (subprocess.TimeoutExpired past timeout)."""
        ...

    def remove(self) -> None:
        """Called once the launcher has uploaded the task's outputs."""
        ...


PodFactory = Callable[[str], Pod]  # task name -> a fresh pod for it


class HostPod:
    """A directory of this machine standing for the pod's file system; the command runs as a
    subprocess of this machine with `env` and `cwd` (the default pods, see the docstring).

    With `seen_root` elsewhere than `root`, the command runs in a mount namespace of its own
    (util-linux `unshare`) where `root` is bind-mounted at `seen_root`: every task sees its
    files at the same path, yet tasks running at once each have their own file system.
    """

    rebased = True

    def __init__(self, root: Path, env: dict[str, str], cwd: str, seen_root: Path | None = None):
        shutil.rmtree(root, ignore_errors=True)
        root.mkdir(parents=True)
        self.root, self.env, self.cwd = root, env, cwd
        self.seen_root = seen_root or root
        if self.seen_root != self.root:
            self.seen_root.mkdir(parents=True, exist_ok=True)

    def run(
        self, argv: list[str], env: dict[str, str], log: IO[bytes], timeout: float | None
    ) -> int:
        # The pod sees "/" at `seen_root`; pipelines.kfp_entrypoint reads this.
        full_env = dict(self.env, **{kfp_entrypoint.LOCAL_ROOT_ENV: str(self.seen_root)}, **env)
        if self.seen_root != self.root:
            argv = [*_BIND_AND_EXEC, str(self.root), str(self.seen_root), *argv]
        return subprocess.run(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=full_env,
            cwd=self.cwd,
            timeout=timeout,
            check=False,
        ).returncode

    def remove(self) -> None:
        """Kept, as the task left it, for inspection (replaced when the task runs again)."""


# `unshare` (util-linux): a private mount namespace (as root, or a user namespace where
# unprivileged ones are allowed) in which $1 is bind-mounted on $2, then the command.
_BIND_AND_EXEC = [
    "unshare",
    "--mount",
    "--propagation",
    "private",
    *([] if os.geteuid() == 0 else ["--map-root-user"]),
    "sh",
    "-c",
    'mount --bind "$1" "$2" || exit 125; shift 2; exec "$@"',
    "rankpipe-pod",
]


@functools.cache
def mount_namespaces_work() -> bool:
    """Whether HostPods can give parallel tasks one path each (see HostPod)."""
    with tempfile.TemporaryDirectory() as tmp:
        a, b = Path(tmp, "a"), Path(tmp, "b")
        a.mkdir()
        b.mkdir()
        (a / "probe").write_text("")
        try:
            proc = subprocess.run(
                [*_BIND_AND_EXEC, str(a), str(b), "test", "-e", str(b / "probe")],
                capture_output=True,
                timeout=30,
            )
        except (OSError, subprocess.TimeoutExpired):
            return False
        return proc.returncode == 0


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


class LocalKfpBackend:
    """Runs compiled specs; `workdir` holds the object store and, with the default HostPods,
    a directory per task standing for its pod's filesystem (`pods/<task>`, left as the task
    left it). `pods` runs the tasks' containers elsewhere (the Pod protocol)."""

    def __init__(
        self,
        workdir: str | os.PathLike,
        pipeline_root: str = DEFAULT_PIPELINE_ROOT,
        env: dict[str, str] | None = None,
        publish_logs: bool = True,
        cwd: str | os.PathLike = REPO_ROOT,
        timeout: float | None = None,
        cache_disabled: bool = False,
        parallelism: int | None = None,
        pods: PodFactory | None = None,
    ):
        self.workdir = Path(workdir)
        self.store = self.workdir / "object-store"
        self.default_root = pipeline_root
        self.pipeline_root = pipeline_root.rstrip("/")
        self.env = dict(os.environ if env is None else env)
        self.publish_logs = publish_logs
        self.cwd = str(cwd)
        self.timeout = timeout
        self.cache_disabled = cache_disabled
        self.parallelism = parallelism
        if pods is None:
            pods = self._host_pod
            if not mount_namespaces_work():
                logging.warning(
                    "KFP local backend: no mount namespaces (unshare) here: tasks run one at a time"
                )
                self.parallelism = 1
        self.pods = pods
        self._next_id = 1
        self._lock = threading.Lock()  # MLMD ids and the cache, written from task threads
        self.tasks: dict[str, TaskResult] = {}  # the current or last run's finished tasks
        # The cache database: (pipeline name, fingerprint) -> the execution that produced it.
        self._cache: dict[tuple[str, str], TaskResult] = {}

    def _host_pod(self, task: str) -> HostPod:
        """The default pod: the task's own directory, seen at one path by every task when
        mount namespaces work here; otherwise one directory, reused (so one task at a time)."""
        shared = self.workdir / "pod"
        if mount_namespaces_work():
            return HostPod(self.workdir / "pods" / task, self.env, self.cwd, shared)
        return HostPod(shared, self.env, self.cwd)

    # ---- the object store ----------------------------------------------------------------
    def store_path(self, uri: str) -> Path:
        """Where the simulated object store keeps the objects under `uri`."""
        path = kfp_entrypoint.local_path_for_uri(uri, str(self.store))
        if path is None:
            raise BackendError(f"URI {uri!r} has no object-store scheme (gs, s3, minio)")
        return Path(path)

    def _upload(self, local: Path, uri: str) -> None:
        """objectstore.UploadBlob: a file becomes one object, a directory one object per file
        (recursively); nothing is written for a directory itself."""
        target = self.store_path(uri)
        if local.is_file():
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(local, target)
            return
        for root, _, files in os.walk(local):
            for name in files:
                src = Path(root) / name
                dst = target / src.relative_to(local)
                dst.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(src, dst)

    def _download(self, uri: str, local: Path) -> None:
        """objectstore.DownloadBlob: every object whose key is the URI's key or under it."""
        source = self.store_path(uri)
        if source.is_file():
            local.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source, local)
        elif source.is_dir():
            shutil.copytree(source, local, dirs_exist_ok=True)

    # ---- MLMD ----------------------------------------------------------------------------
    def _record(self, key: str, artifact: pb.RuntimeArtifact, extra: dict[str, str]) -> Artifact:
        """metadata/client.go RecordArtifact: type from the schema title, metadata as custom
        properties, a default display_name and the store session info."""
        properties = json_format.MessageToDict(artifact.metadata)
        properties.setdefault("display_name", key)
        for name, value in extra.items():
            properties.setdefault(name, value)
        with self._lock:
            recorded = Artifact(self._next_id, key, _title(artifact.type), artifact.uri, properties)
            self._next_id += 1
        return recorded

    @staticmethod
    def _as_input(recorded: Artifact) -> pb.RuntimeArtifact:
        """metadata/client.go GetOutputArtifactsByExecutionId + ToRuntimeArtifact."""
        artifact = pb.RuntimeArtifact(name=str(recorded.id), uri=recorded.uri)
        for name, value in recorded.custom_properties.items():
            artifact.metadata.fields[name].CopyFrom(
                _mlmd_round_trip(json_format.ParseDict(value, struct_pb2.Value()))
            )
        artifact.type.instance_schema = ""  # "TODO(Bobgy): figure out how to get schema"
        return artifact

    # ---- the run ---------------------------------------------------------------------------
    def run(
        self, spec: pb.PipelineSpec | str | os.PathLike, pipeline_root: str | None = None
    ) -> RunResult:
        """Runs the spec; the pipeline root is the run's `pipeline_root`, else the spec's
        `defaultPipelineRoot`, else the backend's default (as the API server picks it)."""
        if not isinstance(spec, pb.PipelineSpec):
            spec = load_spec(spec)
        check_executors(spec)
        root = (pipeline_root or spec.default_pipeline_root or self.default_root).rstrip("/")
        if kfp_entrypoint.local_path_for_uri(root, "/") is None:
            # objectstore/config.go ParseBucketPathToConfig accepts gs://, s3://, minio://.
            raise BackendError(f"parse bucket config failed: unsupported Cloud bucket: {root!r}")
        self.pipeline_root = root
        run_id = uuid.uuid4().hex[:12]
        start = time.time()
        # Kept on the backend too, so a failed run still shows what ran.
        results: dict[str, TaskResult] = {}
        self.tasks = results
        # Argo runs every task whose producers are done, at once (at most `parallelism`, the
        # workflow's own limit when set); after a failure it schedules nothing new, lets the
        # running tasks end and fails the run (a DAG's failFast, on by default).
        graph = graphlib.TopologicalSorter(task_producers(spec.root.dag))
        graph.prepare()
        logging.info("KFP local backend: run %s, tasks %s", run_id, sorted(spec.root.dag.tasks))
        workers = self.parallelism or max(1, len(spec.root.dag.tasks))
        failure: BaseException | None = None
        with concurrent.futures.ThreadPoolExecutor(workers, "kfp-task") as pool:
            running: dict[concurrent.futures.Future, str] = {}
            while failure is None and graph.is_active():
                for name in graph.get_ready():
                    running[pool.submit(self._run_task, spec, name, dict(results))] = name
                done, _ = concurrent.futures.wait(
                    running, return_when=concurrent.futures.FIRST_COMPLETED
                )
                for future in done:
                    name = running.pop(future)
                    try:
                        results[name] = future.result()
                    except BaseException as e:  # noqa: BLE001 - re-raised once the rest ended
                        failure = failure or e
                        continue
                    graph.done(name)
            for future in concurrent.futures.as_completed(running):
                name = running[future]
                if future.exception() is None:
                    results[name] = future.result()
        if failure is not None:
            raise failure
        return RunResult(run_id, root, results, time.time() - start)

    def _run_task(
        self, spec: pb.PipelineSpec, name: str, results: dict[str, TaskResult]
    ) -> TaskResult:
        """One task: importer, or driver then launcher (or the cache); `results` holds its
        producers' results."""
        task = spec.root.dag.tasks[name]
        component = spec.components[task.component_ref.name]
        executor = json_format.MessageToDict(
            spec.deployment_spec.fields["executors"].struct_value.fields[component.executor_label]
        )
        t0 = time.time()
        if "importer" in executor:
            result = self._import(name, component, executor["importer"])
        else:
            executor_input = self._drive(spec, name, task, component, results)
            result = self._launch_or_reuse(
                spec.pipeline_info.name, name, task, component, executor, executor_input
            )
        result.seconds = time.time() - t0
        result.started = t0
        logging.info(
            "KFP local backend: %s %s in %.1fs",
            name,
            "served from cache" if result.cached else "done",
            result.seconds,
        )
        return result

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
            return self._launch(name, component, executor["container"], executor_input)
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
        result = self._launch(name, component, executor["container"], executor_input)
        result.fingerprint = fingerprint
        with self._lock:
            self._cache[(pipeline_name, fingerprint)] = result
        return result

    def _pod_path(self, pod: Path, path: str) -> Path:
        return pod / path.lstrip("/")

    def _launch(
        self,
        name: str,
        component: pb.ComponentSpec,
        container: dict[str, Any],
        executor_input: pb.ExecutorInput,
    ) -> TaskResult:
        """component/launcher_v2.go Execute (executeV2, execute, uploadOutputArtifacts)."""
        # A fresh filesystem per task: as in pods, a local path (/minio/<key>) is the same
        # string in every task, and nothing else carries over.
        box = self.pods(name)
        try:
            return self._launch_in(box, name, component, container, executor_input)
        finally:
            box.remove()

    def _launch_in(
        self,
        box: Pod,
        name: str,
        component: pb.ComponentSpec,
        container: dict[str, Any],
        executor_input: pb.ExecutorInput,
    ) -> TaskResult:
        pod = box.root
        env = {item["name"]: item.get("value", "") for item in container.get("env", [])}
        seen_root = box.seen_root  # the command's view of the pod's "/"

        def host(seen_path: str) -> Path:  # where this process finds a path the command sees
            return pod / Path(seen_path).relative_to(seen_root)

        def local(uri: str) -> Path:
            return Path(kfp_entrypoint.local_path_for_uri(uri, str(pod)))

        t0 = time.perf_counter()
        for artifact_list in executor_input.inputs.artifacts.values():  # downloadArtifacts
            for artifact in artifact_list.artifacts:
                self._download(artifact.uri, local(artifact.uri))
        for artifact_list in executor_input.outputs.artifacts.values():  # prepareOutputFolders
            for artifact in artifact_list.artifacts:
                local(artifact.uri).parent.mkdir(parents=True, exist_ok=True)
        # What the command sees, with the pod's paths rebased (see the module docstring).
        seen = copy.deepcopy(executor_input)
        seen.outputs.output_file = str(
            self._pod_path(seen_root, executor_input.outputs.output_file)
        )
        for param in seen.outputs.parameters.values():
            param.output_file = str(self._pod_path(seen_root, param.output_file))
            host(param.output_file).parent.mkdir(parents=True, exist_ok=True)
        for key, definition in component.input_definitions.parameters.items():  # addDefaultParams
            if key not in seen.inputs.parameter_values and definition.HasField("default_value"):
                seen.inputs.parameter_values[key].CopyFrom(definition.default_value)
        command, args = self._compile_cmd_and_args(
            seen, container, seen_root, sys.executable if box.rebased else None
        )

        log_path = (
            local(f"{executor_input.outputs.artifacts[LOGS_KEY].artifacts[0].uri}")
            if (LOGS_KEY in executor_input.outputs.artifacts)
            else pod / "executor.log"
        )
        log_path.parent.mkdir(parents=True, exist_ok=True)
        t1 = time.perf_counter()
        with open(log_path, "wb") as log:
            try:
                returncode = box.run(command + args, env, log, self.timeout)
            except subprocess.TimeoutExpired:
                raise BackendError(
                    f"task {name!r}: timed out after {self.timeout}s; log: {log_path}"
                ) from None
        log_text = log_path.read_text(errors="replace")
        if returncode != 0:
            raise BackendError(
                f"task {name!r}: failed to execute component: exit status {returncode}\n"
                f"--- the end of {log_path} ---\n{log_text[-4000:]}"
            )

        executor_output = pb.ExecutorOutput()  # getExecutorOutputFile: none -> empty
        output_file = host(seen.outputs.output_file)
        if output_file.exists():
            with open(output_file) as f:
                json_format.Parse(f.read(), executor_output)
        for key, param in seen.outputs.parameters.items():  # collectOutputParameters
            if key not in executor_output.parameter_values:
                text = host(param.output_file).read_text()
                executor_output.parameter_values[key].string_value = text

        t2 = time.perf_counter()
        outputs: dict[str, Artifact] = {}
        for key, artifact_list in executor_input.outputs.artifacts.items():
            for artifact in artifact_list.artifacts:
                produced = executor_output.artifacts.get(key)
                if key != LOGS_KEY and produced is not None and produced.artifacts:
                    # mergeRuntimeArtifacts
                    if produced.artifacts[0].uri:
                        artifact.uri = produced.artifacts[0].uri
                    for field, value in produced.artifacts[0].metadata.fields.items():
                        artifact.metadata.fields[field].CopyFrom(value)
                path = kfp_entrypoint.local_path_for_uri(artifact.uri, str(pod))
                if path is None:
                    logging.warning(
                        "Output Artifact %r does not have a recognized storage URI %r. Skipping "
                        "uploading to remote storage.",
                        key,
                        artifact.uri,
                    )
                elif os.path.exists(path):
                    self._upload(Path(path), artifact.uri)
                else:
                    logging.warning("Local filepath %r does not exist", path)
                    if key == LOGS_KEY:
                        continue
                session = json.dumps({"Provider": artifact.uri.split("://")[0], "Params": {}})
                outputs[key] = self._record(key, artifact, {"store_session_info": session})
        return TaskResult(
            name=name,
            seconds=0.0,
            returncode=returncode,
            executor_input=json_format.MessageToDict(executor_input),
            executor_output=json_format.MessageToDict(executor_output),
            outputs=outputs,
            log=log_text,
            phases={"download": t1 - t0, "process": t2 - t1, "upload": time.perf_counter() - t2},
        )

    @staticmethod
    def _compile_cmd_and_args(
        executor_input: pb.ExecutorInput,
        container: dict[str, Any],
        pod: Path,
        python: str | None = None,
    ) -> tuple[list[str], list[str]]:
        """launcher_v2.go compileCmdAndArgs + getPlaceholders; local paths under `pod` (the
        command's view of the pod's root); a `python` command is replaced by `python` when given
        (HostPods: this interpreter, the project's environment)."""
        placeholders = {}
        for key, artifact_list in executor_input.inputs.artifacts.items():
            if artifact_list.artifacts:
                artifact = artifact_list.artifacts[0]
                placeholders[f"{{{{$.inputs.artifacts['{key}'].uri}}}}"] = artifact.uri
                path = kfp_entrypoint.local_path_for_uri(artifact.uri, str(pod))
                if path is not None:
                    placeholders[f"{{{{$.inputs.artifacts['{key}'].path}}}}"] = path
        for key, artifact_list in executor_input.outputs.artifacts.items():
            if artifact_list.artifacts:
                artifact = artifact_list.artifacts[0]
                placeholders[f"{{{{$.outputs.artifacts['{key}'].uri}}}}"] = artifact.uri
                path = kfp_entrypoint.local_path_for_uri(artifact.uri, str(pod))
                placeholders[f"{{{{$.outputs.artifacts['{key}'].path}}}}"] = path or ""
        for key, value in executor_input.inputs.parameter_values.items():
            kind = value.WhichOneof("kind")
            if kind == "string_value":
                text = value.string_value
            elif kind == "number_value":
                text = repr(value.number_value).removesuffix(".0")
            elif kind == "bool_value":
                text = "true" if value.bool_value else "false"
            else:
                text = json.dumps(json_format.MessageToDict(value), separators=(",", ":"))
            placeholders[f"{{{{$.inputs.parameters['{key}']}}}}"] = text
        for key, param in executor_input.outputs.parameters.items():
            placeholders[f"{{{{$.outputs.parameters['{key}'].output_file}}}}"] = param.output_file

        executor_input_json = json.dumps(
            json_format.MessageToDict(executor_input), separators=(",", ":")
        )

        def substitute(text: str) -> str:
            text = text.replace("{{$}}", executor_input_json)
            for placeholder, replacement in placeholders.items():
                text = text.replace(placeholder, replacement)
            return text

        command = [substitute(c) for c in container.get("command", [])]
        if not command:
            raise BackendError("container has no command (the image's ENTRYPOINT is not known)")
        if python is not None and command[0] in ("python", "python3"):
            command[0] = python
        return command, [substitute(a) for a in container.get("args", [])]

    def _import(self, name: str, component: pb.ComponentSpec, importer: dict) -> TaskResult:
        """component/importer_launcher.go ImportSpecToMLMDArtifact (constant URI only)."""
        uri = importer.get("artifactUri", {}).get("constant")
        if not uri:
            raise BackendError(f"task {name!r}: artifact uri not provided")
        artifact = pb.RuntimeArtifact(uri=uri)
        json_format.ParseDict(importer.get("typeSchema", {}), artifact.type)
        json_format.ParseDict(importer.get("metadata", {}), artifact.metadata)
        keys = list(component.output_definitions.artifacts) or ["artifact"]
        session = json.dumps({"Provider": uri.split("://")[0], "Params": {"fromEnv": "true"}})
        recorded = self._record(keys[0], artifact, {"store_session_info": session})
        return TaskResult(name, 0.0, None, {}, {}, {k: recorded for k in keys}, "")
