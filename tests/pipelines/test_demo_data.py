"""The demo collection is generated under the outputs directory only, never over a user's
files, and again when its settings change."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from pipelines import demo_data
from pipelines.config import CONFIG_DIR, load_config
from rankcore.config_loader import ConfigError


def _demo_config(tmp_path: Path, directory: Path) -> Path:
    data = yaml.safe_load((CONFIG_DIR / "demo.yaml").read_text())
    for key, name in (("documents", "corpus.jsonl"), ("queries", "queries.jsonl")):
        data["collection"][key] = str(directory / name)
    data["collection"]["qrels"] = str(directory / "qrels.txt")
    path = tmp_path / "demo-elsewhere.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_a_demo_outside_the_outputs_directory_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Even with the demo's own file names: the user's directory is not the demo's."""
    monkeypatch.setenv("RANKPIPE_OUTPUTS", str(tmp_path / "outputs"))
    with pytest.raises(ConfigError, match="goes under the outputs directory") as e:
        load_config(_demo_config(tmp_path, tmp_path / "mine"))
    assert "set collection.demo.enabled: false" in str(e.value)
    assert not (tmp_path / "mine").exists()
    load_config(_demo_config(tmp_path, tmp_path / "outputs" / "demo-collection"))


def test_the_generator_never_overwrites_files_it_did_not_write(tmp_path: Path) -> None:
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "corpus.jsonl").write_text('{"_id": "1", "text": "my only copy"}\n')
    with pytest.raises(demo_data.NotADemoDirectory, match="did not write"):
        demo_data.generate(mine, num_documents=20, num_queries=10)
    assert [p.name for p in mine.iterdir()] == ["corpus.jsonl"]
    assert (mine / "corpus.jsonl").read_text() == '{"_id": "1", "text": "my only copy"}\n'
    assert not list(tmp_path.glob(".*partial*"))


def test_changed_settings_make_the_collection_again(tmp_path: Path) -> None:
    out = tmp_path / "demo"
    demo_data.generate(out, seed=1, num_documents=20, num_queries=10)
    first = (out / "corpus.jsonl").read_text()
    assert demo_data.is_current(out, 1, 20, 10)
    assert not demo_data.is_current(out, 2, 20, 10)
    demo_data.generate(out, seed=2, num_documents=20, num_queries=10)  # over its own: allowed
    assert (out / "corpus.jsonl").read_text() != first
    assert demo_data.is_current(out, 2, 20, 10)
