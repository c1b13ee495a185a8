"""deploy/Dockerfile: what can be checked without a container engine (none on these machines).

The image's build stage installs like a developer machine (scripts/setup.sh: exactly
requirements.lock plus this project); the runtime stages copy that environment only, keep the
project where the compiled spec expects it, run as a numeric non-root user and start our KFP
entrypoint. The GPU and pretrained additions are the hashed locks. That the image builds and
runs the pipeline: tests/image (`make image-test`).
"""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

from pipelines import kubeflow_runner

REPO_ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = (REPO_ROOT / "deploy" / "Dockerfile").read_text()
SETUP = (REPO_ROOT / "scripts" / "setup.sh").read_text()


def _instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined and comments dropped."""
    text = re.sub(r"^\s*#.*\n", "", DOCKERFILE, flags=re.M).replace("\\\n", " ")
    return [
        (line.split(None, 1)[0].upper(), line.split(None, 1)[1].strip())
        for line in text.splitlines()
        if line.strip()
    ]


def _stages() -> dict[str, list[tuple[str, str]]]:
    """Stage name -> (FROM's base, then the stage's instructions), in file order."""
    stages: dict[str, list[tuple[str, str]]] = {}
    current = None
    for instruction, args in _instructions():
        if instruction == "FROM":
            base, _, name = args.partition(" AS ")
            current = stages.setdefault(name.strip(), [("FROM", base.strip())])
        elif current is not None:
            current.append((instruction, args))
    return stages


def _commands(stage: list[tuple[str, str]]) -> list[list[str]]:
    """The shell commands of a stage's RUN steps, split at `&&` (mount options dropped)."""
    commands = []
    for instruction, args in stage:
        if instruction != "RUN":
            continue
        words = args.split()
        while words and words[0].startswith("--mount="):
            words.pop(0)
        commands += [shlex.split(part) for part in " ".join(words).split("&&")]
    return commands


def _setup_variables() -> dict[str, str]:
    return dict(re.findall(r"^([A-Z_]+)=(\S+)$", SETUP, flags=re.M))


def _setup_command(word: str) -> list[str]:
    """setup.sh's command line containing `word`, with its variables substituted."""
    (line,) = [line for line in SETUP.splitlines() if word in line and not line.startswith("#")]
    for name, value in _setup_variables().items():
        line = line.replace(f"${name}", value)
    return shlex.split(line)


def test_install_is_setup_sh() -> None:
    commands = _commands(_stages()["build"])
    # The project install is setup.sh itself...
    assert ["./scripts/setup.sh"] in commands
    # ...and the cached dependency layer before it runs setup.sh's exact sync command.
    assert _setup_command("pip sync") in commands
    uv = _setup_variables()["UV_VERSION"]
    assert any(c[-1] == f"uv=={uv}" and "install" in c for c in commands)
    copied = " ".join(args for instruction, args in _stages()["build"] if instruction == "COPY")
    assert "requirements.lock" in copied and "scripts/setup.sh" in copied


def test_runtime_stages_copy_the_built_environment_only() -> None:
    stages = _stages()
    assert list(stages)[-1] == "cpu"  # the default target
    assert stages["build-gpu"][0] == ("FROM", "build")
    for variant, source in (("cpu", "build"), ("gpu", "build-gpu")):
        stage = stages[variant]
        assert stage[0] == ("FROM", "runtime")
        assert stage[1:] == [("COPY", f"--from={source} /rankpipe /rankpipe")]
    # The runtime has no compiler and no build-time downloads: only the user and directories.
    assert stages["runtime"][0] == stages["build"][0]  # the same python:3.10-slim
    runtime_commands = _commands(stages["runtime"])
    assert [c[0] for c in runtime_commands] == ["useradd", "mkdir", "chown"]
    assert any("g++" in c for c in _commands(stages["build"]))
    # The CA bundle is a build secret, never copied into a layer.
    assert "ca" not in " ".join(a for i, a in _instructions() if i == "COPY").lower().split()


def test_gpu_and_pretrained_installs_are_the_locks_by_hash() -> None:
    gpu = [c for c in _commands(_stages()["build-gpu"]) if "install" in c]
    assert gpu and all({"--no-deps", "--require-hashes"} <= set(c) for c in gpu)
    assert "requirements-gpu.lock" in gpu[0]
    # requirements-gpu.lock holds only what requirements.lock does not (scripts/lock_extra.py).
    names = lambda text: set(re.findall(r"^([a-z0-9][a-z0-9._-]*)==", text, flags=re.M))  # noqa: E731
    extra = names((REPO_ROOT / "requirements-gpu.lock").read_text())
    assert extra and all(n.startswith("nvidia-") for n in extra)
    assert not extra & names((REPO_ROOT / "requirements.lock").read_text())
    # PRETRAINED=1 installs requirements-pretrained.lock as `make pretrained` does.
    makefile = (REPO_ROOT / "Makefile").read_text().replace("\\\n", " ")
    (make_line,) = [
        line for line in makefile.splitlines() if "requirements-pretrained.lock" in line
    ]
    make_args = [w for w in shlex.split(make_line) if not w.startswith(".venv/bin/")]
    pretrained = [c for c in _commands(_stages()["build"]) if "requirements-pretrained.lock" in c]
    assert pretrained
    assert [w for w in pretrained[0] if not w.startswith(".venv/bin/")][-len(make_args) :] == (
        make_args
    )


def test_every_package_and_the_schema_are_in_the_image() -> None:
    # [tool.setuptools.packages.find] include = ["pipelines*", ...] (no tomllib on 3.10)
    pyproject = (REPO_ROOT / "pyproject.toml").read_text()
    include = re.search(r"^include = \[(.*)\]$", pyproject, flags=re.M).group(1)
    packages = [name.rstrip("*") for name in json.loads(f"[{include}]")]
    assert packages
    copies = {
        tuple(shlex.split(args))
        for instruction, args in _stages()["build"]
        if instruction == "COPY"
    }
    for directory in [*packages, "schemas"]:
        assert (f"{directory}/", f"{directory}/") in copies, directory


def test_project_root_user_and_entrypoint() -> None:
    runtime = _stages()["runtime"]
    assert ("WORKDIR", kubeflow_runner.IMAGE_PROJECT_ROOT) in runtime
    # A numeric user: clusters enforcing runAsNonRoot refuse a user name.
    users = [args for instruction, args in runtime if instruction == "USER"]
    assert users == ["1000:1000"]
    assert ["chown", "1000:1000", "/gcs", "/minio", "/s3"] in _commands(runtime)
    (entrypoint,) = [args for instruction, args in runtime if instruction == "ENTRYPOINT"]
    assert json.loads(entrypoint) == kubeflow_runner.ENTRYPOINT_COMMAND
    env = " ".join(args for instruction, args in runtime if instruction == "ENV")
    assert f"PATH={kubeflow_runner.IMAGE_PROJECT_ROOT}/.venv/bin:" in env
    # Nothing after the runtime stage changes user, entrypoint or environment.
    for variant in ("cpu", "gpu"):
        assert {i for i, _ in _stages()[variant]} == {"FROM", "COPY"}
    # The entrypoint module exists in this project (its behaviour: test_kfp_entrypoint.py).
    module = kubeflow_runner.ENTRYPOINT_COMMAND[-1]
    assert (REPO_ROOT / (module.replace(".", "/") + ".py")).is_file()
