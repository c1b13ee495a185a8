"""Errors name the real cause (issue 37, item 5): each mistake a new user made, on a small real
collection, gets a message naming the file (and line) or the key that is wrong, and a fix that
works; several config problems are reported at once."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from components.ranking_datagen import collection as collection_io
from components.ranking_datagen.readers import BadRecordError, EmptyInputError
from pipelines.config import load_config
from pipelines.console import config_fix, describe_error
from rankcore import config_loader
from rankcore.config_loader import ConfigError


def _collection(root: Path, queries: bool = True, qrels: str | None = None) -> dict:
    """A BEIR collection of 30 documents, 12 queries judged 1 and 0: corpus.jsonl,
    queries.jsonl (empty when not `queries`), qrels/test.tsv (or the `qrels` text)."""
    (root / "qrels").mkdir(parents=True, exist_ok=True)
    with open(root / "corpus.jsonl", "w") as f:
        for i in range(30):
            f.write(json.dumps({"_id": f"d{i}", "title": "", "text": f"topic {i % 5} w{i}"}) + "\n")
    with open(root / "queries.jsonl", "w") as f:
        for q in range(12 if queries else 0):
            f.write(json.dumps({"_id": f"q{q}", "text": f"topic {q % 5}"}) + "\n")
    if qrels is None:
        lines = [f"q{q}\td{q}\t1\nq{q}\td{q + 12}\t0\n" for q in range(12)]
        qrels = "query-id\tcorpus-id\tscore\n" + "".join(lines)
    (root / "qrels" / "test.tsv").write_text(qrels)
    return {
        "name": "tiny",
        "documents": str(root / "corpus.jsonl"),
        "documents_format": "beir_corpus",
        "queries": str(root / "queries.jsonl"),
        "queries_format": "beir_queries",
        "qrels": str(root / "qrels" / "test.tsv"),
        "qrels_format": "beir_qrels",
    }


def _config(tmp_path: Path, collection: dict, **sections: dict) -> Path:
    data = {
        "collection": collection,
        "datagen": {"vocab": {"size": 200}},
        "trainer": {"model": "knrm", "train_steps": 5},
        "runner": {"pipeline_name": "rankpipe-errors", "pipeline_root": str(tmp_path / "out")},
    }
    for name, section in sections.items():
        data.setdefault(name, {}).update(section)
    path = tmp_path / "cfg.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def _error(path: Path, overrides: list[str] | None = None) -> str:
    with pytest.raises(ConfigError) as info:
        load_config(path, overrides)
    return str(info.value)


def test_the_small_collection_loads(tmp_path: Path) -> None:
    assert load_config(_config(tmp_path, _collection(tmp_path))).collection.name == "tiny"


# a. ------------------------------------------------------------------------------------------


def test_empty_queries_file_is_named_not_every_judgment(tmp_path: Path) -> None:
    """Was `qrels/test.tsv:2: qrels qid 'q0' has no query` (and, skipped, a threshold error)."""
    coll = _collection(tmp_path, queries=False)
    path = _config(tmp_path, coll)
    expected = f"{coll['queries']}: the queries file is empty (collection.queries)"
    for policy in ("fail", "skip"):
        assert _error(path, [f"datagen.on_bad_record={policy}"]) == expected
    assert config_fix(expected) == (
        "point collection.queries at the collection's queries file (a path or glob)"
    )
    # RankingDataGen says the same (object-store inputs are not read at config time).
    report = collection_io.BadRecordReport("skip")
    with pytest.raises(EmptyInputError) as info:
        collection_io.read_queries(coll["queries"], "beir_queries", report)
    assert str(info.value) == expected
    name, message, fix = describe_error(info.value)
    assert (name, fix) == ("EmptyInputError", config_fix(expected))
    assert message.startswith(expected)


# b. ------------------------------------------------------------------------------------------


def test_beir_qrels_read_as_trec_qrels_names_file_line_and_format(tmp_path: Path) -> None:
    """Was `datagen.sampling.positive_threshold: auto finds no grade above 0 (grades found:
    none)`: the config-time threshold check read the qrels skipping every line."""
    coll = _collection(tmp_path)
    path = _config(tmp_path, {**coll, "qrels_format": "trec_qrels"})
    for policy in ("fail", "skip"):
        message = _error(path, [f"datagen.on_bad_record={policy}"])
        assert message == (
            f"{coll['qrels']}:1: looks like BEIR qrels (3 tab-separated fields), not trec_qrels "
            "(expected 4 columns (qid iter docid rel), got 3): set collection.qrels_format: "
            "beir_qrels"
        )
    assert config_fix(message).startswith(
        "set collection.qrels_format: beir_qrels in the config (or --set "
        "collection.qrels_format=beir_qrels)"
    )
    assert load_config(path, ["collection.qrels_format=beir_qrels"])


def test_trec_qrels_with_a_fifth_column_fails_at_its_line_before_the_threshold(
    tmp_path: Path,
) -> None:
    lines = [f"q{q} 0 d{q} 1 x\nq{q} 0 d{q + 12} 0 x\n" for q in range(12)]
    coll = _collection(tmp_path, qrels="".join(lines))
    path = _config(tmp_path, {**coll, "qrels_format": "trec_qrels"})
    message = _error(path)
    assert message.startswith(f"{coll['qrels']}:1: expected 4 columns (qid iter docid rel), got 5")
    assert "positive_threshold" not in message
    assert "skip" in config_fix(message) and "check that the file is trec_qrels" in config_fix(
        message
    )
    # Skipped, every line is bad: said so, with the first one, not "grades found: none".
    message = _error(path, ["datagen.on_bad_record=skip"])
    assert message.startswith(f"{coll['qrels']}: every one of its 24 qrels records is bad")
    assert f"the first: {coll['qrels']}:1: expected 4 columns" in message
    assert "positive_threshold" not in message


def test_a_later_bad_qrels_line_is_reported_before_the_threshold(tmp_path: Path) -> None:
    coll = _collection(tmp_path)
    with open(coll["qrels"], "a") as f:
        f.write("q1\td3\thigh\n")
    message = _error(_config(tmp_path, coll))
    assert message == f"{coll['qrels']}:26: non-integer relevance 'high' (collection.qrels)"
    assert "datagen.on_bad_record=skip" in config_fix(message)
    load_config(_config(tmp_path, coll), ["datagen.on_bad_record=skip"])


# c. ------------------------------------------------------------------------------------------


def test_set_typo_names_the_set(tmp_path: Path) -> None:
    """Was `<cfg.yaml>: unknown key 'trainer.learning_rat'`: the file does not hold it."""
    path = _config(tmp_path, _collection(tmp_path))
    message = _error(path, ["trainer.learning_rat=1e-3"])
    assert (
        message == "--set trainer.learning_rat: no such key (did you mean trainer.learning_rate?)"
    )
    assert config_fix(message).startswith("--set trainer.learning_rate=VALUE")
    assert _error(path, ["trainr.learning_rate=1"]) == (
        "--set trainr.learning_rate: no such key (did you mean trainer.learning_rate?)"
    )
    # A bad value given with --set names the --set too; dict sections take any name.
    assert _error(path, ["trainer.train_steps=many"]) == (
        "--set trainer.train_steps: expected an integer, got str 'many'"
    )
    assert _error(path, ["trainer.train_steps.x=1"]) == (
        "--set trainer.train_steps.x: trainer.train_steps is a value, not a section"
    )
    config = load_config(path, ['runner.kubeflow.components.Trainer.cpu_limit="2"'])
    assert config.runner.kubeflow.components["Trainer"].cpu_limit == "2"


# d. ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "value", "meant"),
    [
        ("documents_format", "beir", "beir_corpus"),
        ("queries_format", "beir", "beir_queries"),
        ("qrels_format", "beir", "beir_qrels"),
        ("qrels_format", "trec", "trec_qrels"),
        ("documents_format", "msmarco", "msmarco_tsv"),
        ("documents_format", "beir_corpos", "beir_corpus"),
    ],
)
def test_format_names_suggest_the_one_meant(
    tmp_path: Path, key: str, value: str, meant: str
) -> None:
    coll = _collection(tmp_path)
    message = _error(_config(tmp_path, {**coll, key: value}))
    assert f"collection.{key}: {value!r} is not one of " in message
    assert message.endswith(f"(did you mean {meant}?)")
    assert config_fix(message) == (
        f"set collection.{key}: {meant} in the config file (or --set collection.{key}={meant})"
    )


def test_suggest() -> None:
    formats = ("trec_sgml", "beir_corpus", "msmarco_tsv", "cranfield")
    assert config_loader.suggest("beir", formats) == ["beir_corpus"]  # difflib alone: none
    assert config_loader.suggest("tsv", formats) == ["msmarco_tsv"]
    assert config_loader.suggest("cranfeld", formats) == ["cranfield"]
    assert config_loader.suggest("xx", formats) == []
    assert config_loader.did_you_mean("bert", ("knrm", "bert_large", "dual_encoder")) == (
        " (did you mean bert_large?)"
    )


# e. ------------------------------------------------------------------------------------------


def test_jsonl_read_as_msmarco_tsv_names_the_format_not_skip(tmp_path: Path) -> None:
    """Was `corpus.jsonl:1: expected 2 tab-separated columns (id, text), got 1` with the fix
    `--set datagen.on_bad_record=skip`, which would skip every document."""
    coll = _collection(tmp_path)
    message = _error(_config(tmp_path, {**coll, "documents_format": "msmarco_tsv"}))
    assert message == (
        f"{coll['documents']}:1: looks like BEIR corpus (JSON lines), not msmarco_tsv (expected "
        "2 tab-separated columns (id, text), got 1): set collection.documents_format: beir_corpus"
    )
    # In a component (a document file on an object store): the console's fix sets the format.
    remote = (
        "Traceback (most recent call last):\n  ...\n"
        f"components.ranking_datagen.readers.BadRecordError: {message} "
        "[while running 'ReadDocuments/Read']"
    )
    name, shown, fix = describe_error(RuntimeError(remote))
    assert (name, shown) == ("BadRecordError", message)
    assert fix.startswith("set collection.documents_format: beir_corpus in the config")
    assert "--set datagen.on_bad_record=skip" not in fix
    # A file in no known format, failing at its first record: check the format, not skip.
    name, shown, fix = describe_error(
        BadRecordError(
            collection_io.BadRecord(
                "c.tsv",
                1,
                "expected 2 tab-separated columns (id, text), got 1; as this is the "
                "file's first record, the file may not be msmarco_tsv at all: check "
                "collection.documents_format",
            )
        )
    )
    assert fix.startswith("check that the file is msmarco_tsv (collection.documents_format")
    # A bad record further down a file of the right format: fix it or skip it, as before.
    _, _, fix = describe_error(
        BadRecordError(collection_io.BadRecord("c.tsv", 7, "empty text for docid 'd7'"))
    )
    assert fix.endswith("--set datagen.on_bad_record=skip")


def test_block_format_on_another_format_is_refused_without_reading_it_all(
    tmp_path: Path,
) -> None:
    coll = _collection(tmp_path)
    message = _error(_config(tmp_path, {**coll, "queries_format": "trec_topics"}))
    assert message == (
        f"{coll['queries']}: no queries record found in it as trec_topics "
        "(collection.queries_format); it looks like BEIR queries (JSON lines): set "
        "collection.queries_format: beir_queries"
    )


# f. ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("trainer", "datagen", "key"),
    [
        (
            {"model": "dual_encoder", "dual_encoder": {"checkpoint_dir": "{missing}"}},
            {},
            "trainer.dual_encoder.checkpoint_dir",
        ),
        (
            {"model": "bert", "bert": {"checkpoint_dir": "{missing}"}},
            {},
            "trainer.bert.checkpoint_dir",
        ),
        ({}, {"hybrid": {"checkpoint_dir": "{missing}"}}, "datagen.hybrid.checkpoint_dir"),
    ],
)
def test_missing_checkpoint_names_the_key_in_use(
    tmp_path: Path, trainer: dict, datagen: dict, key: str
) -> None:
    """Was a fix naming trainer.bert.checkpoint_dir whatever the model."""
    missing = str(tmp_path / "no-checkpoint")
    fill = json.loads(json.dumps({"t": trainer, "d": datagen}).replace("{missing}", missing))
    path = _config(
        tmp_path,
        _collection(tmp_path),
        trainer={"train_steps": 0, **fill["t"]} if fill["t"] else {},
        datagen=fill["d"],
    )
    message = _error(path)
    assert message == f"{path}: {key}: no such file: {missing}/model.safetensors"
    fix = config_fix(message)
    assert "`make pretrained`" in fix and f"point {key} at its directory" in fix
    wrong = {"trainer.bert.checkpoint_dir", "trainer.dual_encoder.checkpoint_dir"} - {key}
    assert not any(other in fix for other in wrong)


def test_companion_checkpoint_is_named(tmp_path: Path) -> None:
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    (ckpt / "model.safetensors").write_text("")
    missing = str(tmp_path / "no-mpnet")
    path = _config(
        tmp_path,
        _collection(tmp_path),
        trainer={
            "model": "dual_encoder",
            "loss": "listwise_softmax",
            "dual_encoder": {"checkpoint_dir": str(ckpt)},
            "recipe": {
                "type": "frozen_documents",
                "frozen_documents": {"companion_checkpoint_dir": missing},
            },
        },
        datagen={"sampling": {"mode": "lists"}},
    )
    message = _error(path)
    key = "trainer.recipe.frozen_documents.companion_checkpoint_dir"
    assert message == f"{path}: {key}: no such file: {missing}/model.safetensors"
    assert f"point {key} at its directory" in config_fix(message)


# g. ------------------------------------------------------------------------------------------


def test_every_problem_at_once(tmp_path: Path) -> None:
    """Two unknown keys (in two sections) and a bad format: one ConfigError, a line each, each
    naming its file and key; a --set typo joins them; the fix has a line for each."""
    coll = _collection(tmp_path)
    path = _config(
        tmp_path,
        {**coll, "documents_format": "beir"},
        trainer={"learnig_rate": 0.1},
        evaluator={"splt": "test"},
    )
    with pytest.raises(ConfigError) as info:
        load_config(path, ["datagen.samplng.mode=listwise"])
    assert info.value.problems == [
        "--set datagen.samplng.mode: no such key (did you mean datagen.sampling.mode?)",
        f"{path}: collection.documents_format: 'beir' is not one of trec_sgml, beir_corpus, "
        "msmarco_tsv, cranfield (did you mean beir_corpus?)",
        f"{path}: unknown key 'evaluator.splt' (did you mean 'evaluator.split'?)",
        f"{path}: unknown key 'trainer.learnig_rate' (did you mean 'trainer.learning_rate'?)",
    ]
    assert str(info.value) == "\n".join(info.value.problems)
    assert config_fix(str(info.value)).split("\n         ") == [
        "--set datagen.sampling.mode=VALUE (the keys are listed in docs/config-reference.md)",
        "set collection.documents_format: beir_corpus in the config file (or --set "
        "collection.documents_format=beir_corpus)",
        "rename evaluator.splt to evaluator.split",
        "rename trainer.learnig_rate to trainer.learning_rate",
    ]


def test_missing_files_and_unset_variables_are_all_named(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.delenv("RANKPIPE_NOPE", raising=False)
    coll = _collection(tmp_path)
    path = _config(
        tmp_path,
        {**coll, "queries": str(tmp_path / "no-queries.jsonl"), "qrels": str(tmp_path / "none")},
    )
    assert _error(path).splitlines() == [
        f"{path}: collection.queries: no such file: {tmp_path / 'no-queries.jsonl'}",
        f"{path}: collection.qrels: no such file: {tmp_path / 'none'}",
    ]
    path = _config(tmp_path, {**coll, "queries": "${RANKPIPE_NOPE}/q", "qrels": "${RANKPIPE_NOPE}"})
    assert len(_error(path).splitlines()) == 2


def test_config_error_pickles_with_its_problems() -> None:
    import pickle

    error = pickle.loads(pickle.dumps(ConfigError(["a: one", "b: two"])))
    assert error.problems == ["a: one", "b: two"] and str(error) == "a: one\nb: two"


def test_cli_shows_every_problem_with_a_fix_each(tmp_path: Path) -> None:
    path = _config(
        tmp_path, {**_collection(tmp_path), "qrels_format": "beir"}, trainer={"optimiser": "sgd"}
    )
    result = subprocess.run(
        [sys.executable, "-m", "pipelines.cli", "run", str(path), "--set", "trainer.lr=1"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 2
    lines = result.stderr[result.stderr.index("rankpipe: config error:") :].splitlines()
    assert lines == [
        "rankpipe: config error: --set trainer.lr: no such key",
        f"{' ' * 23}{path}: collection.qrels_format: 'beir' is not one of trec_qrels, "
        "beir_qrels, cranfield (did you mean beir_qrels?)",
        f"{' ' * 23}{path}: unknown key 'trainer.optimiser'",
        "  fix:   check the key of --set trainer.lr (the keys: docs/config-reference.md)",
        "         set collection.qrels_format: beir_qrels in the config file (or --set "
        "collection.qrels_format=beir_qrels)",
        "         remove or rename trainer.optimiser (the keys are listed in "
        "docs/config-reference.md)",
    ]
