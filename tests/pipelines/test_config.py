"""Config loading: every broken config fails before any component runs, naming key and file."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from pipelines.config import (
    CONFIG_DIR,
    PATH_DEFAULTS,
    PipelineConfig,
    load_config,
)
from rankcore.config_loader import ConfigError
from trainer_module.pretrained import PRETRAINED

SHIPPED = sorted(CONFIG_DIR.glob("*.yaml"))


def _write(tmp_path: Path, data: dict) -> Path:
    path = tmp_path / "broken.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def _demo_data(**changes) -> dict:
    data = yaml.safe_load((CONFIG_DIR / "demo.yaml").read_text())
    for key, value in changes.items():
        node = data
        *parents, leaf = key.split(".")
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = value
    return data


@pytest.fixture
def fake_minilm(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """${RANKPIPE_MINILM} pointing at a directory with the checkpoint's file names (loading a
    config only checks that they exist; CI has no `make pretrained`)."""
    ckpt = tmp_path / "minilm"
    ckpt.mkdir()
    for name in ("model.safetensors", "vocab.txt", "config.json"):
        (ckpt / name).write_text("")
    monkeypatch.setenv("RANKPIPE_MINILM", str(ckpt))
    mpnet = tmp_path / "mpnet"  # and all-mpnet-base-v2's (cranfield.yaml's companion)
    mpnet.mkdir()
    for name in ("model.safetensors", "vocab.txt", "config.json"):
        (mpnet / name).write_text("")
    monkeypatch.setenv("RANKPIPE_MPNET", str(mpnet))
    return ckpt


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.name)
def test_shipped_configs_load(path: Path, shared_data: Path, fake_minilm: Path) -> None:
    config = load_config(path)
    assert isinstance(config, PipelineConfig)
    assert config.runner.pipeline_name.startswith("rankpipe-")
    assert Path(config.runner.pipeline_root).is_absolute()
    # The main metric is always among the measures the evaluator computes.
    assert config.evaluator.main_metric in config.evaluator.measures


def test_cranfield_paths_resolve_to_shared_data(shared_data: Path, fake_minilm: Path) -> None:
    config = load_config("cranfield")
    assert Path(config.collection.documents) == shared_data / "cranfield" / "cran.all.1400"
    assert config.collection.documents_format == "cranfield"
    assert config.trainer.model == "dual_encoder" and config.trainer.ranking.fusion.mode == "tuned"
    assert config.trainer.dual_encoder.checkpoint_dir == str(fake_minilm)
    assert config.datagen.vocab.vocab_file == str(fake_minilm / "vocab.txt")


@pytest.mark.parametrize("name", ["cranfield", "msmarco-subset"])
def test_pretrained_configs_name_make_pretrained_when_the_extra_is_missing(
    name: str, shared_data: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("RANKPIPE_MINILM", raising=False)
    monkeypatch.setitem(PATH_DEFAULTS, "RANKPIPE_MINILM", PRETRAINED[0].missing)
    with pytest.raises(ConfigError, match=r"not installed; run `make pretrained`") as e:
        load_config(name)
    assert f"{name}.yaml: " in str(e.value) and "datagen.vocab.vocab_file" in str(e.value)


def test_default_gate_refuses_a_regression_and_null_switches_it_off() -> None:
    config = load_config("demo")
    assert config.evaluator.min_delta_vs_first_stage == 0.0
    assert config.evaluator.min_delta_vs_baseline == 0.0
    off = load_config("demo", ["evaluator.min_delta_vs_first_stage=null"])
    assert off.evaluator.min_delta_vs_first_stage is None


def test_override_changes_type_checked_value() -> None:
    config = load_config("demo", ["trainer.learning_rate=3e-4", "datagen.sampling.mode=listwise"])
    assert config.trainer.learning_rate == pytest.approx(3e-4)
    assert config.datagen.sampling.mode == "listwise"


def test_integer_accepted_for_float_but_not_string_for_int() -> None:
    assert load_config("demo", ["trainer.learning_rate=1"]).trainer.learning_rate == 1.0
    with pytest.raises(ConfigError, match=r"trainer\.train_steps: expected an integer"):
        load_config("demo", ["trainer.train_steps=many"])


@pytest.mark.parametrize(
    ("changes", "pattern"),
    [
        ({"trainer.learnig_rate": 0.1}, r"unknown key 'trainer\.learnig_rate'.*learning_rate"),
        ({"datagen.max_doc_length": "long"}, r"datagen\.max_doc_length: expected an integer"),
        ({"datagen.sampling.mode": "triplet"}, r"datagen\.sampling\.mode: 'triplet' is not one of"),
        ({"datagen.max_query_length": 0}, r"datagen\.max_query_length: must be > 0"),
        ({"evaluator.main_metric": "P_7"}, r"evaluator\.main_metric: 'P_7' is not in measures"),
        ({"runner.beam.extra_args": "--foo"}, r"runner\.beam\.extra_args: expected a list"),
    ],
)
def test_broken_config_names_file_and_key(tmp_path: Path, changes: dict, pattern: str) -> None:
    path = _write(tmp_path, _demo_data(**changes))
    with pytest.raises(ConfigError, match=pattern) as info:
        load_config(path)
    message = str(info.value)
    assert message.startswith(str(path))
    assert "\n" not in message


def test_training_lists_and_frozen_documents_go_together(tmp_path: Path) -> None:
    """Whole candidate lists (datagen.sampling.mode lists) are what the frozen-documents recipe
    trains on (its train_data), and no other recipe does: either without the other is refused
    before any component runs, naming both keys; zero-shot (train_steps 0) reads no train
    split, and refuses the frozen-documents recipe (which trains)."""
    frozen = {
        "trainer.model": "dual_encoder",
        "trainer.dual_encoder": {"checkpoint_dir": str(tmp_path)},
        "trainer.recipe": {"type": "frozen_documents"},
        "trainer.loss": "listwise_softmax",
    }
    path = _write(tmp_path, _demo_data(**frozen))
    pattern = r"trainer\.recipe\.type frozen_documents .*set datagen\.sampling\.mode to lists"
    with pytest.raises(ConfigError, match=pattern):
        load_config(path, check_inputs=False)
    path = _write(tmp_path, _demo_data(**{"datagen.sampling.mode": "lists"}))
    pattern = (
        r"datagen\.sampling\.mode: lists .*trainer\.recipe\.type sampled_groups does not "
        r"train on \(only trainer\.recipe\.type frozen_documents\)"
    )
    with pytest.raises(ConfigError, match=pattern):
        load_config(path, check_inputs=False)
    path = _write(tmp_path, _demo_data(**frozen, **{"datagen.sampling.mode": "lists"}))
    assert load_config(path, check_inputs=False).datagen.sampling.mode == "lists"
    zero_shot = {"datagen.sampling.mode": "lists", "trainer.train_steps": 0}
    # Zero-shot of the frozen-documents recipe: the same model (frozen tower) at step 0.
    path = _write(tmp_path, _demo_data(**{**frozen, **zero_shot}))
    loaded = load_config(path, check_inputs=False).trainer
    assert (loaded.train_steps, loaded.recipe.type) == (0, "frozen_documents")
    dual = {k: v for k, v in frozen.items() if k != "trainer.recipe"}
    path = _write(tmp_path, _demo_data(**{**dual, **zero_shot}))
    assert load_config(path, check_inputs=False).trainer.train_steps == 0


def test_a_moved_recipe_key_names_its_new_place(tmp_path: Path) -> None:
    """trainer.dual_encoder.frozen_documents moved into the recipe section: the file and a
    --set both name where it is now."""
    moved = {"trainer.dual_encoder": {"checkpoint_dir": "x", "frozen_documents": True}}
    path = _write(tmp_path, _demo_data(**moved))
    pattern = r"trainer\.dual_encoder\.frozen_documents is now trainer\.recipe\.type: frozen"
    with pytest.raises(ConfigError, match=pattern):
        load_config(path, check_inputs=False)
    path = _write(tmp_path, _demo_data())
    with pytest.raises(
        ConfigError,
        match=r"--set trainer\.dual_encoder\.companion_weight: .*is "
        r"now trainer\.recipe\.frozen_documents\.companion_weight",
    ):
        load_config(path, ["trainer.dual_encoder.companion_weight=0.3"], check_inputs=False)


def test_missing_input_file_names_key(tmp_path: Path, shared_data: Path) -> None:
    data = yaml.safe_load((CONFIG_DIR / "cranfield-knrm.yaml").read_text())
    data["collection"]["qrels"] = str(tmp_path / "nope.qrels")
    path = _write(tmp_path, data)
    with pytest.raises(ConfigError, match=r"collection\.qrels: no such file: .*nope\.qrels"):
        load_config(path)


def test_missing_hybrid_checkpoint_names_key(tmp_path: Path, shared_data: Path) -> None:
    data = yaml.safe_load((CONFIG_DIR / "cranfield-knrm.yaml").read_text())
    data["datagen"]["hybrid"] = {"checkpoint_dir": str(tmp_path / "no-ckpt")}
    path = _write(tmp_path, data)
    pattern = r"datagen\.hybrid\.checkpoint_dir: no such file: .*no-ckpt/model\.safetensors"
    with pytest.raises(ConfigError, match=pattern):
        load_config(path)


def test_missing_collection_section(tmp_path: Path) -> None:
    path = _write(tmp_path, {"trainer": {"train_steps": 5}})
    with pytest.raises(ConfigError, match="missing section 'collection'"):
        load_config(path)


def test_yaml_syntax_error_names_line(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("collection:\n  name: x\n  documents: [unclosed\n")
    with pytest.raises(ConfigError, match=r"bad\.yaml:\d+: invalid YAML"):
        load_config(path)


def test_unset_environment_variable_is_named(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.delenv("RANKPIPE_NOPE", raising=False)
    path = _write(tmp_path, _demo_data(**{"pusher.destination": "${RANKPIPE_NOPE}/x"}))
    with pytest.raises(ConfigError, match="pusher.destination: environment variable RANKPIPE_NOPE"):
        load_config(path)


def _rankpipe(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "pipelines.cli", *args], capture_output=True, text=True, check=False
    )


def test_cli_config_show_prints_resolved_config() -> None:
    result = _rankpipe("config", "show", "demo", "--set", "trainer.batch_size=8")
    assert result.returncode == 0, result.stderr
    shown = yaml.safe_load(result.stdout)
    assert shown["trainer"]["batch_size"] == 8
    assert shown["collection"]["documents"].endswith("demo-collection/corpus.jsonl")


def test_cli_broken_config_is_one_line_error(tmp_path: Path) -> None:
    path = _write(tmp_path, _demo_data(**{"trainer.optimiser": "sgd"}))
    result = _rankpipe("run", str(path))
    assert result.returncode == 2
    errors = [line for line in result.stderr.splitlines() if line.startswith("rankpipe:")]
    assert errors == [f"rankpipe: config error: {path}: unknown key 'trainer.optimiser'"]


def _binary_beir(tmp_path: Path, shared_data: Path) -> Path:
    """Cranfield's own queries and documents, its judgments made binary (graded -> 1, 0 stays
    0), in the BEIR qrels layout: what CISI or most BEIR collections look like."""
    qrels = tmp_path / "binary-qrels.tsv"
    lines = ["query-id\tcorpus-id\tscore"]
    for line in (shared_data / "cranfield" / "cranqrel").read_text().split("\n"):
        if line.strip():
            qid, docid, code = line.split()
            lines.append(f"{qid}\t{docid}\t{int(0 < int(code) < 5)}")
    qrels.write_text("\n".join(lines) + "\n")
    return qrels


def test_threshold_no_train_judgment_reaches_is_a_config_error(
    tmp_path: Path, shared_data: Path
) -> None:
    """The shipped threshold 2 on a collection judged 0/1 (issue 17): refused before any
    component runs, naming the key, the grades found and a value that works."""
    data = yaml.safe_load((CONFIG_DIR / "cranfield-knrm.yaml").read_text())
    data["collection"]["qrels"] = str(_binary_beir(tmp_path, shared_data))
    data["collection"]["qrels_format"] = "beir_qrels"
    path = _write(tmp_path, data)
    with pytest.raises(ConfigError) as info:
        load_config(path)
    message = str(info.value)
    assert message.startswith(f"{path}: datagen.sampling.positive_threshold: 2 leaves the train")
    assert "grades 0 (" in message and "1 (" in message and "use 1 or auto" in message
    config = load_config(path, ["datagen.sampling.positive_threshold=auto"])
    assert config.datagen.sampling.positive_threshold == "auto"
    result = _rankpipe("run", str(path))
    assert result.returncode == 2
    assert "positive_threshold: 2 leaves the train split" in result.stderr


def test_shipped_recipe_loads_on_a_binary_beir_collection(
    tmp_path: Path, binary_beir: dict[str, str], fake_minilm: Path
) -> None:
    """Issue 17: the shipped recipe (cranfield.yaml) with only its `collection.*` keys pointed
    at a collection judged 0/1 in the BEIR layout loads with no extra flags: its threshold is the
    default, auto, which finds 1 (msmarco-subset.yaml keeps 2, chosen on its dev queries)."""
    data = yaml.safe_load((CONFIG_DIR / "cranfield.yaml").read_text())
    assert "positive_threshold" not in data["datagen"]["sampling"]
    data["collection"].update(binary_beir)
    config = load_config(_write(tmp_path, data))
    assert config.datagen.sampling.positive_threshold == "auto"
    assert config.collection.qrels == binary_beir["qrels"]


def test_threshold_is_an_integer_or_auto(tmp_path: Path) -> None:
    for value, pattern in (
        ("high", r"positive_threshold: expected an integer or 'auto', got str 'high'"),
        (0, r"positive_threshold: must be > 0, got 0"),
    ):
        path = _write(tmp_path, _demo_data(**{"datagen.sampling.positive_threshold": value}))
        with pytest.raises(ConfigError, match=pattern):
            load_config(path)


def test_a_distributed_beam_runner_needs_object_store_locations(tmp_path: Path) -> None:
    """Its workers open the pipeline root's artifacts, the documents and the served baseline
    (docs/datagen.md, "Distributed runners"): a local path is a config error naming the key."""
    dataflow = ["--runner=DataflowRunner", "--project=p", "--temp_location=gs://b/t"]
    # The demo is generated on local disk only: these read a collection from the object store.
    base = {
        "collection.demo.enabled": False,
        "collection.queries": "gs://b/collection/queries.jsonl",
        "collection.qrels": "gs://b/collection/qrels.txt",
    }
    remote = {
        "runner.pipeline_root": "gs://b/root",
        "collection.documents": "gs://b/collection/corpus.jsonl",
        "pusher.destination": "gs://b/serving",
    }
    for local_key in remote:
        local_corpus = tmp_path / "corpus.jsonl"
        local_corpus.write_text("")
        changes = {**base, "collection.documents": str(local_corpus)}
        changes.update({k: v for k, v in remote.items() if k != local_key})
        path = _write(tmp_path, _demo_data(**{"runner.beam.extra_args": dataflow, **changes}))
        with pytest.raises(
            ConfigError,
            match=rf"{re.escape(local_key)}: '/.*' is a path on this machine, and the workers "
            r"of the Beam runner DataflowRunner \(runner\.beam\.extra_args\) may run elsewhere",
        ):
            load_config(path)
    load_config(
        _write(tmp_path, _demo_data(**{"runner.beam.extra_args": dataflow, **base, **remote}))
    )
    # Workers on this machine: local paths are fine, as without --runner.
    loopback = ["--runner=PortableRunner", "--job_endpoint=embed", "--environment_type=LOOPBACK"]
    load_config(_write(tmp_path, _demo_data(**{"runner.beam.extra_args": loopback})))
    # An EXTERNAL worker pool whose workers mount tmp_path at the same path: local paths under
    # it are the workers' too; one outside it is still refused, naming the flag.
    (tmp_path / "corpus.jsonl").write_text('{"_id": "d1", "title": "", "text": "a wing"}\n')
    external = [
        "--runner=PortableRunner",
        "--job_endpoint=embed",
        "--environment_type=EXTERNAL",
        "--environment_config=localhost:50000",
        f"--rankpipe_shared_mount={tmp_path}",
    ]
    shared = {
        **base,
        "runner.beam.extra_args": external,
        "collection.documents": str(tmp_path / "corpus.jsonl"),
        "runner.pipeline_root": str(tmp_path / "root"),
        "pusher.destination": str(tmp_path / "serving"),
    }
    load_config(_write(tmp_path, _demo_data(**shared)))
    outside = {**shared, "pusher.destination": "/elsewhere/serving"}
    with pytest.raises(
        ConfigError,
        match=r"pusher\.destination: '/elsewhere/serving' is a path on this machine, .*"
        r"\(environment EXTERNAL\).*--rankpipe_shared_mount=DIR",
    ):
        load_config(_write(tmp_path, _demo_data(**outside)))


@pytest.mark.parametrize(
    "overrides, pattern",
    [
        (
            ["datagen.split.num_folds=4"],
            r"evaluator.cross_validation.folds\) needs datagen.split.num_folds=5 .*got 4",
        ),
        (
            [
                "datagen.split.method=explicit",
                "datagen.split.train_qids=a",
                "datagen.split.dev_qids=b",
                "datagen.split.test_qids=c",
            ],
            r"evaluator.cross_validation.folds\) needs datagen.split.method kfold .*'explicit'",
        ),
        (["evaluator.cross_validation.folds=2"], r"3 to 10 folds"),
    ],
)
def test_cross_validation_contradictions_name_both_keys(overrides: list, pattern: str) -> None:
    folds = (
        []
        if any("cross_validation" in o for o in overrides)
        else ["evaluator.cross_validation.folds=5"]
    )
    with pytest.raises(ConfigError, match=pattern):
        load_config("demo", [*folds, *overrides], check_inputs=False)


def test_corpus_case_folding_agrees_where_both_read_the_vectors(fake_minilm: Path) -> None:
    """Hybrid retrieval and a frozen document tower read the same corpus vectors, tokenized
    once: their case folding must agree (pipelines/config_checks.py check_corpus_case)."""
    both = ["datagen.hybrid.checkpoint_dir=${RANKPIPE_MINILM}", "datagen.hybrid.lowercase=false"]
    with pytest.raises(ConfigError, match=r"datagen\.hybrid\.lowercase \(False\) differs"):
        load_config("cranfield", both, check_inputs=False)
    # hybrid retrieval alone reads them: its own case folding is the encoder's
    load_config(
        "cranfield",
        [*both, "trainer.recipe=null", "datagen.sampling.mode=listwise"],
        check_inputs=False,
    )


def test_a_companion_weight_chosen_after_training_needs_one_trainer(fake_minilm: Path) -> None:
    """recipe.frozen_documents.companion_weights is chosen by each Trainer on its dev queries:
    refused with cross-validation fold branches (whose models take their frozen parts from the
    served model) and beside a Tuner searching companion_weight, naming both keys."""
    weights = "trainer.recipe.frozen_documents.companion_weights=[0.3, 0.5]"
    with pytest.raises(ConfigError, match=r"companion_weights: each cross-validation fold's"):
        load_config("cranfield", [weights], check_inputs=False)
    space = "tuner.space={train_steps: [0, 2], recipe.frozen_documents.companion_weight: [0.3]}"
    with pytest.raises(ConfigError, match=r"companion_weights: .* would never be served"):
        load_config("nfcorpus", [space], check_inputs=False)
    frozen = load_config("nfcorpus", check_inputs=False).trainer.recipe.frozen_documents
    assert frozen.companion_weights and frozen.companion_weight in frozen.companion_weights
