"""The Trainer as a Kubeflow Training Operator TFJob: the manifest, the staging of inputs and
outputs, and the job's life (create, wait, fail with its condition, delete on cancel).

The Trainer's own pod (the KFP task) runs `TFJobTrainerExecutor` (executor.py, which only
marshals), which calls `run_tfjob` here:

1. The launcher downloaded the inputs into this pod only, so they are copied to
   `<staging_dir>/<job key>/inputs/` (skipped when a retried task finds them there), where every
   replica reads them. The job key hashes the inputs' URIs and the execution properties: a
   retried task gets the same key, hence the same checkpoints (resume).
2. The outputs of the replicas are `<staging>/Trainer/model/chief` and `.../model_run/chief`
   (the chief's; a non-chief replica writes beside them, replica.py), so the checkpoints are
   `<staging>/Trainer/checkpoints/<fingerprint>` for every replica and every attempt
   (trainer_module/checkpointing.py).
3. A `kubeflow.org/v1` TFJob with a Chief and count - 1 Workers, each running
   `python -m components.trainer_replicas.replica` with the same serialized executor input
   (TFX's Trainer GenericExecutor, replica.py). The operator sets each replica's TF_CONFIG
   (cluster chief/worker, task type and index); restartPolicy OnFailure restarts a failed
   replica, which resumes from the chief's last checkpoint, up to runPolicy.backoffLimit.
4. Progress lines while it runs; on success the chief's outputs are copied into this task's
   outputs (which the launcher uploads); a failed job raises its condition's message; a
   cancelled task (SIGTERM) deletes the job.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import signal
import threading
import time
from collections.abc import Callable
from typing import Any

import tensorflow as tf

from components.trainer_replicas.config import TrainerReplicasConfig

GROUP, VERSION, PLURAL = "kubeflow.org", "v1", "tfjobs"
API_VERSION = f"{GROUP}/{VERSION}"
KIND = "TFJob"
CONTAINER_NAME = "tensorflow"  # the operator's default container name for a TFJob
CHIEF, WORKER = "Chief", "Worker"
REPLICA_MODULE = "components.trainer_replicas.replica"
# The pod's namespace, as every Kubernetes pod has it.
NAMESPACE_FILE = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"
CHIEF_DIR = "chief"
COPIED_MARKER = "_RANKPIPE_STAGED"
MAX_NAME = 63  # a Kubernetes name (the operator appends -chief-0 etc. for its pods' names)
POLL_SECONDS = 15.0  # between two reads of the job's status


class TFJobFailed(RuntimeError):
    """The TFJob ended Failed (the message is its condition's)."""


class TFJobCancelled(RuntimeError):
    """The task was cancelled while the TFJob ran (the job was deleted)."""


def job_key(inputs: dict[str, list[str]], exec_properties: dict[str, Any]) -> str:
    """Identifies "this Trainer execution" across retries: its input URIs and properties."""
    payload = json.dumps({"inputs": inputs, "exec_properties": exec_properties}, sort_keys=True)
    return hashlib.sha256(payload.encode()).hexdigest()[:16]


def job_name(pipeline_name: str, key: str, attempt: str) -> str:
    """A DNS-1035 name: <pipeline>-trainer-<key>-<attempt>, cut to fit."""
    base = "".join(c if c.isalnum() else "-" for c in pipeline_name.lower()).strip("-") or "rp"
    if not base[0].isalpha():
        base = f"rp-{base}"
    tail = f"-trainer-{key[:10]}-{attempt}"
    return (base[: MAX_NAME - 16 - len(tail)].rstrip("-") + tail).lower()


def copy_tree(src: str, dst: str) -> None:
    """Copies a file or directory tree with tf.io.gfile (local paths, gs://)."""
    if not tf.io.gfile.isdir(src):
        tf.io.gfile.makedirs(os.path.dirname(dst.rstrip("/")) or ".")
        tf.io.gfile.copy(src, dst, overwrite=True)
        return
    tf.io.gfile.makedirs(dst)
    for parent, dirs, files in tf.io.gfile.walk(src):
        rel = os.path.relpath(parent, src)
        target = dst if rel == "." else os.path.join(dst, rel)
        for d in dirs:
            tf.io.gfile.makedirs(os.path.join(target, d))
        for f in files:
            tf.io.gfile.copy(os.path.join(parent, f), os.path.join(target, f), overwrite=True)


def stage_inputs(inputs: dict[str, list[str]], staging: str) -> dict[str, list[str]]:
    """Copies each input artifact to <staging>/inputs/<key>/<i> (once: a marker file says it
    was copied whole) and returns the staged URIs, in the same structure."""
    staged: dict[str, list[str]] = {}
    for key, uris in inputs.items():
        staged[key] = []
        for i, uri in enumerate(uris):
            target = os.path.join(staging, "inputs", key, str(i))
            marker = os.path.join(staging, "inputs", f"{key}-{i}{COPIED_MARKER}")
            if not tf.io.gfile.exists(marker):
                if tf.io.gfile.exists(target):
                    tf.io.gfile.rmtree(target)
                if tf.io.gfile.exists(uri):
                    copy_tree(uri, target)
                else:  # an empty directory artifact (object stores hold no empty directory)
                    tf.io.gfile.makedirs(target)
                with tf.io.gfile.GFile(marker, "w") as f:
                    f.write(uri)
            staged[key].append(target)
    return staged


def staged_outputs(outputs: dict[str, list[str]], staging: str) -> dict[str, list[str]]:
    """The chief's output URIs: <staging>/Trainer/<key>/chief (so the checkpoints, two levels
    above model_run, are <staging>/Trainer/checkpoints/... for every replica)."""
    return {key: [os.path.join(staging, "Trainer", key, CHIEF_DIR)] for key in outputs}


def collect_outputs(staged: dict[str, list[str]], outputs: dict[str, list[str]]) -> None:
    """Copies the chief's outputs into this task's output URIs (which the launcher uploads)."""
    for key, uris in outputs.items():
        for src, dst in zip(staged[key], uris):
            if tf.io.gfile.exists(src):
                copy_tree(src, dst)


def replica_command(
    inputs_json: str, outputs_json: str, exec_properties_json: str, python: str = "python"
) -> list[str]:
    """Every replica's command: TFX's Trainer executor over the same serialized executor input
    (replica.py), as TFX's Vertex extension passes it to tfx.scripts.run_executor."""
    return [
        python,
        "-m",
        REPLICA_MODULE,
        "--inputs",
        inputs_json,
        "--outputs",
        outputs_json,
        "--exec-properties",
        exec_properties_json,
    ]


def _resources(settings: TrainerReplicasConfig) -> dict[str, dict[str, str]]:
    limits: dict[str, str] = {}
    if settings.cpu_limit:
        limits["cpu"] = settings.cpu_limit
    if settings.memory_limit:
        limits["memory"] = settings.memory_limit
    if settings.accelerator_type:
        limits[settings.accelerator_type] = str(settings.accelerator_count or 1)
    # Requests = limits: a replica that waits for CPUs slows every other replica's step.
    return {"limits": limits, "requests": dict(limits)} if limits else {}


def build_manifest(
    name: str,
    namespace: str,
    image: str,
    command: list[str],
    settings: TrainerReplicasConfig,
    labels: dict[str, str] | None = None,
) -> dict[str, Any]:
    """The kubeflow.org/v1 TFJob: one Chief and count - 1 Workers, the same pod template.

    The pod template is built with the kubernetes client's models (V1PodTemplateSpec), so its
    field names are the Kubernetes API's."""
    from kubernetes import client

    resources = _resources(settings)
    container = client.V1Container(
        name=CONTAINER_NAME,
        image=image,
        command=command[:1],
        args=command[1:],
        env=[client.V1EnvVar(name="PYTHONUNBUFFERED", value="1")],
        resources=client.V1ResourceRequirements(**resources) if resources else None,
    )
    pod = client.V1PodTemplateSpec(
        metadata=client.V1ObjectMeta(labels=dict(labels or {})),
        spec=client.V1PodSpec(
            containers=[container], service_account_name=settings.service_account
        ),
    )
    template = client.ApiClient().sanitize_for_serialization(pod)

    def replica_spec(count: int) -> dict[str, Any]:
        # OnFailure: the operator restarts a failed replica's pod, which resumes from the
        # chief's last checkpoint (the others' collectives fail and restart them too).
        return {"replicas": count, "restartPolicy": "OnFailure", "template": template}

    specs = {CHIEF: replica_spec(1)}
    if settings.count > 1:
        specs[WORKER] = replica_spec(settings.count - 1)
    run_policy: dict[str, Any] = {
        "backoffLimit": settings.backoff_limit,
        "cleanPodPolicy": "Running",  # pods still running when the job ends are deleted
    }
    if settings.active_deadline_seconds:
        run_policy["activeDeadlineSeconds"] = settings.active_deadline_seconds
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": {"name": name, "namespace": namespace, "labels": dict(labels or {})},
        "spec": {"runPolicy": run_policy, "tfReplicaSpecs": specs},
    }


