"""The baseline is the model served: the newest complete version under the push destination."""

from __future__ import annotations

import json
from pathlib import Path

from components.push_destination import CARD_JSON
from components.ranking_evaluator.baseline import (
    BaselineChoice,
    ServedModel,
    find_baseline,
    served_model,
)
from components.ranking_pusher.executor import push_new_version
from rankcore import lineage

SETTINGS = {"lowercase": True, "max_query_length": 16, "max_doc_length": 64}
DEMO = lineage.fingerprints(
    lineage.collection_fingerprint({"q1": "heat"}, {"q1": {"d1": 1}}, 600),
    lineage.vocabulary_fingerprint(["[PAD]", "[UNK]", "heat"]),
    SETTINGS,
)


def _saved_model(path: Path) -> Path:
    """A directory the Pusher would push: saved_model.pb plus a variables/ directory."""
    (path / "variables").mkdir(parents=True)
    (path / "variables" / "variables.index").write_bytes(b"index")
    (path / "saved_model.pb").write_bytes(b"graph")
    return path


def _card(model_uri: str, record: dict | None = DEMO):
    def files(version: str, path: str) -> dict[str, str]:
        card = {"version": version, "model": {"uri": model_uri}, "data": {"lineage": record}}
        return {CARD_JSON: json.dumps(card)}

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
    assert served == ServedModel(path=p2, version=int(v2), model_uri="m2", lineage=DEMO)
    assert find_baseline(str(destination), "some/new/model", DEMO) == BaselineChoice(served)
    # Evaluating the served model again: comparing it with its own copy says nothing.
    assert find_baseline(str(destination), "m2/", DEMO) == BaselineChoice(None)


def test_no_baseline_before_the_first_push(tmp_path: Path) -> None:
    assert served_model("") is None
    assert served_model(str(tmp_path / "missing")) is None
    (tmp_path / "empty").mkdir()
    assert find_baseline(str(tmp_path / "empty"), "m", DEMO) == BaselineChoice(None)


def test_a_version_without_a_record_is_not_compared(tmp_path: Path) -> None:
    """Nothing says which token ids it reads: skipped, with the reason, never fed ours."""
    _saved_model(tmp_path / "serving" / "12")
    choice = find_baseline(str(tmp_path / "serving"), "m", DEMO)
    assert choice.served is None
    assert choice.skipped == (
        f"the served model (version 12, {tmp_path / 'serving' / '12'}) is not compared: the "
        "served model's card records no collection or vocabulary fingerprint"
    )


def _push(tmp_path: Path, record: dict) -> str:
    destination = tmp_path / "serving"
    push_new_version(str(_saved_model(tmp_path / "m1")), str(destination), _card("m1", record))
    return str(destination)


def test_another_collection_is_not_compared(tmp_path: Path) -> None:
    other = dict(DEMO, collection=lineage.collection_fingerprint({"q1": "x"}, {"q1": {}}, 200))
    choice = find_baseline(_push(tmp_path, DEMO), "m2", other)
    assert choice.served is None
    assert choice.skipped.endswith(
        "is not compared: it was trained for another collection (its queries, judgments or "
        "corpus differ)"
    )


def test_another_vocabulary_or_truncation_is_not_compared(tmp_path: Path) -> None:
    destination = _push(tmp_path, DEMO)
    other_vocab = dict(DEMO, vocabulary=lineage.vocabulary_fingerprint(["[PAD]", "heat"]))
    assert find_baseline(destination, "m2", other_vocab).skipped.endswith(
        "it reads another vocabulary (its token ids mean other tokens)"
    )
    longer = dict(DEMO, tokenization=dict(SETTINGS, max_doc_length=128))
    assert find_baseline(destination, "m2", longer).skipped.endswith(
        "it was trained on other tokenization settings (max_doc_length 64 vs 128)"
    )
    assert find_baseline(destination, "m2", dict(DEMO)).served is not None
