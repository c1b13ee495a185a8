"""components.push_destination: the version layout the Pusher writes and the evaluator reads.

The served-model lookup on real pushes is tested in
tests/components/ranking_evaluator/test_baseline.py; this checks the layout's own pieces."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from components import push_destination as pd


def test_versions_are_the_integer_directories(tmp_path: Path) -> None:
    assert pd.existing_versions(str(tmp_path / "missing")) == []
    for name in ("17", "3", ".staging-18-abcd", "latest"):
        (tmp_path / name).mkdir()
    assert pd.existing_versions(str(tmp_path)) == [3, 17]
    assert pd.version_path(str(tmp_path), 17) == str(tmp_path / "17")
    assert pd.version_path("gs://b/serving", "5") == "gs://b/serving/5"


def test_no_tensorflow_at_import() -> None:
    """The CLI reads the evaluator's constants, which re-export these names."""
    code = (
        "import sys, components.push_destination, components.ranking_evaluator.constants; "
        "assert 'tensorflow' not in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_evaluator_and_pusher_do_not_import_each_other() -> None:
    root = Path(pd.__file__).parent
    for package, other in (
        ("ranking_evaluator", "ranking_pusher"),
        ("ranking_pusher", "ranking_evaluator"),
    ):
        for module in (root / package).glob("*.py"):
            assert f"components.{other}" not in module.read_text(), module
