"""The TFJob the Trainer's pod creates, checked against the Training Operator's TFJob schema, and
its life (create, wait, fail, cancel) against a fake CustomObjectsApi."""

from __future__ import annotations

import json
import re
import signal
from typing import Any

import jsonschema
import pytest
from kubernetes import client

from components.trainer_replicas import replica, tfjob
from components.trainer_replicas.config import TrainerReplicasConfig

# kubeflow/training-operator manifests/base/crds/kubeflow.org_tfjobs.yaml (version v1), the
# openAPIV3Schema of a TFJob down to the replica specs (the pod template is checked against the
# kubernetes client's models below), with additionalProperties false so a misspelt field fails
# here as the API server would prune it; plus the operator's validation
# (pkg/apis/kubeflow.org/v1/tensorflow_validation.go: the replica types, at most one Chief or
# Master, a container named "tensorflow" with an image) and the enums its docs give.
REPLICA_SPEC = {
    "type": "object",
    "additionalProperties": False,
    "required": ["template"],
    "properties": {
        "replicas": {"type": "integer", "minimum": 0},
        "restartPolicy": {"enum": ["Always", "OnFailure", "Never", "ExitCode"]},
        "template": {
            "type": "object",
            "additionalProperties": False,
            "properties": {"metadata": {"type": "object"}, "spec": {"type": "object"}},
        },
    },
}
TFJOB_SCHEMA = {
    "type": "object",
    "additionalProperties": False,
    "required": ["apiVersion", "kind", "metadata", "spec"],
    "properties": {
        "apiVersion": {"const": "kubeflow.org/v1"},
        "kind": {"const": "TFJob"},
        "metadata": {
            "type": "object",
            "required": ["name", "namespace"],
            "properties": {
                "name": {"type": "string", "pattern": "^[a-z]([-a-z0-9]*[a-z0-9])?$"},
                "namespace": {"type": "string"},
                "labels": {"type": "object", "additionalProperties": {"type": "string"}},
            },
        },
        "spec": {
            "type": "object",
            "additionalProperties": False,
            "required": ["tfReplicaSpecs"],
            "properties": {
                "enableDynamicWorker": {"type": "boolean"},
                "successPolicy": {"type": "string"},
                "runPolicy": {
                    "type": "object",
                    "additionalProperties": False,
                    "properties": {
                        "activeDeadlineSeconds": {"type": "integer"},
                        "backoffLimit": {"type": "integer"},
                        "cleanPodPolicy": {"enum": ["All", "Running", "None"]},
                        "schedulingPolicy": {"type": "object"},
                        "suspend": {"type": "boolean"},
                        "ttlSecondsAfterFinished": {"type": "integer"},
                    },
                },
                "tfReplicaSpecs": {
                    "type": "object",
                    "propertyNames": {"enum": ["PS", "Worker", "Chief", "Master", "Evaluator"]},
                    "additionalProperties": REPLICA_SPEC,
                },
            },
        },
    },
}


class _Response:
    def __init__(self, data: Any):
        self.data = json.dumps(data)


def _operator_checks(manifest: dict) -> None:
    specs = manifest["spec"]["tfReplicaSpecs"]
    for kind in ("Chief", "Master"):
        if kind in specs:
            assert specs[kind].get("replicas", 1) == 1, f"{kind}: one replica at most"
    for kind, spec in specs.items():
        containers = spec["template"]["spec"]["containers"]
        named = [c for c in containers if c["name"] == "tensorflow"]
        assert named and named[0]["image"], f"{kind}: no container named tensorflow"


def _settings(**kw: Any) -> TrainerReplicasConfig:
    return TrainerReplicasConfig(
        **{"count": 3, "staging_dir": "gs://bucket/staging", "cpu_limit": "4", **kw}
    )


