"""Helpers for the RankingDataGen tests (fixtures are in conftest.py).

Two ways to run the component:
  * `run_pipeline`: a one-component TFX pipeline on LocalDagRunner (SQLite MLMD), as in
    production, in a child process (so its memory is returned when it ends). Expensive (~30 s
    on Cranfield): the real-data runs are session-scoped or module-scoped fixtures shared by
    the tests, six successful runs and one that fails at once.
  * `run_executor`: the executor's Do() on hand-made artifacts, for the many small bad-input
    cases on tiny collections (seconds each, most fail before the first Beam pipeline).
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import tensorflow as tf

from components.ranking_datagen.config import CollectionConfig, DatagenConfig
from components.ranking_datagen.readers import get_reader
from pipelines.config import load_config

REPO_ROOT = Path(__file__).resolve().parents[3]
IN_MEMORY = ["--direct_running_mode=in_memory"]
OUTPUT_KEYS = ("examples", "transform_graph", "vocabulary", "qrels", "first_stage_run", "summary")
SPLITS = ("train", "dev", "test")


@dataclass
class Outputs:
    """Artifact URIs of one RankingDataGen run, and what the tests read from them."""

    uris: dict[str, str]
    split_names: str = ""

    @property
    def summary(self) -> dict[str, Any]:
        return json.loads(Path(self.uris["summary"], "summary.json").read_text())

    @property
    def vocab(self) -> list[str]:
        return Path(self.uris["vocabulary"], "vocab.txt").read_text().splitlines()

    def shard_files(self, split: str) -> list[Path]:
        return sorted(Path(self.uris["examples"], f"Split-{split}").iterdir())

    def examples(self, split: str) -> list[tf.train.Example]:
        out = []
        for path in self.shard_files(split):
            for record in tf.data.TFRecordDataset(str(path), compression_type="GZIP"):
                out.append(tf.train.Example.FromString(record.numpy()))
        return out

    def run_lines(self) -> list[list[str]]:
        return [ln.split() for ln in Path(self.uris["first_stage_run"], "run.txt").open()]


def feature(example: tf.train.Example, name: str) -> list:
    f = example.features.feature[name]
    kind = f.WhichOneof("kind")
    values = list(getattr(f, kind).value) if kind else []
    return [v.decode() for v in values] if kind == "bytes_list" else values


class PipelineRunError(Exception):
    """A LocalDagRunner run in the child process failed with `type_name`: `message`."""

    def __init__(self, type_name: str, message: str):
        super().__init__(f"{type_name}: {message}")
        self.type_name = type_name
        self.message = message


def run_pipeline(
    root: Path,
    collection: dict,
    datagen: dict,
    beam_args: list[str] | None = None,
    forbid_vocab_learning: bool = False,
) -> Outputs:
    """Runs RankingDataGen alone on LocalDagRunner (in-memory Beam) in a child Python process;
    returns its published artifacts.

    A child, because a run leaves ~0.6 GB of TensorFlow / Beam / tf.Transform state behind in
    its process: in the test process it would stay for the rest of the suite (the whole suite
    runs in one pytest process in CI). `forbid_vocab_learning` makes the vocabulary learner
    raise in the child, to prove a given vocab_file skips it.
    """
    root.mkdir(parents=True, exist_ok=True)
    spec = {
        "root": str(root),
        "collection": collection,
        "datagen": datagen,
        "beam_args": beam_args or IN_MEMORY,
        "forbid_vocab_learning": forbid_vocab_learning,
    }
    (root / "spec.json").write_text(json.dumps(spec))
    result_path = root / "result.json"
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
    proc = subprocess.run(
        [sys.executable, __file__, str(root / "spec.json")],
        capture_output=True,
        text=True,
        env=env,
        timeout=900,
    )
    if not result_path.exists():
        raise RuntimeError(f"pipeline child exited with {proc.returncode}:\n{proc.stderr[-5000:]}")
    result = json.loads(result_path.read_text())
    if "error_type" in result:
        raise PipelineRunError(result["error_type"], result["error"])
    return Outputs(result["uris"], result["split_names"])


def _run_pipeline_here(spec: dict) -> dict:
    """The child's side of run_pipeline."""
    from ml_metadata.metadata_store import metadata_store
    from tfx import v1 as tfx

    from components.ranking_datagen import tokenization
    from components.ranking_datagen.component import RankingDataGen

    if spec["forbid_vocab_learning"]:

        def no_learning(*args: Any, **kwargs: Any) -> list[str]:
            raise AssertionError("a given vocab_file must skip vocabulary learning")

        tokenization.learn_wordpiece_vocab = no_learning  # in-memory Beam runs in this process
    root = Path(spec["root"])
    connection = tfx.orchestration.metadata.sqlite_metadata_connection_config(
        str(root / "mlmd.sqlite")
    )
    pipeline = tfx.dsl.Pipeline(
        pipeline_name="datagen-test",
        pipeline_root=str(root),
        components=[RankingDataGen(collection=spec["collection"], datagen=spec["datagen"])],
        enable_cache=False,
        metadata_connection_config=connection,
        beam_pipeline_args=spec["beam_args"],
    )
    tfx.orchestration.LocalDagRunner().run(pipeline)
    store = metadata_store.MetadataStore(connection)
    uris, split_names = {}, ""
    type_names = {t.id: t.name for t in store.get_artifact_types()}
    for artifact in store.get_artifacts():
        name = type_names[artifact.type_id]
        key = Path(artifact.uri).parent.name  # <root>/RankingDataGen/<output key>/<id>
        assert key in OUTPUT_KEYS, (name, artifact.uri)
        uris[key] = artifact.uri
        if name == "Examples":
            split_names = artifact.properties["split_names"].string_value
    assert sorted(uris) == sorted(OUTPUT_KEYS)
    return {"uris": uris, "split_names": split_names}


