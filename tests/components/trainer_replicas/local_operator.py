"""A local stand-in for the Kubeflow Training Operator (a test double, not shipped).

It takes a kubeflow.org/v1 TFJob manifest as the operator does (through the CustomObjectsApi
calls the TFJob executor makes: create, get, delete) and runs its replicas as local processes:

- one process per replica, Chief first then the Workers, each running the container's command
  and args (`python` is this interpreter) with the container's env plus the TF_CONFIG the
  operator gives that replica (pkg/controller.v1/tensorflow/tensorflow.go genTFConfigJSONStr:
  cluster {"chief": [...], "worker": [...]}, task {"type": "chief" | "worker", "index": i},
  environment "cloud"), with localhost ports where the operator names its services
  (<job>-chief-0.<namespace>.svc:2222);
- restartPolicy OnFailure: when a replica fails, the job is Restarting and its replicas start
  again, up to runPolicy.backoffLimit restarts, then Failed with the operator's message. On a
  cluster the operator restarts the failed pod and the other replicas, whose collectives then
  fail, restart too; here every replica is restarted at once instead of waiting for the
  collective timeout;
- the job Succeeded when every replica exited 0 (the Chief's success ends a TFJob with a Chief);
- status.conditions and status.replicaStatuses as the operator writes them.

`kill_when(predicate, replica)` SIGKILLs a replica once `predicate()` holds (a checkpoint was
written): the resume drill.
"""

from __future__ import annotations

import copy
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any