def _manifest(**kw: Any) -> dict:
    command = tfjob.replica_command('{"examples": []}', '{"model": []}', '{"run_fn": "x"}')
    return tfjob.build_manifest(
        "rankpipe-demo-trainer-0123456789-1a2b",
        "kubeflow-user",
        "registry.example/rankpipe:1.0",
        command,
        _settings(**kw),
        labels={"app.kubernetes.io/managed-by": "rankpipe"},
    )


def test_the_manifest_is_a_tfjob_the_operator_accepts() -> None:
    manifest = _manifest(accelerator_type="nvidia.com/gpu", active_deadline_seconds=3600)
    jsonschema.validate(manifest, TFJOB_SCHEMA)
    _operator_checks(manifest)
    specs = manifest["spec"]["tfReplicaSpecs"]
    assert {k: v["replicas"] for k, v in specs.items()} == {"Chief": 1, "Worker": 2}
    assert {v["restartPolicy"] for v in specs.values()} == {"OnFailure"}
    assert manifest["spec"]["runPolicy"] == {
        "backoffLimit": 3,
        "cleanPodPolicy": "Running",
        "activeDeadlineSeconds": 3600,
    }
    # The pod template is a Kubernetes PodTemplateSpec: a round trip through the kubernetes
    # client's models keeps every field (a misspelt one would be dropped).
    api = client.ApiClient()
    for spec in specs.values():
        model = api.deserialize(_Response(spec["template"]), "V1PodTemplateSpec")
        assert api.sanitize_for_serialization(model) == spec["template"]
    [container] = specs["Chief"]["template"]["spec"]["containers"]
    assert container["command"] == ["python"]
    assert container["args"][:2] == ["-m", "components.trainer_replicas.replica"]
    limits = {"cpu": "4", "nvidia.com/gpu": "1"}
    assert container["resources"] == {"limits": limits, "requests": limits}


def test_a_misspelt_field_fails_the_schema() -> None:
    manifest = _manifest()
    manifest["spec"]["tfReplicaSpecs"]["Chief"]["restartpolicy"] = "OnFailure"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(manifest, TFJOB_SCHEMA)
    manifest = _manifest()
    manifest["spec"]["tfReplicaSpecs"]["Workers"] = manifest["spec"]["tfReplicaSpecs"]["Worker"]
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(manifest, TFJOB_SCHEMA)


def test_job_names_are_kubernetes_names() -> None:
    for pipeline in ("rankpipe-demo", "My_Pipeline.v2", "9lives", "x" * 80):
        name = tfjob.job_name(pipeline, "0123456789abcdef", "5f3a")
        assert re.fullmatch(r"[a-z]([-a-z0-9]*[a-z0-9])?", name), name
        assert len(name) <= tfjob.MAX_NAME - 16  # room for the operator's -worker-N suffix


def test_the_job_key_is_stable_for_a_retried_task() -> None:
    inputs = {"examples": ["/minio/mlpipeline/v2/artifacts/run/RankingDataGen/1/examples"]}
    props = {"run_fn": "trainer_module.run_fn.run_fn", "custom_config": "{}"}
    assert tfjob.job_key(inputs, props) == tfjob.job_key(dict(inputs), dict(props))
    assert tfjob.job_key(inputs, {**props, "custom_config": '{"a": 1}'}) != tfjob.job_key(
        inputs, props
    )


class FakeCustomObjectsApi:
    """The CustomObjectsApi calls run_job makes, answering with a scripted job status."""

    def __init__(self, states: list[tuple[str, str]]):
        self.states = list(states)
        self.calls: list[tuple] = []

    def create_namespaced_custom_object(self, group, version, namespace, plural, body):
        self.calls.append(("create", group, version, namespace, plural, body["metadata"]["name"]))
        return body

    def get_namespaced_custom_object(self, group, version, namespace, plural, name):
        self.calls.append(("get", name))
        kind, message = self.states.pop(0) if len(self.states) > 1 else self.states[0]
        conditions = [{"type": "Created", "status": "False"}]
        if kind:
            conditions.append({"type": kind, "status": "True", "message": message})
        return {
            "status": {
                "conditions": conditions,
                "replicaStatuses": {"Chief": {"active": 1}, "Worker": {"active": 2}},
            }
        }

    def delete_namespaced_custom_object(self, group, version, namespace, plural, name, **kw):
        self.calls.append(("delete", name, kw))


