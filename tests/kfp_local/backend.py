"""LocalKfpBackend: runs a compiled spec's DAG as Argo does, each task through the driver
(driver.py) and launcher (launcher.py) or as an importer, and records artifacts as MLMD would
(see __init__.py for what is and is not a cluster's behaviour)."""

from __future__ import annotations

import concurrent.futures
import graphlib
import json
import logging
import os
import threading
import time
import uuid
from pathlib import Path

from google.protobuf import json_format, struct_pb2
from kfp.pipeline_spec import pipeline_spec_pb2 as pb

from kfp_local.driver import Driver
from kfp_local.launcher import Launcher
from kfp_local.pods import HostPod, PodFactory, mount_namespaces_work
from kfp_local.records import (
    DEFAULT_PIPELINE_ROOT,
    REPO_ROOT,
    Artifact,
    BackendError,
    RunResult,
    TaskResult,
)
from kfp_local.spec import (
    _mlmd_round_trip,
    _title,
    check_executors,
    load_spec,
    root_parameters,
    task_producers,
)
from pipelines import kfp_entrypoint


class LocalKfpBackend(Driver, Launcher):
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
        fail_first: dict[str, int] | None = None,
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
        # task -> how many of its next pods fail at once (exit 137, as a pod killed or evicted),
        # to exercise retry policies on real specs.
        self.fail_first = dict(fail_first or {})
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
        self.run_parameters: dict[str, struct_pb2.Value] = {}  # the current run's parameters
        # The cache database: (pipeline name, fingerprint) -> the execution that produced it.
        self._cache: dict[tuple[str, str], TaskResult] = {}

    def _host_pod(self, task: str) -> HostPod:
        """The default pod: the task's own directory, seen at one path by every task when
        mount namespaces work here; otherwise one directory, reused (so one task at a time)."""
        shared = self.workdir / "pod"
        if mount_namespaces_work():
            return HostPod(self.workdir / "pods" / task, self.env, self.cwd, shared)
        return HostPod(shared, self.env, self.cwd)

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
        self,
        spec: pb.PipelineSpec | str | os.PathLike,
        pipeline_root: str | None = None,
        parameters: dict[str, object] | None = None,
    ) -> RunResult:
        """Runs the spec; the pipeline root is the run's `pipeline_root`, else the spec's
        `defaultPipelineRoot`, else the backend's default (as the API server picks it);
        `parameters` are the run's pipeline parameters (a run's `runtime_config.parameters`),
        the spec's defaults for the others."""
        if not isinstance(spec, pb.PipelineSpec):
            spec = load_spec(spec)
        check_executors(spec)
        self.run_parameters = root_parameters(spec, parameters or {})
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
