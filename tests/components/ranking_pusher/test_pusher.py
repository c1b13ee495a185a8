"""RankingPusher executor without a pipeline: versions, never-overwrite, blessing, model card."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import tensorflow as tf
from tfx.proto import pusher_pb2
from tfx.types import standard_artifacts
from tfx.utils import proto_utils

from components import artifacts
from components.ranking_pusher import component, executor, model_card

NOW = 1_800_000_000


def fake_saved_model(root: Path, tag: str) -> Path:
    """A SavedModel-shaped directory (the pusher copies files; it never loads them)."""
    (root / "variables").mkdir(parents=True)
    (root / "assets").mkdir()
    (root / "saved_model.pb").write_text(f"graph {tag}")
    (root / "variables" / "variables.index").write_text(f"index {tag}")
    (root / "assets" / "vocab.txt").write_text("[PAD]\n")
    return root


def tree(root: str) -> dict[str, str]:
    out = {}
    for dirpath, _, files in tf.io.gfile.walk(root):
        for name in files:
            path = os.path.join(dirpath, name)
            with tf.io.gfile.GFile(path) as f:
                out[os.path.relpath(path, root)] = f.read()
    return out


def test_next_version_is_now_or_past_the_highest(tmp_path: Path) -> None:
    assert executor.next_version(str(tmp_path / "missing"), now=NOW) == NOW
    for name in (str(NOW + 5), "17", ".staging-x", "notes"):
        (tmp_path / name).mkdir()
    (tmp_path / str(NOW + 9)).write_text("a file, not a version")  # listdir sees it; fine
    assert executor.existing_versions(str(tmp_path)) == [17, NOW + 5, NOW + 9]
    assert executor.next_version(str(tmp_path), now=NOW) == NOW + 10
    assert executor.next_version(str(tmp_path), now=NOW + 100) == NOW + 100


def test_push_never_overwrites_an_existing_version(tmp_path: Path) -> None:
    base = tmp_path / "serving"
    model_a = fake_saved_model(tmp_path / "a", "A")
    model_b = fake_saved_model(tmp_path / "b", "B")

    def card(version: str, path: str) -> dict[str, str]:
        return {"model_card.md": f"version {version} at {path}"}

    v1, p1 = executor.push_new_version(str(model_a), str(base), card, now=NOW)
    # Same second (or a clock set back): the standard Pusher would skip the copy yet report a
    # push; here the second model gets the next version and the first stays as it was.
    v2, p2 = executor.push_new_version(str(model_b), str(base), card, now=NOW)
    v3, _ = executor.push_new_version(str(model_b), str(base), None, now=NOW - 50)
    assert (v1, v2, v3) == (str(NOW), str(NOW + 1), str(NOW + 2))
    assert p1 == str(base / v1)
    assert tree(p1) == {
        "saved_model.pb": "graph A",
        "variables/variables.index": "index A",
        "assets/vocab.txt": "[PAD]\n",
        "model_card.md": f"version {v1} at {p1}",
    }
    assert tree(p2)["saved_model.pb"] == "graph B"
    assert tree(p2)["model_card.md"] == f"version {v2} at {p2}"
    assert sorted(os.listdir(base)) == [v1, v2, v3]  # no staging left behind


def test_push_loses_a_race_to_the_next_version(tmp_path: Path, monkeypatch) -> None:
    base = tmp_path / "serving"
    model = fake_saved_model(tmp_path / "m", "M")
    real_rename = os.rename

    def rival_first(src: str, dst: str) -> None:
        # Another pusher publishes this very version between our check and our rename.
        if dst.endswith(str(NOW)):
            fake_saved_model(Path(dst), "RIVAL")
        real_rename(src, dst)

    monkeypatch.setattr(executor.os, "rename", rival_first)
    version, path = executor.push_new_version(str(model), str(base), None, now=NOW)
    assert version == str(NOW + 1)
    assert tree(str(base / str(NOW)))["saved_model.pb"] == "graph RIVAL"
    assert tree(path)["saved_model.pb"] == "graph M"
    assert sorted(os.listdir(base)) == [str(NOW), str(NOW + 1)]


def test_push_to_a_gfile_uri(tmp_path: Path) -> None:
    # Any tf.io.gfile filesystem; ram:// stands in for gs:// or s3:// (no atomic rename).
    base = f"ram://{tmp_path.name}/serving"
    model = fake_saved_model(tmp_path / "m", "M")
    v1, p1 = executor.push_new_version(str(model), base, None, now=NOW)
    v2, p2 = executor.push_new_version(str(model), base, None, now=NOW)
    assert (p1, p2) == (f"{base}/{NOW}", f"{base}/{NOW + 1}")
    assert tree(p1) == tree(str(model))
    with pytest.raises(FileNotFoundError, match="not a SavedModel"):
        executor.push_new_version(str(tmp_path), f"ram://{tmp_path.name}/other", None)


# --------------------------------------------------------------------------- executor


def metrics_json(model_uri: str) -> dict:
    return {
        "split": "test",
        "main_metric": "ndcg_cut_10",
        "num_queries": 2,
        "candidates_scored": 20,
        "blessed": True,
        "checks": ["ndcg_cut_10 = 0.6000 (floor 0.2000)"],
        "reasons": [],
        "thresholds": {"min_values": {"ndcg_cut_10": 0.2}},
        "aggregate": {
            "first_stage": {"ndcg_cut_10": 0.5, "map": 0.25},
            "candidate": {"ndcg_cut_10": 0.6, "map": 0.3},
        },
        "comparisons": {
            "first_stage": {
                m: {
                    "mean_delta": d,
                    "ttest_p": 0.2,
                    "randomization_p": 0.25,
                    "wins": 1,
                    "ties": 1,
                    "losses": 0,
                }
                for m, d in (("ndcg_cut_10", 0.1), ("map", 0.05))
            }
        },  # fmt: skip
        "model": model_uri,
    }


def make_artifact(cls, uri: Path):
    artifact = cls()
    artifact.uri = str(uri)
    uri.mkdir(parents=True, exist_ok=True)
    return artifact


@pytest.fixture()
def pusher_io(tmp_path: Path) -> dict:
    model = make_artifact(standard_artifacts.Model, tmp_path / "model")
    fake_saved_model(tmp_path / "model" / "Format-Serving", "M")
    blessing = make_artifact(standard_artifacts.ModelBlessing, tmp_path / "blessing")
    evaluation = make_artifact(standard_artifacts.ModelEvaluation, tmp_path / "evaluation")
    (tmp_path / "evaluation" / "metrics.json").write_text(json.dumps(metrics_json(model.uri)))
    summary = make_artifact(artifacts.DatagenSummary, tmp_path / "summary")
    (tmp_path / "summary" / "summary.json").write_text(
        json.dumps({"collection": "cranfield", "documents": 1400, "queries": 225})
    )
    pushed = make_artifact(standard_artifacts.PushedModel, tmp_path / "pushed")
    destination = pusher_pb2.PushDestination(
        filesystem=pusher_pb2.PushDestination.Filesystem(base_directory=str(tmp_path / "srv"))
    )
    return {
        "inputs": {
            "model": [model],
            "model_blessing": [blessing],
            "evaluation": [evaluation],
            "datagen_summary": [summary],
        },
        "outputs": {"pushed_model": [pushed]},
        "exec": {
            "push_destination": proto_utils.proto_to_json(destination),
            "model_card_config": json.dumps(
                {"trainer": {"model": "knrm", "train_steps": 7}, "runner": {"pipeline_name": "p"}}
            ),
        },
        "base": tmp_path / "srv",
        "blessing": blessing,
        "pushed": pushed,
        "evaluation": tmp_path / "evaluation" / "metrics.json",
    }


def test_executor_does_not_push_an_unblessed_model(pusher_io: dict) -> None:
    pusher_io["blessing"].set_int_custom_property("blessed", 0)
    executor.Executor().Do(pusher_io["inputs"], pusher_io["outputs"], pusher_io["exec"])
    assert pusher_io["pushed"].get_int_custom_property("pushed") == 0
    assert not pusher_io["base"].exists()
    assert os.listdir(pusher_io["pushed"].uri) == []


def test_executor_pushes_a_blessed_model_with_its_card(pusher_io: dict) -> None:
    pusher_io["blessing"].set_int_custom_property("blessed", 1)
    executor.Executor().Do(pusher_io["inputs"], pusher_io["outputs"], pusher_io["exec"])
    pushed = pusher_io["pushed"]
    version = pushed.get_string_custom_property("pushed_version")
    destination = pushed.get_string_custom_property("pushed_destination")
    assert pushed.get_int_custom_property("pushed") == 1
    assert destination == str(pusher_io["base"] / version)
    assert pushed.get_string_custom_property("model_card") == f"{destination}/model_card.md"
    files = tree(destination)
    assert files["saved_model.pb"] == "graph M"
    card = json.loads(files["model_card.json"])
    assert card["version"] == version and card["serving_path"] == destination
    assert card["model"]["uri"] == pusher_io["inputs"]["model"][0].uri
    assert card["data"] == {"collection": "cranfield", "documents": 1400, "queries": 225}
    assert card["config"] == {"trainer": {"model": "knrm", "train_steps": 7}}
    assert card["evaluation"]["aggregate"]["candidate"] == {"ndcg_cut_10": 0.6, "map": 0.3}
    # No query list in its evaluation, no fold per query in the summary: which queries it saw
    # is not known, and a later evaluation will not compare with it.
    assert "trained_queries.json" not in files and card["trained_queries"] is None
    md = files["model_card.md"]
    assert "- the queries it trained on are not recorded: a later evaluation will not " in md
    assert md.startswith(f"# Model card: p reranker, version {version}")
    assert "| ndcg_cut_10 | 0.5000 | 0.6000 | +0.1000 | 0.2500 | 1/1/0 |" in md
    assert "- passed: ndcg_cut_10 = 0.6000 (floor 0.2000)" in md
    assert "- collection `cranfield`: 1400 documents, 225 queries" in md
    # The PushedModel artifact archives the same model and card.
    assert tree(pushed.uri) == files


def test_the_archive_copy_links_the_models_files_and_the_served_copy_does_not(
    pusher_io: dict, monkeypatch
) -> None:
    """The PushedModel archive inside the pipeline root costs no second copy of the model: its
    files are hard links to the Trainer's (counted once by `rankpipe runs`); the serving
    directory, the user's, gets files of its own; a file the card replaces is never written
    through a link; on another filesystem the archive is copied."""
    from pipelines import runs

    pusher_io["blessing"].set_int_custom_property("blessed", 1)
    model_dir = Path(pusher_io["inputs"]["model"][0].uri) / "Format-Serving"
    (model_dir / "model_card.md").write_text("the Trainer's own file")
    executor.Executor().Do(pusher_io["inputs"], pusher_io["outputs"], pusher_io["exec"])
    pushed = Path(pusher_io["pushed"].uri)
    served = Path(pusher_io["pushed"].get_string_custom_property("pushed_destination"))
    index = Path("variables") / "variables.index"
    for name in (index, Path("saved_model.pb")):
        assert os.path.samefile(model_dir / name, pushed / name)
        assert not os.path.samefile(model_dir / name, served / name)
    assert (model_dir / "model_card.md").read_text() == "the Trainer's own file"
    assert (pushed / "model_card.md").read_text().startswith("# Model card")
    # `rankpipe runs` counts a linked file once, as du does.
    root = str(pushed.parent)
    every_name = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(root) for f in fs)
    linked = sum(
        p.stat().st_size for p in pushed.rglob("*") if p.is_file() and p.stat().st_nlink > 1
    )
    assert linked == sum(p.stat().st_size for p in model_dir.rglob("*") if p.is_file()) - len(
        "the Trainer's own file"
    )
    assert runs.tree_sizes(root)[root] == runs.tree_bytes(root) == every_name - linked

    def no_links(src: str, dst: str) -> None:
        raise OSError(18, "Invalid cross-device link")

    monkeypatch.setattr(executor.os, "link", no_links)
    copied = pushed.parent / "copied"
    executor.copy_model(str(model_dir), str(copied), {}, link=True)
    assert tree(str(copied)) == tree(str(model_dir))
    assert not os.path.samefile(model_dir / index, copied / index)


def test_executor_refuses_an_evaluation_of_another_model(pusher_io: dict) -> None:
    pusher_io["blessing"].set_int_custom_property("blessed", 1)
    pusher_io["evaluation"].write_text(json.dumps(metrics_json("/somewhere/else")))
    with pytest.raises(ValueError, match="not of the model being pushed"):
        executor.Executor().Do(pusher_io["inputs"], pusher_io["outputs"], pusher_io["exec"])
    assert not pusher_io["base"].exists()


def test_component_keeps_the_standard_pusher_interface() -> None:
    from tfx import v1 as tfx
    from tfx.types import channel

    pusher = component.RankingPusher(
        model=channel.Channel(type=standard_artifacts.Model),
        model_blessing=channel.Channel(type=standard_artifacts.ModelBlessing),
        push_destination=pusher_pb2.PushDestination(
            filesystem=pusher_pb2.PushDestination.Filesystem(base_directory="/srv")
        ),
        model_card_config={"trainer": {"train_steps": 1}},
    )
    assert isinstance(pusher, tfx.components.Pusher)
    assert pusher.outputs["pushed_model"].type is standard_artifacts.PushedModel
    assert set(pusher.inputs) >= {"model", "model_blessing"}
    assert json.loads(pusher.exec_properties["model_card_config"]) == {
        "trainer": {"train_steps": 1}
    }
    with pytest.raises(ValueError, match="filesystem"):
        component.RankingPusher(
            model=channel.Channel(type=standard_artifacts.Model),
            model_blessing=channel.Channel(type=standard_artifacts.ModelBlessing),
            push_destination=pusher_pb2.PushDestination(),
        )


def _bare_card(pipeline_config: dict | None = None) -> dict:
    """A card built from no evaluation and no datagen summary (version 5)."""
    return model_card.build(
        version="5",
        serving_path="/srv/5",
        model_uri="/m",
        model_id=3,
        evaluation=None,
        evaluation_uri=None,
        datagen_summary=None,
        pipeline_config=pipeline_config,
    )


def test_card_without_evaluation_or_data_says_so() -> None:
    md = model_card.markdown(_bare_card())
    assert "- not recorded (the Pusher was given no evaluation)" in md
    assert "- not recorded (the Pusher was given no datagen summary or config)" in md


def test_executor_records_the_queries_held_out_from_the_model(pusher_io: dict) -> None:
    """Evaluated on its test split, the pushed model saw none of those queries: the Pusher
    records them (trained_queries.json), so a later run compares it on them only."""
    pusher_io["blessing"].set_int_custom_property("blessed", 1)
    metrics = metrics_json(pusher_io["inputs"]["model"][0].uri)
    metrics["per_query"] = {"candidate": {"q2": {}, "q1": {}}, "first_stage": {}}
    pusher_io["evaluation"].write_text(json.dumps(metrics))
    executor.Executor().Do(pusher_io["inputs"], pusher_io["outputs"], pusher_io["exec"])
    files = tree(pusher_io["pushed"].get_string_custom_property("pushed_destination"))
    rule = (
        "its own evaluation held out the 'test' split's 2 judged queries; the 'train' split "
        "trained it, the 'dev' split chose its checkpoint and fusion"
    )
    assert json.loads(files["trained_queries.json"]) == {"held_out": ["q1", "q2"], "rule": rule}
    card = json.loads(files["model_card.json"])
    assert card["trained_queries"] == {"held_out": 2, "rule": rule, "file": "trained_queries.json"}
    assert f"- queries it saw: {rule} (the qids: `trained_queries.json`)" in files["model_card.md"]


def test_executor_records_that_a_cross_validated_push_saw_every_query(pusher_io: dict) -> None:
    """With cross-validation the pushed model trained on every fold but the dev fold and chose
    on that one (its evaluation's figures are the fold models')."""
    pusher_io["blessing"].set_int_custom_property("blessed", 1)
    fold_of = {"q1": 0, "q2": 1, "q3": 2, "q4": 0}
    summary = {"collection": "c", "cross_validation": {"folds": 3, "fold_of": fold_of}}
    Path(pusher_io["inputs"]["datagen_summary"][0].uri, "summary.json").write_text(
        json.dumps(summary)
    )
    config = {"datagen": {"split": {"dev_fold": 1}}, "runner": {"pipeline_name": "p"}}
    pusher_io["exec"]["model_card_config"] = json.dumps(config)
    executor.Executor().Do(pusher_io["inputs"], pusher_io["outputs"], pusher_io["exec"])
    files = tree(pusher_io["pushed"].get_string_custom_property("pushed_destination"))
    saved = json.loads(files["trained_queries.json"])
    assert (saved["train"], saved["dev"], saved["held_out"]) == (["q1", "q3", "q4"], ["q2"], [])
    assert json.loads(files["model_card.json"])["trained_queries"]["train"] == 3