def test_run_job_creates_waits_and_reports_progress() -> None:
    api = FakeCustomObjectsApi([("", ""), ("Running", ""), ("Running", ""), ("Succeeded", "")])
    lines: list[str] = []
    job = tfjob.run_job(api, _manifest(), sleep=lambda s: None, log=lines.append)
    assert job["status"]["conditions"][-1]["type"] == "Succeeded"
    name = _manifest()["metadata"]["name"]
    assert api.calls[0] == ("create", "kubeflow.org", "v1", "kubeflow-user", "tfjobs", name)
    assert not [c for c in api.calls if c[0] == "delete"]
    assert lines[0].startswith(f"TFJob kubeflow-user/{name} created: Chief x1, Worker x2")
    # One line per change, not per poll.
    assert [line.split(": ", 1)[1].split(" after")[0] for line in lines[1:]] == [
        "Pending (Chief: active 1; Worker: active 2)",
        "Running (Chief: active 1; Worker: active 2)",
        "Succeeded (Chief: active 1; Worker: active 2)",
    ]


def test_a_failed_job_raises_its_condition_message() -> None:
    message = "TFJob rankpipe-demo-trainer has failed because 1 Worker replica(s) failed."
    api = FakeCustomObjectsApi([("Running", ""), ("Failed", message)])
    with pytest.raises(tfjob.TFJobFailed, match=re.escape(message)):
        tfjob.run_job(api, _manifest(), sleep=lambda s: None, log=lambda s: None)
    assert not [c for c in api.calls if c[0] == "delete"]


def test_a_cancelled_task_deletes_the_job() -> None:
    """KFP cancels a task by deleting its pod: SIGTERM. The wait ends and the job is deleted."""
    api = FakeCustomObjectsApi([("Running", "")])

    def sleep(seconds: float) -> None:
        signal.raise_signal(signal.SIGTERM)

    with pytest.raises(tfjob.TFJobCancelled):
        tfjob.run_job(api, _manifest(), sleep=sleep, log=lambda s: None)
    name = _manifest()["metadata"]["name"]
    assert api.calls[-1] == ("delete", name, {"propagation_policy": "Foreground"})
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # the handler is put back


def test_the_replica_role_comes_from_tf_config() -> None:
    def role(cluster: dict, kind: str, index: int) -> tuple:
        tf_config = {"cluster": cluster, "task": {"type": kind, "index": index}}
        return replica.replica_role({"TF_CONFIG": json.dumps(tf_config)})

    with_chief = {"chief": ["a:1"], "worker": ["b:1", "c:1"]}
    assert role(with_chief, "chief", 0) == ("chief", 0, True)
    assert role(with_chief, "worker", 0) == ("worker", 0, False)
    assert role({"worker": ["a:1", "b:1"]}, "worker", 0) == ("worker", 0, True)
    assert role({"worker": ["a:1", "b:1"]}, "worker", 1) == ("worker", 1, False)
    assert replica.replica_role({}) == ("chief", 0, True)
    assert replica.scratch_uri("gs://b/s/Trainer/model_run/chief/", "worker", 1) == (
        "gs://b/s/Trainer/model_run/chief.worker-1"
    )


@pytest.mark.parametrize(
    "settings, message",
    [
        ({"count": 2}, "staging_dir: required"),
        ({"count": 2, "backend": "vertex"}, "vertex_project: required"),
        ({"count": 0}, "count: must be >= 1"),
        ({"backend": "tfjobs"}, "backend: 'tfjobs' is not one of tfjob, vertex"),
        ({"accelerator_count": 2}, "set accelerator_type too"),
    ],
)
def test_config_errors(settings: dict, message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        TrainerReplicasConfig(**settings)
