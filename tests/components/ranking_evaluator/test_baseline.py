"""The baseline is the model served: the newest complete version under the push destination."""

from __future__ import annotations

import json
from pathlib import Path

from components.ranking_evaluator.baseline import ServedModel, find_baseline, served_model
from components.ranking_pusher import model_card
from components.ranking_pusher.executor import push_new_version


def _saved_model(path: Path) -> Path:
    """A directory the Pusher would push: saved_model.pb plus a variables/ directory."""
    (path / "variables").mkdir(parents=True)
    (path / "variables" / "variables.index").write_bytes(b"index")
    (path / "saved_model.pb").write_bytes(b"graph")
    return path


def _card(model_uri: str):
    def files(version: str, path: str) -> dict[str, str]:
        return {model_card.CARD_JSON: json.dumps({"version": version, "model": {"uri": model_uri}})}

    return files


def test_newest_pushed_version_is_the_baseline(tmp_path: Path) -> None:
    destination = tmp_path / "serving"
    # Two real pushes (the Pusher's own versioning and layout), then debris the lookup skips.
    v1, p1 = push_new_version(str(_saved_model(tmp_path / "m1")), str(destination), _card("m1"))
    v2, p2 = push_new_version(str(_saved_model(tmp_path / "m2")), str(destination), _card("m2"))
    assert int(v2) > int(v1)
    incomplete = destination / str(int(v2) + 5)  # an object-store push cut short: no .pb
    (incomplete / "variables").mkdir(parents=True)
    (destination / f".staging-{int(v2) + 9}-abcd").mkdir()  # not an integer: not a version
    (destination / "notes.txt").write_text("not a version")

    served = served_model(str(destination))
    assert served == ServedModel(path=p2, version=int(v2), model_uri="m2")
    assert find_baseline(str(destination), "some/new/model") == served
    # Evaluating the served model again: comparing it with its own copy says nothing.
    assert find_baseline(str(destination), "m2/") is None


def test_no_baseline_before_the_first_push(tmp_path: Path) -> None:
    assert served_model("") is None
    assert served_model(str(tmp_path / "missing")) is None
    (tmp_path / "empty").mkdir()
    assert find_baseline(str(tmp_path / "empty"), "m") is None


def test_a_version_without_a_card_is_still_the_baseline(tmp_path: Path) -> None:
    _saved_model(tmp_path / "serving" / "12")
    served = find_baseline(str(tmp_path / "serving"), "m")
    assert served == ServedModel(path=str(tmp_path / "serving" / "12"), version=12, model_uri=None)
