"""The container image's tag: a hash of what deploy/Dockerfile copies into the image.

`rankpipe compile` appends it to a `runner.image` without a tag (the default, `rankpipe`), and
`make image` (deploy/build-image.sh, which runs this file with any python3) tags the image it
builds with it, so a compiled spec names the image built from the same source, never a moving
`latest`. Change a file the image holds and both move to the new tag together.

Standard library only (the build script runs it before any virtual environment exists); it
reads the files themselves, not git, so a copy of the checkout gives the same tag.

    python3 pipelines/image_tag.py [--target cpu|gpu] [--pretrained 0|1]   # prints the tag
"""

from __future__ import annotations

import argparse
import hashlib
import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
# What deploy/Dockerfile COPYs (its build stages; the locks of the optional layers included).
IMAGE_FILES = (
    "deploy/Dockerfile",
    "pyproject.toml",
    "README.md",
    "requirements.lock",
    "requirements-gpu.lock",
    "requirements-pretrained.lock",
    "scripts/setup.sh",
)
IMAGE_PACKAGES = ("pipelines", "components", "trainer_module", "rankcore", "schemas")
# deploy/Dockerfile.dockerignore leaves these out of the build context.
_SKIPPED_DIRS = {"__pycache__"}
_SKIPPED_SUFFIXES = (".pyc", ".egg-info")
TAG_LENGTH = 12


def _image_files(root: Path) -> list[str]:
    files = [name for name in IMAGE_FILES if (root / name).is_file()]
    for package in IMAGE_PACKAGES:
        for folder, dirs, names in os.walk(root / package):
            dirs[:] = sorted(
                d for d in dirs if d not in _SKIPPED_DIRS and not d.endswith(_SKIPPED_SUFFIXES)
            )
            for name in names:
                if not name.endswith(_SKIPPED_SUFFIXES):
                    files.append((Path(folder) / name).relative_to(root).as_posix())
    return sorted(files)


def source_hash(root: Path = REPO_ROOT) -> str:
    """sha256 over each image file's path and content hash, sorted by path (hex)."""
    digest = hashlib.sha256()
    for name in _image_files(root):
        content = hashlib.sha256((root / name).read_bytes()).hexdigest()
        digest.update(f"{name}\0{content}\n".encode())
    return digest.hexdigest()


def source_tag(root: Path = REPO_ROOT, target: str = "cpu", pretrained: bool = False) -> str:
    """The image tag: `src-<12 hex of source_hash>`, `-gpu` for the CUDA variant and
    `-pretrained` with the pretrained checkpoints (deploy/Dockerfile's build arguments)."""
    if target not in ("cpu", "gpu"):
        raise ValueError(f"target: {target!r}: one of cpu, gpu")
    tag = f"src-{source_hash(root)[:TAG_LENGTH]}"
    return tag + ("-gpu" if target == "gpu" else "") + ("-pretrained" if pretrained else "")


def with_tag(image: str, root: Path = REPO_ROOT) -> str:
    """`image` as given when it names a tag or digest; otherwise with source_tag() appended."""
    last = image.rsplit("/", 1)[-1]
    if "@" in image or ":" in last:
        return image
    return f"{image}:{source_tag(root)}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--target", default="cpu", choices=("cpu", "gpu"))
    parser.add_argument("--pretrained", default="0", choices=("0", "1"))
    args = parser.parse_args(argv)
    print(source_tag(target=args.target, pretrained=args.pretrained == "1"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