def make_output_dict(root: Path) -> dict[str, list]:
    from tfx.types import standard_artifacts

    from components import artifacts

    types = {
        "examples": standard_artifacts.Examples,
        "transform_graph": standard_artifacts.TransformGraph,
        "vocabulary": artifacts.Vocabulary,
        "qrels": artifacts.Qrels,
        "first_stage_run": artifacts.TrecRun,
        "summary": artifacts.DatagenSummary,
    }
    out = {}
    for key, cls in types.items():
        artifact = cls()
        artifact.uri = str(root / key)
        os.makedirs(artifact.uri, exist_ok=True)  # the launcher makes these before Do()
        out[key] = [artifact]
    return out


def run_executor(
    root: Path,
    collection: dict,
    datagen: dict,
    cross_validation_folds: int = 0,
    inputs: dict[str, list] | None = None,
) -> Outputs:
    """Calls the executor's Do() directly (in-memory Beam), without TFX's launcher: so a
    failure's cleanup is the executor's own. `cross_validation_folds` is set as an exec
    property only when not 0, as the component does; `inputs`: the input dict (the optional
    `corpus_vectors`), none by default."""
    from components.ranking_datagen.config import CROSS_VALIDATION_FOLDS
    from components.ranking_datagen.executor import Executor

    output_dict = make_output_dict(root / "out")
    context = Executor.Context(
        beam_pipeline_args=IN_MEMORY, tmp_dir=str(root / "tmp"), unique_id="1"
    )
    props: dict[str, Any] = {"collection": json.dumps(collection), "datagen": json.dumps(datagen)}
    if cross_validation_folds:
        props[CROSS_VALIDATION_FOLDS] = cross_validation_folds
    Executor(context).Do(inputs or {}, output_dict, props)
    examples = output_dict["examples"][0]
    return Outputs({k: v[0].uri for k, v in output_dict.items()}, examples.split_names)


def leftover_files(root: Path) -> list[str]:
    """Files under an executor run's output and tmp directories."""
    return sorted(
        str(p.relative_to(root))
        for base in (root / "out", root / "tmp")
        if base.exists()
        for p in base.rglob("*")
        if p.is_file()
    )


