"""Unit tests of components.ranking_datagen.outputs (files, staging, summary.md)."""

from __future__ import annotations

from pathlib import Path

import tensorflow as tf

from components.ranking_datagen import outputs
from components.ranking_datagen.candidates import rank_run
from components.ranking_datagen.readers import TrecRun


def test_written_run_keeps_the_ranking_under_trec_eval(tmp_path: Path) -> None:
    # Scores that 6 decimals would turn into a tie, which trec_eval breaks by docno.
    run = {"q": {"a": 1.0000004, "b": 1.0000001, "c": 0.5}}
    ranked = rank_run(run, 10)
    assert [d for d, _, _ in ranked["q"]] == ["a", "b", "c"]
    path = tmp_path / "run.txt"
    outputs.write_run(str(path), ranked, "bm25")
    assert path.read_text().splitlines()[0] == "q Q0 a 1 1.0000004 bm25"
    reread: dict[str, dict[str, float]] = {}
    for e in TrecRun().read(str(path)):
        reread.setdefault(e.qid, {})[e.docid] = e.score
    assert rank_run(reread, 10) == ranked


def test_qrels_file_is_sorted_trec_format(tmp_path: Path) -> None:
    path = tmp_path / "qrels.txt"
    outputs.write_qrels(str(path), {"2": {"b": 0, "a": 3}, "10": {"x": 1}})
    assert path.read_text() == "10 0 x 1\n2 0 a 3\n2 0 b 0\n"


def test_complete_shards_and_publish(tmp_path: Path) -> None:
    stage = tmp_path / "stage"
    examples = stage / "examples"
    outputs.complete_shards(str(examples), {"train": 2, "dev": 1})
    names = sorted(p.name for p in (examples / "Split-train").iterdir())
    assert names == ["data_tfrecord-00000-of-00002.gz", "data_tfrecord-00001-of-00002.gz"]
    empty = examples / "Split-dev" / "data_tfrecord-00000-of-00001.gz"
    assert list(tf.data.TFRecordDataset(str(empty), compression_type="GZIP")) == []
    (stage / "summary").mkdir()
    (stage / "summary" / "summary.json").write_text("{}")
    uris = {"examples": str(tmp_path / "uri-ex"), "summary": str(tmp_path / "uri-sum")}
    outputs.publish({"examples": str(examples), "summary": str(stage / "summary")}, uris)
    assert sorted(p.name for p in Path(uris["examples"]).iterdir()) == ["Split-dev", "Split-train"]
    assert (Path(uris["summary"]) / "summary.json").read_text() == "{}"
    outputs.clear(list(uris.values()))
    assert list(Path(uris["examples"]).iterdir()) == [] == list(Path(uris["summary"]).iterdir())


def test_publish_from_another_filesystem(tmp_path: Path) -> None:
    """With a distributed runner the stage is in an object store and, on Kubeflow, the artifacts
    are the launcher's local paths: TF cannot rename across filesystems ("not implemented"),
    so publish copies. ram:// (TF's in-memory filesystem) stands for the object store."""
    stage = "ram://publish-test/stage"
    files = {
        "examples/Split-train/data_tfrecord-00000-of-00001.gz": b"shard",
        "examples/Split-dev/nested/deeper.bin": b"deep",
        "summary/summary.json": b"{}",
    }
    for name, data in files.items():
        tf.io.gfile.makedirs(f"{stage}/{name.rsplit('/', 1)[0]}")
        with tf.io.gfile.GFile(f"{stage}/{name}", "wb") as f:
            f.write(data)
    uris = {"examples": str(tmp_path / "uri-ex"), "summary": str(tmp_path / "uri-sum")}
    outputs.publish({"examples": f"{stage}/examples", "summary": f"{stage}/summary"}, uris)
    for name, data in files.items():
        kind, rest = name.split("/", 1)
        assert (Path(uris[kind]) / rest).read_bytes() == data, name
    assert tf.io.gfile.listdir(f"{stage}/examples") == []  # moved, not copied
    assert tf.io.gfile.listdir(f"{stage}/summary") == []


def test_summary_markdown_lists_bad_records() -> None:
    text = outputs.summary_markdown(
        {
            "documents": 3,
            "examples_per_split": {"train": 4, "dev": 0},
            "oov_rate": 0.125,
            "bad_records": {
                "total": 2,
                "by_kind": {"documents": 2},
                "examples": {"documents": ["d.tsv:2: empty text", "d.tsv:5: empty text"]},
            },
        }
    )
    assert "| documents | 3 |" in text
    assert "| examples_per_split | train: 4, dev: 0 |" in text
    assert "| oov_rate | 0.1250 |" in text
    assert "| bad_records | 2 (documents: 2) |" in text
    assert "### documents (2)\n\n- `d.tsv:2: empty text`\n- `d.tsv:5: empty text`\n" in text
