"""`rankpipe init`: a collection's layout recognised by its files, a config that loads, and
nothing written into the collection."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
import yaml

from pipelines import cli, init_collection
from pipelines.config import load_config


def tree_state(root: Path) -> dict[str, tuple[int, str]]:
    """Every path under root with its mode and content digest: what a run must not change."""
    state = {}
    for path in sorted(root.rglob("*")):
        key = str(path.relative_to(root))
        digest = hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else "dir"
        state[key] = (path.stat().st_mode, digest, path.stat().st_mtime_ns)
    return state


def beir_collection(root: Path, splits: tuple[str, ...] = ("train", "dev", "test")) -> Path:
    """A small BEIR collection: 30 documents, 24 queries judged 0/1, qrels with headers."""
    (root / "qrels").mkdir(parents=True)
    docs = [
        {"_id": f"d{i}", "title": f"title {i}", "text": f"text about topic {i % 6}"}
        for i in range(30)
    ]
    (root / "corpus.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs))
    queries = [{"_id": f"q{i}", "text": f"topic {i % 6}"} for i in range(24)]
    (root / "queries.jsonl").write_text("".join(json.dumps(q) + "\n" for q in queries))
    for n, split in enumerate(splits):
        lines = ["query-id\tcorpus-id\tscore"]
        for q in range(n, 24, len(splits)):
            lines += [f"q{q}\td{d}\t{int(d % 6 == q % 6)}" for d in range(0, 30, 2)]
        (root / "qrels" / f"{split}.tsv").write_text("\n".join(lines) + "\n")
    return root


def test_beir_splits_are_the_collections_own(tmp_path: Path) -> None:
    collection = beir_collection(tmp_path / "mine")
    before = tree_state(collection)
    result = init_collection.init(tmp_path / "run", collection)
    config = yaml.safe_load(Path(result.config_path).read_text())
    assert config["collection"]["qrels"] == str(collection / "qrels" / "*.tsv")
    assert config["collection"]["qrels_format"] == "beir_qrels"
    assert config["datagen"]["split"] == {
        "method": "qrels_files",
        "train_qrels": str(collection / "qrels" / "train.tsv"),
        "dev_qrels": str(collection / "qrels" / "dev.tsv"),
        "test_qrels": str(collection / "qrels" / "test.tsv"),
    }
    assert "cross_validation" not in config["evaluator"]
    loaded = load_config(result.config_path)  # every key known, every path there
    assert loaded.runner.pipeline_name == "rankpipe-run"
    assert tree_state(collection) == before


def test_beir_with_test_only_is_cross_validated(tmp_path: Path) -> None:
    collection = beir_collection(tmp_path / "mine", splits=("test",))
    result = init_collection.init(tmp_path / "run", collection)
    config = load_config(result.config_path)
    assert config.evaluator.cross_validation.folds == init_collection.CV_FOLDS
    assert config.datagen.split.method == "kfold"


def test_beir_without_dev_holds_out_train(tmp_path: Path) -> None:
    collection = beir_collection(tmp_path / "mine", splits=("train", "test"))
    result = init_collection.init(tmp_path / "run", collection)
    split = load_config(result.config_path).datagen.split
    assert (split.method, split.dev_qrels) == ("qrels_files", None)
    assert "a held-out fifth of qrels/train.tsv" in " ".join(result.layout.notes)


def test_shared_collections_are_recognised(shared_data: Path, tmp_path: Path) -> None:
    expected = {
        "cranfield": ("cranfield", "cranfield", "kfold"),
        "msmarco-dl19-subset": ("beir", "beir_qrels", "kfold"),
        "nfcorpus": ("beir", "beir_qrels", "qrels_files"),
    }
    for name, (kind, qrels_format, method) in expected.items():
        result = init_collection.init(tmp_path / name, shared_data / name)
        config = load_config(result.config_path)
        assert (result.layout.kind, config.collection.qrels_format) == (kind, qrels_format)
        assert config.datagen.split.method == method


def test_trec_files_are_recognised_by_their_lines(tmp_path: Path) -> None:
    root = tmp_path / "trec"
    (root / "docs").mkdir(parents=True)
    for n in range(2):
        (root / "docs" / f"part{n}").write_text(
            f"<DOC>\n<DOCNO> D{n} </DOCNO>\n<TEXT>\nsome text {n}\n</TEXT>\n</DOC>\n"
        )
    (root / "topics.301-303").write_text("<top>\n<num> Number: 301\n<title> a topic\n</top>\n")
    (root / "qrels.txt").write_text("301 0 D0 1\n301 0 D1 0\n")
    (root / "bm25.run").write_text("301 Q0 D0 1 2.5 bm25\n301 Q0 D1 2 1.5 bm25\n")
    layout = init_collection.detect(root)
    assert (layout.documents, layout.documents_format) == (str(root / "docs" / "*"), "trec_sgml")
    assert (layout.queries, layout.queries_format) == (str(root / "topics.301-303"), "trec_topics")
    assert (layout.qrels, layout.first_stage_run) == (
        str(root / "qrels.txt"),
        str(root / "bm25.run"),
    )


def test_refusals_name_the_fix(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    collection = beir_collection(tmp_path / "mine")
    before = tree_state(collection)
    # Never into the collection.
    assert cli.main(["init", str(collection / "run"), "--collection", str(collection)]) == 2
    assert "inside the collection" in capsys.readouterr().err
    # Never over an existing config without --force.
    assert cli.main(["init", str(tmp_path / "run"), "--collection", str(collection)]) == 0
    assert "Run it:  rankpipe run " in capsys.readouterr().out
    assert cli.main(["init", str(tmp_path / "run"), "--collection", str(collection)]) == 2
    assert "--force writes it again" in capsys.readouterr().err
    assert (
        cli.main(["init", str(tmp_path / "run"), "--collection", str(collection), "--force"]) == 0
    )
    # Not a known layout: what was looked for.
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "notes.txt").write_text("hello")
    assert cli.main(["init", str(tmp_path / "x"), "--collection", str(tmp_path / "other")]) == 2
    assert "no known collection layout (found: notes.txt)" in capsys.readouterr().err
    assert tree_state(collection) == before
    assert not list(collection.glob(".*"))  # no temp file left there either


def test_ambiguous_files_name_the_flag(tmp_path: Path) -> None:
    root = tmp_path / "marco"
    root.mkdir()
    (root / "collection.tsv").write_text("0\tsome passage\n")
    (root / "queries.train.tsv").write_text("1\tq\n")
    (root / "queries.dev.tsv").write_text("2\tq\n")
    (root / "qrels.dev.tsv").write_text("2 0 0 1\n")
    with pytest.raises(init_collection.InitError, match="name one with --queries"):
        init_collection.detect(root)
    result = init_collection.init(
        tmp_path / "run", root, overrides={"queries": str(root / "queries.dev.tsv")}
    )
    assert result.layout.queries == str(root / "queries.dev.tsv")
    assert load_config(result.config_path).collection.documents_format == "msmarco_tsv"