def pod_namespace(path: str = NAMESPACE_FILE) -> str:
    """The namespace this pod runs in (its service account's namespace file)."""
    try:
        with open(path) as f:
            return f.read().strip() or "default"
    except FileNotFoundError:
        return "default"


def custom_objects_api() -> Any:
    """CustomObjectsApi with the pod's in-cluster credentials (else ~/.kube/config)."""
    from kubernetes import client, config

    try:
        config.load_incluster_config()
    except config.ConfigException:
        config.load_kube_config()
    return client.CustomObjectsApi()


def job_state(job: dict[str, Any]) -> tuple[str | None, str]:
    """(the last true condition's type: Created, Running, Restarting, Succeeded, Failed; its
    message) of a TFJob object."""
    conditions = [
        c for c in (job.get("status") or {}).get("conditions") or [] if c.get("status") == "True"
    ]
    if not conditions:
        return None, ""
    last = conditions[-1]
    return last.get("type"), last.get("message") or last.get("reason") or ""


def _replica_summary(job: dict[str, Any]) -> str:
    statuses = (job.get("status") or {}).get("replicaStatuses") or {}
    parts = []
    for kind in sorted(statuses):
        s = statuses[kind] or {}
        counts = ", ".join(f"{k} {s[k]}" for k in ("active", "succeeded", "failed") if s.get(k))
        parts.append(f"{kind}: {counts or 'pending'}")
    return "; ".join(parts) or "no replica started yet"