def load_collection(shared_data: Path, name: str) -> tuple[list[tuple[str, str]], dict[str, str]]:
    """(docid, text) pairs and qid -> text of a shared collection, as RankingDataGen reads it."""
    if name == "cranfield":
        base = shared_data / "cranfield"
        doc_reader = get_reader("documents", "cranfield", allow_empty_text=True)
        docs = doc_reader.read(str(base / "cran.all.1400"))
        queries = get_reader("queries", "cranfield").read(str(base / "cran.qry"))
    else:
        base = shared_data / "msmarco-dl19-subset"
        docs = get_reader("documents", "beir_corpus").read(str(base / "corpus.jsonl"))
        queries = get_reader("queries", "beir_queries").read(str(base / "queries.jsonl"))
    return [(d.docid, d.text) for d in docs], {q.qid: q.text for q in queries}


# ------------------------------------------------------------------------------------------
# Tiny hand-written collections
# ------------------------------------------------------------------------------------------

_TOPICS = {
    "wing": "wing flutter swept supersonic",
    "heat": "heat transfer laminar plate",
    "shock": "shock wave cone pressure",
    "jet": "jet noise nozzle exhaust",
    "buckle": "buckling cylinder shell load",
    "orbit": "orbit satellite reentry drag",
}


@dataclass
class Tiny:
    """A small valid collection: 6 topics x 3 documents, 9 queries, explicit splits."""

    docs: dict[str, str] = field(default_factory=dict)
    queries: dict[str, str] = field(default_factory=dict)
    qrels: list[tuple[str, str, int]] = field(default_factory=list)
    split_lists: dict[str, list[str]] = field(default_factory=dict)

    @classmethod
    def make(cls) -> Tiny:
        tiny = cls()
        for t, (topic, words) in enumerate(_TOPICS.items()):
            w = words.split()
            for k in range(3):
                docid = f"d{3 * t + k + 1}"
                tiny.docs[docid] = (
                    f"On the {w[k]} {w[(k + 1) % 4]} of {topic} tests, part {k + 1}: "
                    f"{' '.join(w)} measured in {k + 2} tunnels."
                )
        queries = [
            ("q1", "wing flutter", "wing"),
            ("q2", "laminar heat transfer", "heat"),
            ("q3", "shock cone pressure", "shock"),
            ("q4", "jet nozzle noise", "jet"),
            ("q5", "cylinder shell buckling", "buckle"),
            ("q6", "satellite reentry drag", "orbit"),
            ("q7", "swept wing supersonic", "wing"),
            ("q8", "plate heat", "heat"),
            ("q9", "exhaust noise", "jet"),
        ]
        topic_index = {topic: i for i, topic in enumerate(_TOPICS)}
        for qid, text, topic in queries:
            tiny.queries[qid] = text
            t = topic_index[topic]
            tiny.qrels += [(qid, f"d{3 * t + 1}", 2), (qid, f"d{3 * t + 2}", 1)]
            tiny.qrels += [(qid, f"d{3 * t + 3}", 0), (qid, f"d{(3 * t + 4) % 18 or 18}", 0)]
        tiny.split_lists = {
            "train": ["q1", "q2", "q3", "q4", "q5"],
            "dev": ["q6", "q7"],
            "test": ["q8", "q9"],
        }
        return tiny

    # -- writers: each returns the path, so tests can then corrupt one line ----------------

    def write_tsv_docs(self, path: Path) -> Path:
        path.write_text("".join(f"{d}\t{t}\n" for d, t in self.docs.items()))
        return path

    def write_tsv_queries(self, path: Path) -> Path:
        path.write_text("".join(f"{q}\t{t}\n" for q, t in self.queries.items()))
        return path

    def write_sgml_docs(self, path: Path) -> Path:
        path.write_text(
            "".join(
                f"<DOC>\n<DOCNO> {d} </DOCNO>\n<HEADLINE>\n{t.split(':')[0]}\n</HEADLINE>\n"
                f"<TEXT>\n{t.split(':', 1)[1].strip()}\n</TEXT>\n</DOC>\n"
                for d, t in self.docs.items()
            )
        )
        return path

    def write_topics(self, path: Path) -> Path:
        path.write_text(
            "".join(
                f"<top>\n<num> Number: {q}\n<title> {t}\n\n<desc> Description:\nAbout {t}.\n"
                "</top>\n\n"
                for q, t in self.queries.items()
            )
        )
        return path

    def write_qrels(self, path: Path) -> Path:
        path.write_text("".join(f"{q} 0 {d} {r}\n" for q, d, r in self.qrels))
        return path

    def write_split_lists(self, directory: Path) -> dict[str, str]:
        paths = {}
        for split, qids in self.split_lists.items():
            paths[f"{split}_qids"] = str(directory / f"{split}.qids")
            Path(paths[f"{split}_qids"]).write_text("# qids\n" + "".join(q + "\n" for q in qids))
        return paths

    def write_tsv(self, directory: Path) -> dict[str, str]:
        """Writes the MS MARCO TSV layout; returns the config path keys."""
        directory.mkdir(parents=True, exist_ok=True)
        return {
            "documents": str(self.write_tsv_docs(directory / "collection.tsv")),
            "queries": str(self.write_tsv_queries(directory / "queries.tsv")),
            "qrels": str(self.write_qrels(directory / "qrels.txt")),
            **self.write_split_lists(directory),
        }