def free_ports(n: int) -> list[int]:
    socks = [socket.socket() for _ in range(n)]
    for s in socks:
        s.bind(("localhost", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


def tf_configs(manifest: dict[str, Any], ports: list[int]) -> list[tuple[str, int, dict]]:
    """(replica type, index, TF_CONFIG) of every replica, Chief first, as the operator sets
    them (localhost:<port> for its service addresses)."""
    specs = manifest["spec"]["tfReplicaSpecs"]
    cluster: dict[str, list[str]] = {}
    replicas: list[tuple[str, int]] = []
    it = iter(ports)
    for kind in ("Chief", "Worker"):
        count = int(specs.get(kind, {}).get("replicas", 1 if kind in specs else 0))
        for i in range(count):
            cluster.setdefault(kind.lower(), []).append(f"localhost:{next(it)}")
            replicas.append((kind, i))
    return [
        (
            kind,
            i,
            {
                "cluster": cluster,
                "task": {"type": kind.lower(), "index": i},
                "environment": "cloud",
            },
        )
        for kind, i in replicas
    ]


class LocalTrainingOperator:
    """CustomObjectsApi for TFJobs, running each job's replicas here (see the module doc)."""

    def __init__(
        self,
        log_dir: Path,
        env: dict[str, str] | None = None,
        command: Callable[[list[str]], list[str]] | None = None,
    ) -> None:
        self.log_dir = Path(log_dir)
        self.env = dict(os.environ if env is None else env)
        self.command = command  # rewrites a container's command (e.g. a slowed replica)
        self.jobs: dict[str, dict[str, Any]] = {}
        self.calls: list[tuple[str, str]] = []
        self.attempts: dict[str, int] = {}
        self.kills: list[tuple[Callable[[], bool], str, int]] = []
        self.killed: list[tuple[str, int, int]] = []  # (replica type, index, attempt)
        self._procs: dict[str, list[tuple[str, int, subprocess.Popen]]] = {}
        self._threads: dict[str, threading.Thread] = {}
        self._deleted: set[str] = set()

    def kill_when(self, predicate: Callable[[], bool], kind: str = "Worker", index: int = 0):
        self.kills.append((predicate, kind, index))

    # -- the CustomObjectsApi calls the executor makes ------------------------------------
    def create_namespaced_custom_object(self, group, version, namespace, plural, body):
        assert (group, version, plural) == ("kubeflow.org", "v1", "tfjobs")
        assert body["metadata"]["namespace"] == namespace
        name = body["metadata"]["name"]
        if name in self.jobs:
            raise RuntimeError(f"tfjobs.kubeflow.org {name!r} already exists")
        self.calls.append(("create", name))
        job = copy.deepcopy(body)
        job["status"] = {"conditions": [self._condition("Created", "TFJob is created.")]}
        self.jobs[name] = job
        thread = threading.Thread(target=self._run, args=(name,), daemon=True)
        self._threads[name] = thread
        thread.start()
        return copy.deepcopy(job)

    def get_namespaced_custom_object(self, group, version, namespace, plural, name):
        self.calls.append(("get", name))
        return copy.deepcopy(self.jobs[name])

    def delete_namespaced_custom_object(self, group, version, namespace, plural, name, **kw):
        self.calls.append(("delete", name))
        self._deleted.add(name)
        self._kill_all(name)
        self.jobs.pop(name, None)
        return {"status": "Success"}

    def wait(self, name: str, timeout: float = 600) -> None:
        self._threads[name].join(timeout)

    # -- the operator ----------------------------------------------------------------------
    @staticmethod
    def _condition(kind: str, message: str) -> dict[str, str]:
        reason = {"Created": "TFJobCreated", "Running": "TFJobRunning"}.get(kind, f"TFJob{kind}")
        return {"type": kind, "status": "True", "reason": reason, "message": message}

    def _set(self, name: str, kind: str, message: str, replicas: dict | None = None) -> None:
        job = self.jobs.get(name)
        if job is None:
            return
        for c in job["status"]["conditions"]:
            c["status"] = "False"
        job["status"]["conditions"].append(self._condition(kind, message))
        if replicas is not None:
            job["status"]["replicaStatuses"] = replicas

    def _start(self, name: str, manifest: dict, configs: list, attempt: int) -> None:
        procs = []
        for kind, i, tf_config in configs:
            template = manifest["spec"]["tfReplicaSpecs"][kind]["template"]
            [container] = [c for c in template["spec"]["containers"] if c["name"] == "tensorflow"]
            argv = list(container.get("command") or []) + list(container.get("args") or [])
            if argv[0] == "python":
                argv[0] = sys.executable
            if self.command is not None:
                argv = self.command(argv)
            env = dict(self.env)
            env.update({e["name"]: e.get("value", "") for e in container.get("env") or []})
            env["TF_CONFIG"] = json.dumps(tf_config)
            log = open(self.log_dir / f"{name}-{kind.lower()}-{i}-{attempt}.log", "w")
            procs.append((kind, i, subprocess.Popen(argv, env=env, stdout=log, stderr=log)))
            log.close()
        self._procs[name] = procs

    def _kill_all(self, name: str) -> None:
        for _, _, p in self._procs.get(name, []):
            if p.poll() is None:
                p.kill()
        for _, _, p in self._procs.get(name, []):
            p.wait()

    def _run(self, name: str) -> None:
        manifest = self.jobs[name]
        specs = manifest["spec"]["tfReplicaSpecs"]
        backoff = int(manifest["spec"].get("runPolicy", {}).get("backoffLimit", 0))
        total = sum(int(s.get("replicas", 1)) for s in specs.values())
        configs = tf_configs(manifest, free_ports(total))
        attempt, restarts = 0, 0
        self._start(name, manifest, configs, attempt)
        self._set(name, "Running", f"TFJob {name} is running.", self._replica_status(name))
        while name not in self._deleted:
            time.sleep(0.05)
            for predicate, kind, index in list(self.kills):
                if predicate():
                    self.kills.remove((predicate, kind, index))
                    for k, i, p in self._procs[name]:
                        if (k, i) == (kind, index) and p.poll() is None:
                            p.send_signal(signal.SIGKILL)
                            self.killed.append((k, i, attempt))
            codes = [(k, i, p.poll()) for k, i, p in self._procs[name]]
            failed = [(k, i, c) for k, i, c in codes if c not in (None, 0)]
            if failed:
                kind, i, code = failed[0]
                policy = specs[kind].get("restartPolicy", "Never")
                if policy in ("OnFailure", "Always") and restarts < backoff:
                    restarts += 1
                    self._set(
                        name,
                        "Restarting",
                        f"TFJob {name} is restarting because {kind.lower()}-{i} exited {code}.",
                    )
                    self._kill_all(name)
                    attempt += 1
                    self.attempts[name] = attempt
                    self._start(name, manifest, configs, attempt)
                    self._set(name, "Running", f"TFJob {name} is running.")
                    continue
                self._kill_all(name)
                self._set(
                    name,
                    "Failed",
                    f"TFJob {name} has failed because {len(failed)} {kind} replica(s) failed.",
                    self._replica_status(name),
                )
                return
            if all(c == 0 for _, _, c in codes):
                self._set(
                    name,
                    "Succeeded",
                    f"TFJob {name} successfully completed.",
                    self._replica_status(name),
                )
                return

    def _replica_status(self, name: str) -> dict[str, dict[str, int]]:
        out: dict[str, dict[str, int]] = {}
        for kind, _, p in self._procs.get(name, []):
            s = out.setdefault(kind, {})
            code = p.poll()
            key = "active" if code is None else ("succeeded" if code == 0 else "failed")
            s[key] = s.get(key, 0) + 1
        return out
