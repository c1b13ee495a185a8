"""deploy/Dockerfile: what can be checked without a container engine (none on these machines).

The image installs like a developer machine (scripts/setup.sh: exactly requirements.lock plus
this project), keeps the project where the compiled spec expects it, runs as a non-root user
and starts our KFP entrypoint.
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


def _setup_variables() -> dict[str, str]:
    return dict(re.findall(r"^([A-Z_]+)=(\S+)$", SETUP, flags=re.M))


def _setup_command(word: str) -> list[str]:
    """setup.sh's command line containing `word`, with its variables substituted."""
    (line,) = [line for line in SETUP.splitlines() if word in line and not line.startswith("#")]
    for name, value in _setup_variables().items():
        line = line.replace(f"${name}", value)
    return shlex.split(line)


def test_install_is_setup_sh() -> None:
    runs = [args for instruction, args in _instructions() if instruction == "RUN"]
    # The project install is setup.sh itself...
    assert any(shlex.split(run)[0] == "./scripts/setup.sh" for run in runs)
    # ...and the cached dependency layer before it runs setup.sh's exact sync command.
    commands = [shlex.split(part) for run in runs for part in run.split("&&")]
    assert _setup_command("pip sync") in commands
    uv = _setup_variables()["UV_VERSION"]
    assert any(c[-1] == f"uv=={uv}" and "install" in c for c in commands)
    copied = " ".join(args for instruction, args in _instructions() if instruction == "COPY")
    assert "requirements.lock" in copied and "scripts/setup.sh" in copied


def test_every_package_and_the_schema_are_in_the_image() -> None:
    # [tool.setuptools.packages.find] include = ["pipelines*", ...] (no tomllib on 3.10)
    pyproject = (REPO_ROOT / "pyproject.toml").read_text()
    include = re.search(r"^include = \[(.*)\]$", pyproject, flags=re.M).group(1)
    packages = [name.rstrip("*") for name in json.loads(f"[{include}]")]
    assert packages
    copies = {
        tuple(shlex.split(args)) for instruction, args in _instructions() if instruction == "COPY"
    }
    for directory in [*packages, "schemas"]:
        assert (f"{directory}/", f"{directory}/") in copies, directory


def test_project_root_user_and_entrypoint() -> None:
    instructions = _instructions()
    assert ("WORKDIR", kubeflow_runner.IMAGE_PROJECT_ROOT) in instructions
    users = [args for instruction, args in instructions if instruction == "USER"]
    assert users and users[-1] not in ("root", "0")
    (entrypoint,) = [args for instruction, args in instructions if instruction == "ENTRYPOINT"]
    assert json.loads(entrypoint) == kubeflow_runner.ENTRYPOINT_COMMAND
    env = " ".join(args for instruction, args in instructions if instruction == "ENV")
    assert f"PATH={kubeflow_runner.IMAGE_PROJECT_ROOT}/.venv/bin:" in env
    # The entrypoint module exists in this project (its behaviour: test_kfp_entrypoint.py).
    module = kubeflow_runner.ENTRYPOINT_COMMAND[-1]
    assert (REPO_ROOT / (module.replace(".", "/") + ".py")).is_file()