def tiny_configs(
    paths: dict[str, str],
    documents_format: str = "msmarco_tsv",
    queries_format: str = "msmarco_tsv",
    policy: str = "fail",
    **datagen: Any,
) -> tuple[dict, dict]:
    """Collection/datagen dicts for a tiny collection written by `Tiny.write_*`."""
    collection = CollectionConfig(
        name="tiny",
        documents=paths["documents"],
        documents_format=documents_format,
        queries=paths["queries"],
        queries_format=queries_format,
        qrels=paths["qrels"],
        qrels_format="trec_qrels",
        first_stage_run=paths.get("run"),
    )
    split = datagen.pop("split", None) or {
        "method": "explicit",
        "train_qids": paths["train_qids"],
        "dev_qids": paths["dev_qids"],
        "test_qids": paths["test_qids"],
    }
    cfg = {
        "candidates_depth": 10,
        "vocab": {"size": 200},
        "sampling": {"mode": "pairwise", "samples_per_query": 4, "positive_threshold": 1},
        "max_query_length": 8,
        "max_doc_length": 24,
        "on_bad_record": policy,
        "split": split,
    }
    for key, value in datagen.items():
        if isinstance(value, dict):
            cfg.setdefault(key, {}).update(value)
        else:
            cfg[key] = value
    datagen_cfg = _build_datagen(cfg)
    return dataclasses.asdict(collection), dataclasses.asdict(datagen_cfg)


def _build_datagen(cfg: dict) -> DatagenConfig:
    return DatagenConfig.from_dict(cfg)


def named_config(name: str, *overrides: str) -> tuple[dict, dict]:
    """Collection/datagen dicts of a config in pipelines/configs/, with --set overrides."""
    config = load_config(name, list(overrides))
    return dataclasses.asdict(config.collection), dataclasses.asdict(config.datagen)


# Cranfield with its own BM25. Fewer training samples than the shipped config (8, not 64): the
# tests check rules per group, not volume; dev/test keep the full depth of 100. Three shards
# check the -SSSSS-of-NNNNN naming and that hashing spreads examples over all of them.
CRANFIELD_OVERRIDES = ("datagen.sampling.samples_per_query=8", "datagen.num_shards=3")


def cranfield_config(*overrides: str) -> tuple[dict, dict]:
    return named_config("cranfield-knrm", *overrides)


if __name__ == "__main__":  # the child process of run_pipeline
    _spec_path = Path(sys.argv[1])
    _spec = json.loads(_spec_path.read_text())
    try:
        _result = _run_pipeline_here(_spec)
    except Exception as e:  # reported to the parent, which raises PipelineRunError
        _result = {"error_type": type(e).__name__, "error": str(e)}
    (_spec_path.parent / "result.json").write_text(json.dumps(_result))
