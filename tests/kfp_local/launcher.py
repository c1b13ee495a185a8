"""The KFP v2 launcher of the local backend (component/launcher_v2.go: downloadArtifacts,
compileCmdAndArgs, the command, mergeRuntimeArtifacts, uploadOutputArtifacts) and its object
store (objectstore/object_store.go), read from kubeflow/pipelines backend/src/v2 at 7b70c7b.

A mixin of LocalKfpBackend (backend.py), which holds the state it reads (the store, pods,
timeout) and records the outputs in MLMD."""

from __future__ import annotations

import copy
import json
import logging
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from google.protobuf import json_format
from kfp.pipeline_spec import pipeline_spec_pb2 as pb

from kfp_local.pods import Pod
from kfp_local.records import LOGS_KEY, Artifact, BackendError, TaskResult
from pipelines import kfp_entrypoint


class Launcher:
    """The launcher's half of a task, in a fresh pod: download inputs, run the command, merge the
    ExecutorOutput into the provisioned outputs, upload them, record them (backend.py)."""

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
