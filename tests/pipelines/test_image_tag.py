"""The image tag: a hash of what the image holds, the same for `make image` and `rankpipe
compile`, the same for a copy of the checkout, and a new one when an image file changes."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pipelines import image_tag
from pipelines.config import REPO_ROOT


def _copy_image_files(dest: Path) -> Path:
    for name in image_tag.IMAGE_FILES:
        if (REPO_ROOT / name).is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(REPO_ROOT / name, dest / name)
    for package in image_tag.IMAGE_PACKAGES:
        shutil.copytree(
            REPO_ROOT / package, dest / package, ignore=shutil.ignore_patterns("__pycache__")
        )
    return dest


def test_the_tag_is_the_source(tmp_path: Path) -> None:
    copy = _copy_image_files(tmp_path / "copy")
    tag = image_tag.source_tag()
    assert tag.startswith("src-") and len(tag) == 4 + image_tag.TAG_LENGTH
    assert image_tag.source_tag(copy) == tag  # no git, no paths, no times
    (copy / "pipelines" / "__pycache__").mkdir(exist_ok=True)
    (copy / "pipelines" / "__pycache__" / "x.pyc").write_bytes(b"\0")
    assert image_tag.source_tag(copy) == tag  # what the build context leaves out
    (copy / "rankcore" / "extra.py").write_text("# a new module\n")
    assert image_tag.source_tag(copy) != tag
    assert image_tag.source_tag(target="gpu") == tag + "-gpu"
    assert image_tag.source_tag(pretrained=True) == tag + "-pretrained"
    with pytest.raises(ValueError, match="target"):
        image_tag.source_tag(target="tpu")


@pytest.mark.parametrize(
    ("image", "tagged"),
    [
        ("rankpipe", True),
        ("registry.example:5000/team/rankpipe", True),
        ("registry.example/rankpipe:1.0", False),
        ("registry.example:5000/rankpipe:1.0", False),
        ("rankpipe@sha256:" + "0" * 64, False),
    ],
)
def test_an_image_without_a_tag_gets_the_source_tag(image: str, tagged: bool) -> None:
    expected = f"{image}:{image_tag.source_tag()}" if tagged else image
    assert image_tag.with_tag(image) == expected


def test_make_image_tags_with_the_same_script() -> None:
    script = (REPO_ROOT / "deploy" / "build-image.sh").read_text()
    assert 'IMAGE=${IMAGE:-rankpipe:$(python3 pipelines/image_tag.py --target "$TARGET"' in script
    printed = subprocess.run(
        [sys.executable, "pipelines/image_tag.py", "--target", "gpu"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert printed == image_tag.source_tag(target="gpu")


def test_the_hash_covers_everything_the_dockerfile_copies() -> None:
    import re

    dockerfile = (REPO_ROOT / "deploy" / "Dockerfile").read_text()
    copied = set()
    for line in re.findall(r"^COPY (?!--from)(.+)$", dockerfile, re.M):
        copied |= {p.rstrip("/") for p in line.split()[:-1] if not p.startswith("--")}
    covered = set(image_tag.IMAGE_FILES) | set(image_tag.IMAGE_PACKAGES)
    assert copied and copied <= covered, copied - covered