class _CancelOnSigterm:
    """Turns SIGTERM (KFP's cancel of the task's pod) into TFJobCancelled in the wait loop."""

    def __init__(self) -> None:
        self.previous: Any = None

    def _handler(self, signum: int, frame: Any) -> None:
        raise TFJobCancelled(f"signal {signum} while the TFJob ran")

    def __enter__(self) -> _CancelOnSigterm:
        if threading.current_thread() is threading.main_thread():
            self.previous = signal.signal(signal.SIGTERM, self._handler)
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.previous is not None:
            signal.signal(signal.SIGTERM, self.previous)


def run_job(
    api: Any,
    manifest: dict[str, Any],
    poll_seconds: float | None = None,
    sleep: Callable[[float], None] = time.sleep,
    log: Callable[[str], None] = logging.info,
) -> dict[str, Any]:
    """Creates the TFJob, waits until it Succeeded (returned) or Failed (TFJobFailed with its
    condition's message), with a progress line at every change; deletes it when the wait is
    interrupted (SIGTERM: the task was cancelled; Ctrl-C; any error)."""
    namespace, name = manifest["metadata"]["namespace"], manifest["metadata"]["name"]
    api.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, manifest)
    log(f"TFJob {namespace}/{name} created: {_describe(manifest)}")
    start, last = time.monotonic(), None
    finished = False
    try:
        with _CancelOnSigterm():
            while True:
                job = api.get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, name)
                state, message = job_state(job)
                line = f"{state or 'Pending'} ({_replica_summary(job)})"
                if line != last:
                    log(f"TFJob {name}: {line} after {time.monotonic() - start:.0f}s")
                    last = line
                if state == "Succeeded":
                    finished = True
                    return job
                if state == "Failed":
                    finished = True
                    raise TFJobFailed(f"TFJob {namespace}/{name} failed: {message}")
                sleep(POLL_SECONDS if poll_seconds is None else poll_seconds)
    finally:
        if not finished:
            log(f"TFJob {name}: deleting it (the task stopped before the job ended)")
            try:
                api.delete_namespaced_custom_object(
                    GROUP, VERSION, namespace, PLURAL, name, propagation_policy="Foreground"
                )
            except Exception as e:  # noqa: BLE001 - the original error matters more
                log(f"TFJob {name}: delete failed: {e}")


def _describe(manifest: dict[str, Any]) -> str:
    specs = manifest["spec"]["tfReplicaSpecs"]
    return ", ".join(f"{kind} x{spec['replicas']}" for kind, spec in specs.items())


def run_tfjob(
    inputs: dict[str, list[str]],
    outputs: dict[str, list[str]],
    to_json: Callable[[dict[str, list[str]]], tuple[str, str]],
    exec_properties: dict[str, Any],
    settings: TrainerReplicasConfig,
    image: str,
    pipeline_name: str,
    api: Any = None,
    namespace: str | None = None,
    poll_seconds: float | None = None,
    attempt: str | None = None,
) -> dict[str, Any]:
    """Stages the inputs, runs the TFJob, copies the chief's outputs into `outputs`; returns
    the finished job. `to_json(staged inputs, staged outputs)` serializes them as TFX's
    artifact JSON (the executor owns the artifacts)."""
    if not settings.staging_dir:
        raise ValueError("runner.kubeflow.trainer_replicas.staging_dir is not set")
    key = job_key(inputs, exec_properties)
    staging = os.path.join(settings.staging_dir, key)
    log = logging.info
    log(f"staging the Trainer's inputs for {settings.count} replicas under {staging}")
    staged_in = stage_inputs(inputs, staging)
    staged_out = staged_outputs(outputs, staging)
    inputs_json, outputs_json = to_json(staged_in, staged_out)
    command = replica_command(
        inputs_json, outputs_json, json.dumps(exec_properties, sort_keys=True)
    )
    namespace = namespace or settings.namespace or pod_namespace()
    name = job_name(pipeline_name, key, attempt or f"{int(time.time()) % 10**8:x}")
    manifest = build_manifest(
        name,
        namespace,
        image,
        command,
        settings,
        labels={"app.kubernetes.io/managed-by": "rankpipe", "rankpipe/job-key": key},
    )
    job = run_job(api or custom_objects_api(), manifest, poll_seconds=poll_seconds)
    collect_outputs(staged_out, outputs)
    return job
