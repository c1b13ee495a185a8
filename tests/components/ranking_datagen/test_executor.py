"""RankingDataGen end to end: real collections on LocalDagRunner, and every bad-input case on
tiny hand-written collections (through the executor, under both policies).

LocalDagRunner runs (each once per session): Cranfield + BM25 (conftest), the same again on
the other runner modes (determinism), Cranfield + the Lucene run + a given vocab, the
MS MARCO DL19 subset, a tiny TREC SGML/topics collection and a tiny MS MARCO TSV collection
with a first-stage run; plus one that fails at once (driver-side error).
"""

from __future__ import annotations

import json
import re
from collections import Counter, defaultdict
from collections.abc import Sequence
from pathlib import Path

import pytest
import tensorflow as tf
import yaml
from bm25_reference import sharded_bm25_run
from datagen_testlib import (
    CRANFIELD_OVERRIDES,
    SPLITS,
    Outputs,
    PipelineRunError,
    Tiny,
    cranfield_config,
    feature,
    leftover_files,
    load_collection,
    named_config,
    run_executor,
    run_pipeline,
    tiny_configs,
)
from tensorflow_metadata.proto.v0 import schema_pb2
from tensorflow_transform.tf_metadata import schema_utils

from components import beam_mode
from components.ranking_datagen import beam_transforms, splits, tokenization
from components.ranking_datagen.readers import BadRecordError
from components.ranking_datagen.splits import kfold_split
from pipelines.config import CONFIG_DIR
from rankcore import folds

REPO = Path(__file__).resolve().parents[3]
SCHEMA = REPO / "schemas" / "ranking_examples" / "schema.pbtxt"


# ------------------------------------------------------------------------------------------
# Independent readers of the expected values
# ------------------------------------------------------------------------------------------


def cranfield_gains(path: Path) -> dict[tuple[str, str], int]:
    """cranqrel -> gain: 5 - code for codes 1..4, code -1 -> 0 (judged non-relevant)."""
    gains = {}
    for line in path.read_text().splitlines():
        qid, docid, code = line.split()
        gains[(qid, docid)] = 0 if int(code) == -1 else 5 - int(code)
    return gains


def trec_order(run_path: Path, depth: int) -> dict[str, list[tuple[str, float]]]:
    """A TREC run's top-`depth` per query as trec_eval ranks it (score desc, docno desc)."""
    by_qid: dict[str, list[tuple[str, float]]] = defaultdict(list)
    for line in run_path.read_text().splitlines():
        cols = line.split()
        by_qid[cols[0]].append((cols[2], float(cols[4])))
    ranked = {}
    for q, rows in by_qid.items():
        rows = sorted(rows, key=lambda r: r[0], reverse=True)  # docno descending, then (stable)
        ranked[q] = sorted(rows, key=lambda r: -r[1])[:depth]  # score descending
    return ranked


def examples_by_qid(outputs: Outputs, split: str) -> dict[str, list[tf.train.Example]]:
    grouped: dict[str, list[tf.train.Example]] = defaultdict(list)
    for ex in outputs.examples(split):
        grouped[feature(ex, "qid")[0]].append(ex)
    return grouped


def eval_rows(examples: list[tf.train.Example]) -> list[tuple]:
    """Eval examples of one query as (rank, docid, score, label, judged), in rank order."""
    rows = []
    for ex in examples:
        assert len(feature(ex, "docids")) == 1
        rows.append(
            (
                feature(ex, "first_stage_ranks")[0],
                feature(ex, "docids")[0],
                feature(ex, "first_stage_scores")[0],
                feature(ex, "labels")[0],
                feature(ex, "judged")[0],
            )
        )
    return sorted(rows)


def doc_tokens(outputs: Outputs) -> dict[str, list[int]]:
    tokens: dict[str, list[int]] = {}
    for split in SPLITS:
        for ex in outputs.examples(split):
            ids, offset = feature(ex, "doc_ids"), 0
            for docid, n in zip(feature(ex, "docids"), feature(ex, "doc_lengths")):
                tokens.setdefault(docid, ids[offset : offset + n])
                offset += n
    return tokens


def check_schema(outputs: Outputs, split_names: Sequence[str] = SPLITS) -> int:
    """Checks every example of `split_names` against schema.pbtxt (types, value counts,
    domains) and parses them with the feature spec derived from it. Returns the number of
    examples checked."""
    from google.protobuf import text_format

    schema = text_format.Parse(SCHEMA.read_text(), schema_pb2.Schema())
    kinds = {
        schema_pb2.BYTES: "bytes_list",
        schema_pb2.INT: "int64_list",
        schema_pb2.FLOAT: "float_list",
    }
    spec = schema_utils.schema_as_feature_spec(schema).feature_spec
    assert sorted(spec) == sorted(f.name for f in schema.feature)
    checked = 0
    for split in split_names:
        serialized = []
        for ex in outputs.examples(split):
            assert sorted(ex.features.feature) == sorted(spec)
            for f in schema.feature:
                values = ex.features.feature[f.name]
                assert values.WhichOneof("kind") == kinds[f.type], f.name
                n = len(getattr(values, kinds[f.type]).value)
                assert n >= f.value_count.min, f.name
                if f.value_count.max:
                    assert n <= f.value_count.max, f.name
                if f.HasField("int_domain"):
                    v = getattr(values, kinds[f.type]).value
                    assert min(v) >= f.int_domain.min, f.name
                    if f.int_domain.HasField("max"):
                        assert max(v) <= f.int_domain.max, f.name
            n_docs = len(feature(ex, "docids"))
            for name in ("labels", "judged", "first_stage_scores", "first_stage_ranks"):
                assert len(feature(ex, name)) == n_docs, name
            assert len(feature(ex, "doc_lengths")) == n_docs
            assert sum(feature(ex, "doc_lengths")) == len(feature(ex, "doc_ids"))
            serialized.append(ex.SerializeToString())
            checked += 1
        if serialized:
            parsed = tf.io.parse_example(tf.constant(serialized), spec)
            assert parsed["qid"].dense_shape[0] == len(serialized)
    return checked


# ------------------------------------------------------------------------------------------
# Cranfield with its own BM25 (session fixture `cranfield_bm25`, conftest.py)
# ------------------------------------------------------------------------------------------


def test_cranfield_counts_and_artifacts(cranfield_bm25: Outputs, shared_data: Path) -> None:
    summary = cranfield_bm25.summary
    assert summary["documents"] == 1400
    assert summary["queries"] == 225
    assert summary["judged_queries"] == 225
    assert summary["judged_pairs"] == 1837
    assert sum(summary["queries_per_split"].values()) == 225
    assert summary["bad_records"] == {"total": 0, "by_kind": {}, "examples": {}}
    assert summary["first_stage"]["source"] == "bm25"
    assert summary["vocabulary"]["source"] == "learned"
    assert cranfield_bm25.split_names == '["train", "dev", "test"]'
    counters = summary["beam_counters"]
    assert counters["documents"] == 1400
    for split in SPLITS:
        examples = cranfield_bm25.examples(split)
        assert len(examples) == summary["examples_per_split"][split] > 0
        assert counters[f"examples_{split}"] == len(examples)
        names = [p.name for p in cranfield_bm25.shard_files(split)]
        assert names == [f"data_tfrecord-{i:05d}-of-00003.gz" for i in range(3)]
    # Train: at most samples_per_query (8) per train query; dev/test: every candidate.
    train_qids = Counter(feature(e, "qid")[0] for e in cranfield_bm25.examples("train"))
    assert max(train_qids.values()) <= 8
    run = cranfield_bm25.run_lines()
    per_qid = Counter(cols[0] for cols in run)
    assert len(per_qid) == 225 and max(per_qid.values()) == 100
    for split in ("dev", "test"):
        qids = {q for q, s in _kfold(summary).items() if s == split}
        assert summary["examples_per_split"][split] == sum(per_qid[q] for q in qids)
    # Qrels artifact: all 1837 judgments with their gains.
    gains = cranfield_gains(shared_data / "cranfield" / "cranqrel")
    qrels_lines = Path(cranfield_bm25.uris["qrels"], "qrels.txt").read_text().splitlines()
    assert {(q, d): int(r) for q, _, d, r in map(str.split, qrels_lines)} == gains
    vocab = cranfield_bm25.vocab
    assert vocab[:5] == tokenization.RESERVED_TOKENS and 1000 < len(vocab) <= 8000
    md = Path(cranfield_bm25.uris["summary"], "summary.md").read_text()
    assert "| documents | 1400 |" in md


def test_the_configured_stemmer_reaches_the_pipelines_bm25(
    cranfield_bm25: Outputs, shared_data: Path
) -> None:
    """cranfield-knrm.yaml sets datagen.bm25.stemmer: porter: the first-stage run RankingDataGen
    writes is the stemmed sharded BM25 (scores to 1e-6), not the unstemmed one."""
    config = yaml.safe_load((CONFIG_DIR / "cranfield-knrm.yaml").read_text())
    bm25 = config["datagen"]["bm25"]
    assert bm25["stemmer"] == "porter"
    docs, queries = load_collection(shared_data, "cranfield")
    written: dict[str, dict[str, float]] = defaultdict(dict)
    for qid, _, docid, _, score, _ in cranfield_bm25.run_lines():
        written[qid][docid] = float(score)
    for stemmer, same in (("porter", True), ("none", False)):
        expected = sharded_bm25_run(docs, queries, 100, bm25["k1"], bm25["b"], 1024, stemmer)
        equal = set(expected) == set(written) and all(
            set(expected[q]) == set(written[q])
            and all(abs(expected[q][d] - written[q][d]) <= 1e-6 for d in written[q])
            for q in written
        )
        assert equal == same, stemmer


def _kfold(summary: dict) -> dict[str, str]:
    return {str(q): kfold_split(str(q), 5, 0, 1, 0) for q in range(1, summary["queries"] + 1)}


def test_cranfield_splits_are_disjoint_and_follow_the_qid_hash(cranfield_bm25: Outputs) -> None:
    qids = {s: {feature(e, "qid")[0] for e in cranfield_bm25.examples(s)} for s in SPLITS}
    assert not qids["train"] & qids["dev"]
    assert not qids["train"] & qids["test"]
    assert not qids["dev"] & qids["test"]
    expected = _kfold(cranfield_bm25.summary)
    for split, members in qids.items():
        assert all(expected[q] == split for q in members)
    # Every dev/test query is there (BM25 finds candidates for all of them).
    for split in ("dev", "test"):
        assert qids[split] == {q for q, s in expected.items() if s == split}
        assert len(qids[split]) == cranfield_bm25.summary["queries_per_split"][split]


def test_cranfield_eval_candidates_and_labels(cranfield_bm25: Outputs, shared_data: Path) -> None:
    gains = cranfield_gains(shared_data / "cranfield" / "cranqrel")
    run_path = Path(cranfield_bm25.uris["first_stage_run"], "run.txt")
    ranked = trec_order(run_path, 100)
    run_ranks = {(c[0], c[2]): int(c[3]) for c in cranfield_bm25.run_lines()}
    checked = 0
    for split in ("dev", "test"):
        for qid, examples in examples_by_qid(cranfield_bm25, split).items():
            rows = eval_rows(examples)
            assert [r[1] for r in rows] == [d for d, _ in ranked[qid]]
            assert [r[0] for r in rows] == list(range(1, len(rows) + 1))
            for rank, docid, score, label, judged in rows:
                assert run_ranks[(qid, docid)] == rank
                assert score == pytest.approx(dict(ranked[qid])[docid], rel=1e-6)
                assert label == max(gains.get((qid, docid), 0), 0)
                assert judged == int((qid, docid) in gains)
                checked += 1
    assert checked == sum(cranfield_bm25.summary["examples_per_split"][s] for s in ("dev", "test"))


def test_cranfield_training_pairs(cranfield_bm25: Outputs, shared_data: Path) -> None:
    gains = cranfield_gains(shared_data / "cranfield" / "cranqrel")
    candidates = defaultdict(dict)
    for cols in cranfield_bm25.run_lines():
        candidates[cols[0]][cols[2]] = int(cols[3])
    examples = cranfield_bm25.examples("train")
    for ex in examples:
        qid = feature(ex, "qid")[0]
        pos, neg = feature(ex, "docids")
        labels = feature(ex, "labels")
        assert gains[(qid, pos)] >= 2  # cranfield-knrm.yaml: positive_threshold 2
        assert labels == [gains[(qid, pos)], max(gains.get((qid, neg), 0), 0)]
        assert labels[1] < labels[0]
        assert neg in candidates[qid]
        ranks = feature(ex, "first_stage_ranks")
        assert ranks[1] == candidates[qid][neg]
        assert ranks[0] == candidates[qid].get(pos, len(candidates[qid]) + 1)
        assert feature(ex, "judged") == [1, int((qid, neg) in gains)]
        assert len(feature(ex, "query_ids")) <= 32
        assert max(feature(ex, "doc_lengths")) <= 192


def test_cranfield_examples_conform_to_schema(cranfield_bm25: Outputs) -> None:
    assert check_schema(cranfield_bm25) == sum(
        cranfield_bm25.summary["examples_per_split"].values()
    )


# Every way the pipeline may be scheduled: the DirectRunner's three modes (the session fixture
# `cranfield_bm25` is in_memory) and the portable Fn API path that Flink, Spark and Dataflow use
# (the embedded job server, SDK worker in this process). Bundles, worker counts, stage fusion
# and fused-stage ordering all differ between them; the bytes written must not.
# multi_processing and multi_threading run on components/beam_direct.py's runner: Beam's own
# modes lose elements, or cut them in two, with the timed flush of their data plane
# (docs/datagen.md "Runners").
RUNNER_MODES = {
    "multi_threading": ["--direct_running_mode=multi_threading", "--direct_num_workers=2"],
    "multi_processing": ["--direct_running_mode=multi_processing", "--direct_num_workers=2"],
    "portable": ["--runner=PortableRunner", "--job_endpoint=embed", "--environment_type=LOOPBACK"],
}


@pytest.fixture(scope="module", params=sorted(RUNNER_MODES))
def cranfield_other_runner(
    request: pytest.FixtureRequest,
    cranfield_bm25: Outputs,
    tmp_path_factory: pytest.TempPathFactory,
) -> Outputs:
    # Cranfield is small enough that RankingDataGen would run in process on its own
    # (components/beam_mode.py): switched off, so each mode really runs as named.
    with pytest.MonkeyPatch.context() as env:
        env.setenv(beam_mode.THRESHOLD_ENV, "0")
        return run_pipeline(
            tmp_path_factory.mktemp(f"cranfield-{request.param}"),
            *cranfield_config(*CRANFIELD_OVERRIDES),
            beam_args=RUNNER_MODES[request.param],
        )


def test_same_config_gives_byte_identical_outputs_on_every_runner(
    cranfield_bm25: Outputs, cranfield_other_runner: Outputs
) -> None:
    compared = 0
    for split in SPLITS:
        first, second = cranfield_bm25.shard_files(split), cranfield_other_runner.shard_files(split)
        assert [p.name for p in first] == [p.name for p in second]
        for a, b in zip(first, second):
            assert a.read_bytes() == b.read_bytes(), a.name
            compared += 1
    assert compared == 9
    for key, name in (("vocabulary", "vocab.txt"), ("first_stage_run", "run.txt")):
        a = Path(cranfield_bm25.uris[key], name).read_bytes()
        assert a == Path(cranfield_other_runner.uris[key], name).read_bytes()
    graph = Path(cranfield_bm25.uris["transform_graph"])
    other_graph = Path(cranfield_other_runner.uris["transform_graph"])
    assert (graph / "transform_fn" / "assets" / "vocab.txt").read_bytes() == (
        other_graph / "transform_fn" / "assets" / "vocab.txt"
    ).read_bytes()
    # The summary too, Beam counters included (portable runners report them as attempted
    # values only: they must still be counted).
    drop = {"seconds", "timings"}
    summary = {k: v for k, v in cranfield_bm25.summary.items() if k not in drop}
    assert summary["beam_counters"]["texts_d"] > 0
    assert summary == {k: v for k, v in cranfield_other_runner.summary.items() if k not in drop}


# ------------------------------------------------------------------------------------------
# Cranfield with the Lucene run and a given vocabulary
# ------------------------------------------------------------------------------------------

LUCENE_DEPTH = 20


@pytest.fixture(scope="module")
def cranfield_lucene(
    cranfield_bm25: Outputs, shared_data: Path, tmp_path_factory: pytest.TempPathFactory
) -> Outputs:
    vocab_file = Path(cranfield_bm25.uris["vocabulary"], "vocab.txt")
    run = shared_data / "cranfield" / "runs" / "lucene-english-100.run"
    config = cranfield_config(
        f"collection.first_stage_run={run}",
        f"datagen.vocab.vocab_file={vocab_file}",
        f"datagen.candidates_depth={LUCENE_DEPTH}",
        "datagen.sampling.samples_per_query=4",
    )

    # The learner raises in that run: a given vocabulary must skip learning.
    return run_pipeline(
        tmp_path_factory.mktemp("cranfield-lucene"), *config, forbid_vocab_learning=True
    )


def test_candidates_come_from_the_given_run(cranfield_lucene: Outputs, shared_data: Path) -> None:
    run_path = shared_data / "cranfield" / "runs" / "lucene-english-100.run"
    expected = trec_order(run_path, LUCENE_DEPTH)
    summary = cranfield_lucene.summary
    assert summary["first_stage"] == {
        "source": "first_stage",
        "depth": LUCENE_DEPTH,
        "queries_with_candidates": 225,
        "run_qids_without_query": 0,
    }
    checked = ties = 0
    for split in ("dev", "test"):
        for qid, examples in examples_by_qid(cranfield_lucene, split).items():
            rows = eval_rows(examples)
            assert [(r[1], r[2]) for r in rows] == [
                (d, pytest.approx(s, rel=1e-6)) for d, s in expected[qid]
            ]
            scores = [s for _, s in expected[qid]]
            ties += len(scores) - len(set(scores))
            checked += 1
    assert checked == summary["queries_per_split"]["dev"] + summary["queries_per_split"]["test"]
    assert ties >= 2  # tied scores occur, so the docno tie-break is exercised
    # The run artifact is the same top-k, ranks 1..k (the input's rank column is all 0).
    written = defaultdict(list)
    for cols in cranfield_lucene.run_lines():
        written[cols[0]].append((cols[2], int(cols[3])))
    assert {q: [d for d, _ in rows] for q, rows in written.items()} == {
        q: [d for d, _ in rows] for q, rows in expected.items()
    }
    assert all([r for _, r in rows] == list(range(1, 21)) for rows in written.values())
    for ex in cranfield_lucene.examples("train"):
        qid = feature(ex, "qid")[0]
        assert feature(ex, "docids")[1] in dict(expected[qid])


def test_given_vocab_is_used_as_is(cranfield_lucene: Outputs, cranfield_bm25: Outputs) -> None:
    assert cranfield_lucene.summary["vocabulary"] == {
        "source": "file",
        "size": len(cranfield_bm25.vocab),
    }
    assert cranfield_lucene.vocab == cranfield_bm25.vocab
    # Same vocabulary, same graph: a document gets the same ids in both runs.
    mine, theirs = doc_tokens(cranfield_lucene), doc_tokens(cranfield_bm25)
    common = sorted(set(mine) & set(theirs))
    assert len(common) > 500
    assert all(mine[d] == theirs[d] for d in common)


# ------------------------------------------------------------------------------------------
# MS MARCO DL19 subset (BEIR layout)
# ------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def msmarco(shared_env: Path, tmp_path_factory: pytest.TempPathFactory) -> Outputs:
    configs = named_config("msmarco-subset-knrm", "datagen.sampling.samples_per_query=8")
    return run_pipeline(tmp_path_factory.mktemp("msmarco"), *configs)


def test_msmarco_counts_splits_and_labels(msmarco: Outputs, shared_data: Path) -> None:
    grades = {}
    for line in (shared_data / "msmarco-dl19-subset" / "qrels" / "test.tsv").open():
        qid, docid, grade = line.rstrip("\n").split("\t")
        grades[(qid, docid)] = int(grade)
    summary = msmarco.summary
    assert (summary["documents"], summary["queries"]) == (5000, 50)
    assert (summary["judged_queries"], summary["judged_pairs"]) == (43, 4102)
    assert sum(summary["queries_per_split"].values()) == 43
    qids = {s: {feature(e, "qid")[0] for e in msmarco.examples(s)} for s in SPLITS}
    assert (
        not (qids["train"] & qids["dev"])
        | (qids["train"] & qids["test"])
        | (qids["dev"] & qids["test"])
    )
    for split, members in qids.items():
        assert members and all(kfold_split(q, 5, 0, 1, 0) == split for q in members)
    unjudged = 0
    for split in ("dev", "test"):
        for qid, examples in examples_by_qid(msmarco, split).items():
            rows = eval_rows(examples)
            assert len(rows) == 100  # depth 100: BM25 matches >100 of 5000 passages
            for _, docid, _, label, judged in rows:
                assert label == grades.get((qid, docid), 0)
                assert judged == int((qid, docid) in grades)
                unjudged += not judged
    assert unjudged > 0
    assert summary["positive_threshold"] == 1  # msmarco-subset-knrm.yaml: auto, 1 on TREC DL
    positive_grades = set()
    for ex in msmarco.examples("train"):
        qid = feature(ex, "qid")[0]
        pos, neg = feature(ex, "docids")
        positive_grades.add(grades[(qid, pos)])
        assert grades.get((qid, neg), 0) < grades[(qid, pos)]
    assert positive_grades == {1, 2, 3}
    assert check_schema(msmarco) == sum(summary["examples_per_split"].values())


# ------------------------------------------------------------------------------------------
# Tiny collections in the other formats, through LocalDagRunner
# ------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tiny_sgml(tmp_path_factory: pytest.TempPathFactory) -> tuple[Tiny, Outputs, dict]:
    tiny = Tiny.make()
    d = tmp_path_factory.mktemp("tiny-sgml-data")
    paths = {
        "documents": str(tiny.write_sgml_docs(d / "docs.sgml")),
        "queries": str(tiny.write_topics(d / "topics.txt")),
        "qrels": str(tiny.write_qrels(d / "qrels.txt")),
        **tiny.write_split_lists(d),
    }
    configs = tiny_configs(
        paths, "trec_sgml", "trec_topics", sampling={"mode": "pointwise", "samples_per_query": 5}
    )
    return tiny, run_pipeline(tmp_path_factory.mktemp("tiny-sgml"), *configs), paths


def test_trec_sgml_and_topics_through_the_component(tiny_sgml) -> None:
    tiny, out, _ = tiny_sgml
    summary = out.summary
    assert (summary["documents"], summary["queries"], summary["judged_pairs"]) == (18, 9, 36)
    assert summary["queries_per_split"] == {"train": 5, "dev": 2, "test": 2}
    for split in SPLITS:
        qids = {feature(e, "qid")[0] for e in out.examples(split)}
        assert qids == set(tiny.split_lists[split])  # the explicit lists decide
    train = out.examples("train")
    assert len(train) == 25 and all(len(feature(e, "docids")) == 1 for e in train)
    # Text = <HEADLINE> + <TEXT>, normalized and tokenized: decode d1 back.
    ids = doc_tokens(out)["d1"]
    vocab = out.vocab
    words = []
    for token in (vocab[i] for i in ids):
        if token.startswith("##"):
            words[-1] += token[2:]
        else:
            words.append(token)
    assert " ".join(words) == "on the wing flutter of wing tests , part 1 " + (
        "wing flutter swept supersonic measured in 2 tunnels ."
    )


def _write_tiny_run(path: Path) -> Path:
    lines = []
    for q in range(1, 10):
        for i in range(5, 17):
            # Pairs of tied scores, so trec_eval's docno tie-break decides: "d9" > "d10".
            lines.append(f"q{q} Q0 d{i} 0 {20 - (i - 5) // 2}.5 tiny")
    lines.append("q99 Q0 d1 0 3.0 tiny")  # a query the collection does not have
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture(scope="module")
def tiny_tsv(tmp_path_factory: pytest.TempPathFactory) -> tuple[Tiny, Outputs, dict]:
    tiny = Tiny.make()
    d = tmp_path_factory.mktemp("tiny-tsv-data")
    paths = tiny.write_tsv(d)
    paths["run"] = str(_write_tiny_run(d / "run.txt"))
    configs = tiny_configs(
        paths,
        sampling={"mode": "listwise", "negatives_per_positive": 3, "samples_per_query": 6},
        candidates_depth=10,
    )
    return tiny, run_pipeline(tmp_path_factory.mktemp("tiny-tsv"), *configs), paths


def test_msmarco_tsv_with_a_run_through_the_component(tiny_tsv) -> None:
    tiny, out, paths = tiny_tsv
    summary = out.summary
    assert (summary["documents"], summary["queries"]) == (18, 9)
    assert summary["first_stage"]["run_qids_without_query"] == 1
    expected = trec_order(Path(paths["run"]), 10)
    assert [d for d, _ in expected["q6"]] == [
        "d6", "d5", "d8", "d7", "d9", "d10", "d12", "d11", "d14", "d13",
    ]  # fmt: skip
    qrels = {(q, d): r for q, d, r in tiny.qrels}
    for split in ("dev", "test"):
        for qid, examples in examples_by_qid(out, split).items():
            rows = eval_rows(examples)
            assert [r[1] for r in rows] == [d for d, _ in expected[qid]]
            assert [r[3] for r in rows] == [qrels.get((qid, r[1]), 0) for r in rows]
    for ex in out.examples("train"):
        docids = feature(ex, "docids")
        qid = feature(ex, "qid")[0]
        assert len(docids) == 4 and len(set(docids[1:])) == 3
        assert set(docids[1:]) <= {d for d, _ in expected[qid]}
        assert feature(ex, "labels")[0] > max(feature(ex, "labels")[1:])
    assert check_schema(out) == sum(summary["examples_per_split"].values())


def test_failed_pipeline_run_publishes_nothing(tmp_path: Path) -> None:
    tiny = Tiny.make()
    paths = tiny.write_tsv(tmp_path / "data")
    with open(paths["queries"], "a") as f:
        f.write("q1\tagain\n")
    root = tmp_path / "pipeline"
    with pytest.raises(PipelineRunError) as err:
        run_pipeline(root, *tiny_configs(paths))
    assert err.value.type_name == "BadRecordError"
    assert re.match(rf"{re.escape(paths['queries'])}:10: duplicate qid 'q1'", err.value.message)
    from ml_metadata.metadata_store import metadata_store
    from tfx import v1 as tfx

    store = metadata_store.MetadataStore(
        tfx.orchestration.metadata.sqlite_metadata_connection_config(str(root / "mlmd.sqlite"))
    )
    assert store.get_artifacts() == []  # nothing published in MLMD
    files = [p for p in (root / "RankingDataGen").rglob("*") if p.is_file()]
    assert [p for p in files if ".system" not in p.parts] == []


# ------------------------------------------------------------------------------------------
# Bad input, through the executor: each case under fail (error names file + line) ...
# ------------------------------------------------------------------------------------------


def _append(path: str, text: str | bytes) -> None:
    with open(path, "ab") as f:
        f.write(text.encode() if isinstance(text, str) else text)


def _sgml_with_unterminated_doc(tiny: Tiny, paths: dict, d: Path) -> None:
    sgml = tiny.write_sgml_docs(d / "docs.sgml")
    sgml.write_text("<DOC>\n<DOCNO> d30 </DOCNO>\n<TEXT> lost\n" + sgml.read_text())
    paths["documents"] = str(sgml)
    paths["documents_format"] = "trec_sgml"


def _run_file(tiny: Tiny, paths: dict, d: Path, bad_line: str) -> None:
    run = d / "run.txt"
    run.write_text(f"q1 Q0 d1 0 3.5 r\n{bad_line}\nq2 Q0 d4 0 2 r\n")
    paths["run"] = str(run)


FAIL_CASES = {
    # name: (mutation, file key, line, problem)
    "docs-wrong-columns": (
        lambda t, p, d: _append(p["documents"], "d20\tfoo\tbar\n"),
        "documents",
        19,
        r"expected 2 tab-separated columns \(id, text\), got 3",
    ),
    "docs-duplicate-id": (
        lambda t, p, d: _append(p["documents"], "d3\tagain\n"),
        "documents",
        19,
        r"duplicate docid 'd3' \(first seen at line 3\)",
    ),
    "docs-empty-text": (
        lambda t, p, d: _append(p["documents"], "d20\t   \n"),
        "documents",
        19,
        r"empty text for docid 'd20'",
    ),
    "docs-undecodable": (
        lambda t, p, d: _append(p["documents"], b"d20\tcaf\xe9 au lait\n"),
        "documents",
        19,
        r"undecodable bytes \(not UTF-8\) at column 8: b'\\xe9 au'",
    ),
    "sgml-unterminated-doc": (
        _sgml_with_unterminated_doc,
        "documents",
        1,
        r"unterminated <DOC> \(next <DOC> at line 4\)",
    ),
    "queries-wrong-columns": (
        lambda t, p, d: _append(p["queries"], "q10\n"),
        "queries",
        10,
        r"expected 2 tab-separated columns \(id, text\), got 1",
    ),
    "queries-duplicate-id": (
        lambda t, p, d: _append(p["queries"], "q1\tagain\n"),
        "queries",
        10,
        r"duplicate qid 'q1' \(first seen at line 1\)",
    ),
    "qrels-non-numeric": (
        lambda t, p, d: _append(p["qrels"], "q1 0 d5 high\n"),
        "qrels",
        37,
        r"non-integer relevance 'high'",
    ),
    "qrels-wrong-columns": (
        lambda t, p, d: _append(p["qrels"], "q1 0 d5\n"),
        "qrels",
        37,
        r"expected 4 columns \(qid iter docid rel\), got 3",
    ),
    "qrels-duplicate-pair": (
        lambda t, p, d: _append(p["qrels"], "q2 0 d4 1\n"),
        "qrels",
        37,
        r"duplicate pair qid 'q2' docid 'd4' \(first seen at line 5\)",
    ),
    "qrels-qid-without-query": (
        lambda t, p, d: _append(p["qrels"], "q42 0 d1 1\n"),
        "qrels",
        37,
        r"qrels qid 'q42' has no query",
    ),
    "qrels-docid-not-in-corpus": (
        lambda t, p, d: _append(p["qrels"], "q2 0 d99 1\n"),
        "qrels",
        37,
        r"judged docid 'd99' \(qid 'q2'\) is not in the corpus",
    ),
    "run-non-numeric-score": (
        lambda t, p, d: _run_file(t, p, d, "q1 Q0 d2 0 high r"),
        "run",
        2,
        r"non-numeric score 'high'",
    ),
    "run-docid-not-in-corpus": (
        lambda t, p, d: _run_file(t, p, d, "q1 Q0 d99 0 3 r"),
        "run",
        2,
        r"run docid 'd99' \(qid 'q1'\) is not in the corpus",
    ),
    "split-list-qid-without-query": (
        lambda t, p, d: _append(p["dev_qids"], "q77\n"),
        "dev_qids",
        4,
        r"qid 'q77' has no query",
    ),
    "split-list-duplicate-qid": (
        lambda t, p, d: _append(p["test_qids"], "q1\n"),
        "test_qids",
        4,
        r"duplicate qid 'q1': already in the train split \(.*train\.qids:2\)",
    ),
}


@pytest.mark.parametrize("case", sorted(FAIL_CASES))
def test_bad_input_fails_naming_file_and_line(case: str, tmp_path: Path) -> None:
    mutate, key, line, problem = FAIL_CASES[case]
    tiny = Tiny.make()
    paths = tiny.write_tsv(tmp_path / "data")
    mutate(tiny, paths, tmp_path / "data")
    fmt = paths.pop("documents_format", "msmarco_tsv")
    with pytest.raises(BadRecordError) as err:
        run_executor(tmp_path / "run", *tiny_configs(paths, documents_format=fmt))
    assert re.fullmatch(rf"{re.escape(paths[key])}:{line}: {problem}", str(err.value)), str(
        err.value
    )
    assert leftover_files(tmp_path / "run") == []  # no partial artifact, no temp files


def test_empty_split_fails_naming_the_split(tmp_path: Path) -> None:
    tiny = Tiny.make()
    paths = tiny.write_tsv(tmp_path / "data")
    used = {splits.fold_of(q, 20, 0) for q in tiny.queries}
    empty_fold, test_fold = min(set(range(20)) - used), min(used)
    split = {"method": "kfold", "num_folds": 20, "dev_fold": empty_fold, "test_fold": test_fold}
    with pytest.raises(BadRecordError) as err:
        run_executor(tmp_path / "run", *tiny_configs(paths, split=split))
    assert str(err.value) == (
        f"{paths['qrels']}:0: split 'dev' is empty: none of the 9 judged queries hashes to "
        f"fold {empty_fold} (datagen.split num_folds=20 seed=0)"
    )
    assert leftover_files(tmp_path / "run") == []


def test_bad_vocab_file_fails_before_reading(tmp_path: Path) -> None:
    tiny = Tiny.make()
    paths = tiny.write_tsv(tmp_path / "data")
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("[UNK]\n[PAD]\nwing\n")
    with pytest.raises(ValueError, match=rf"^{re.escape(str(vocab))}:1: the first token"):
        run_executor(tmp_path / "run", *tiny_configs(paths, vocab={"vocab_file": str(vocab)}))
    assert leftover_files(tmp_path / "run") == []


def test_failure_in_the_encoding_pass_leaves_no_partial_artifact(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def boom(self, element):
        raise RuntimeError("disk full while building examples")

    monkeypatch.setattr(beam_transforms.BuildExample, "process", boom)
    tiny = Tiny.make()
    paths = tiny.write_tsv(tmp_path / "data")
    with pytest.raises(Exception, match="disk full while building examples"):
        run_executor(tmp_path / "run", *tiny_configs(paths))
    assert leftover_files(tmp_path / "run") == []


# ------------------------------------------------------------------------------------------
# ... and under skip (counted by kind, with examples, in summary.json)
# ------------------------------------------------------------------------------------------


def test_bad_input_skipped_and_reported(tmp_path: Path) -> None:
    tiny = Tiny.make()
    paths = tiny.write_tsv(tmp_path / "data")
    docs, queries, qrels = paths["documents"], paths["queries"], paths["qrels"]
    _append(docs, "d20\tfoo\tbar\n")  # 19: three columns
    _append(docs, "d3\tduplicate\n")  # 20: duplicate docid
    _append(docs, "d21\t   \n")  # 21: empty text
    _append(docs, b"d22\tcaf\xe9\n")  # 22: not UTF-8
    _append(queries, "q1\tagain\n")  # 10: duplicate qid
    _append(queries, "q10\n")  # 11: one column
    _append(qrels, "q1 0 d5 high\n")  # 37: non-numeric relevance
    _append(qrels, "q1 0 d5\n")  # 38: three columns
    _append(qrels, "q42 0 d1 1\n")  # 39: qid with no query
    _append(qrels, "q2 0 d99 1\n")  # 40: docid not in the corpus
    _append(qrels, "q2 0 d21 1\n")  # 41: judges the skipped empty document
    _append(paths["dev_qids"], "q77\n")  # 4: listed qid with no query
    out = run_executor(tmp_path / "run", *tiny_configs(paths, policy="skip"))
    summary = out.summary
    bad = summary["bad_records"]
    assert bad["by_kind"] == {"documents": 4, "queries": 2, "qrels": 5, "splits": 1}
    assert bad["total"] == 12
    assert bad["examples"]["documents"] == [
        f"{docs}:19: expected 2 tab-separated columns (id, text), got 3",
        f"{docs}:20: duplicate docid 'd3' (first seen at line 3)",
        f"{docs}:21: empty text for docid 'd21'",
        f"{docs}:22: undecodable bytes (not UTF-8) at column 8: b'\\xe9'",
    ]
    assert bad["examples"]["queries"] == [
        f"{queries}:10: duplicate qid 'q1' (first seen at line 1)",
        f"{queries}:11: expected 2 tab-separated columns (id, text), got 1",
    ]
    assert bad["examples"]["qrels"] == [
        f"{qrels}:37: non-integer relevance 'high'",
        f"{qrels}:38: expected 4 columns (qid iter docid rel), got 3",
        f"{qrels}:39: qrels qid 'q42' has no query",
        f"{qrels}:40: judged docid 'd99' (qid 'q2') is not in the corpus",
        f"{qrels}:41: judged docid 'd21' (qid 'q2') is not in the corpus",
    ]
    assert bad["examples"]["splits"] == [f"{paths['dev_qids']}:4: qid 'q77' has no query"]
    assert summary["beam_counters"]["bad_records_documents"] == 4
    # The good records went through as if the bad ones were not there.
    assert (summary["documents"], summary["queries"], summary["judged_pairs"]) == (18, 9, 36)
    assert summary["queries_per_split"] == {"train": 5, "dev": 2, "test": 2}
    assert all(summary["examples_per_split"][s] > 0 for s in SPLITS)
    assert len(Path(out.uris["qrels"], "qrels.txt").read_text().splitlines()) == 36
    md = Path(out.uris["summary"], "summary.md").read_text()
    assert f"- `{qrels}:39: qrels qid 'q42' has no query`" in md


def test_bad_run_unterminated_doc_and_empty_split_skipped(tmp_path: Path) -> None:
    tiny = Tiny.make()
    d = tmp_path / "data"
    paths = tiny.write_tsv(d)
    _sgml_with_unterminated_doc(tiny, paths, d)
    paths.pop("documents_format")
    run = d / "run.txt"
    rows = [f"q{q} Q0 d{i} 0 {20 - i} r" for q in range(1, 10) for i in range(1, 19)]
    rows[3] = "q1 Q0 d4 0 high r"  # line 4
    rows[40] = "q3 Q0 d404 0 1 r"  # line 41
    run.write_text("\n".join(rows) + "\n")
    paths["run"] = str(run)
    Path(paths["dev_qids"]).write_text("q10\n")  # a qid without query: dev ends up empty
    out = run_executor(
        tmp_path / "run", *tiny_configs(paths, documents_format="trec_sgml", policy="skip")
    )
    bad = out.summary["bad_records"]
    assert bad["by_kind"] == {"documents": 1, "run": 2, "splits": 2}
    assert bad["examples"]["documents"] == [
        f"{paths['documents']}:1: unterminated <DOC> (next <DOC> at line 4)"
    ]
    assert bad["examples"]["run"] == [
        f"{run}:4: non-numeric score 'high'",
        f"{run}:41: run docid 'd404' (qid 'q3') is not in the corpus",
    ]
    assert bad["examples"]["splits"] == [
        f"{paths['dev_qids']}:1: qid 'q10' has no query",
        f"{paths['dev_qids']}:0: split 'dev' is empty: none of its listed qids is a judged "
        "query with a query text",
    ]
    summary = out.summary
    assert summary["examples_per_split"]["dev"] == 0
    assert summary["examples_per_split"]["train"] > 0 and summary["examples_per_split"]["test"]
    # The empty split is still a whole (empty) shard set, so readers of the artifact work.
    assert [p.name for p in out.shard_files("dev")] == ["data_tfrecord-00000-of-00001.gz"]
    assert out.examples("dev") == []
    assert json.loads(json.dumps(summary)) == summary


def _two_document_files(tmp_path: Path) -> tuple[dict, str, str]:
    """The tiny collection with its documents in two files; d5 is in both (different text)."""
    tiny = Tiny.make()
    paths = tiny.write_tsv(tmp_path / "data")
    lines = Path(paths["documents"]).read_text().splitlines(keepends=True)
    Path(paths["documents"]).unlink()
    first, second = tmp_path / "data" / "docs-1.tsv", tmp_path / "data" / "docs-2.tsv"
    first.write_text("".join(lines[:9]))
    second.write_text("".join(lines[9:]) + "d5\tzebra zebra zebra\n")
    paths["documents"] = str(tmp_path / "data" / "docs-*.tsv")
    return paths, str(first), str(second)


def test_duplicate_docid_across_files(tmp_path: Path) -> None:
    paths, first, second = _two_document_files(tmp_path)
    with pytest.raises(BadRecordError) as err:
        run_executor(tmp_path / "fail", *tiny_configs(paths))
    first_lines = Path(first).read_text().splitlines()
    first_line = 1 + next(i for i, line in enumerate(first_lines) if line.startswith("d5\t"))
    second_line = len(Path(second).read_text().splitlines())  # appended last
    assert str(err.value) == (
        f"{second}:{second_line}: duplicate docid 'd5' (first seen at {first}:{first_line}; "
        "that copy is kept)"
    )
    assert leftover_files(tmp_path / "fail") == []
    out = run_executor(tmp_path / "skip", *tiny_configs(paths, policy="skip"))
    summary = out.summary
    assert summary["documents"] == 18  # distinct documents
    assert summary["beam_counters"]["documents"] == 19  # both copies were read ...
    assert summary["bad_records"]["by_kind"] == {"documents": 1}
    # ... and the examples use the first file's text of d5, never the second's.
    vocab = out.vocab
    d5 = doc_tokens(out)["d5"]
    assert "zebra" not in "".join(vocab[i].removeprefix("##") for i in d5)
    assert vocab[d5[0]] == "on"


def test_threshold_above_every_train_grade_fails_naming_the_key(tmp_path: Path) -> None:
    """On Kubeflow nothing checked the config before the component: the executor refuses a
    threshold no train judgment reaches as a config mismatch (key, grades, fix), not as a bad
    record, and leaves nothing behind."""
    paths = Tiny.make().write_tsv(tmp_path / "data")
    with pytest.raises(ValueError) as err:
        run_executor(tmp_path / "run", *tiny_configs(paths, sampling={"positive_threshold": 3}))
    assert str(err.value) == (
        "datagen.sampling.positive_threshold: 3 leaves the train split without a positive: the "
        "train queries' judgments have grades 0 (10x), 1 (5x), 2 (5x); use 1 or auto"
    )
    assert leftover_files(tmp_path / "run") == []


def test_auto_threshold_on_binary_judgments(tmp_path: Path) -> None:
    """A collection judged 0/1 with the default threshold (auto): 1, recorded in the summary."""
    tiny = Tiny.make()
    tiny.qrels = [(q, d, min(r, 1)) for q, d, r in tiny.qrels]
    paths = tiny.write_tsv(tmp_path / "data")
    collection, datagen = tiny_configs(paths, sampling={"positive_threshold": "auto"})
    out = run_executor(tmp_path / "run", collection, datagen)
    summary = out.summary
    assert summary["positive_threshold"] == 1
    assert summary["examples_per_split"]["train"] > 0


def test_shipped_recipe_on_a_binary_beir_collection(
    tmp_path: Path, binary_beir: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 17: the shipped recipe (cranfield.yaml) with only its `collection.*` keys pointed at
    a collection judged 0/1 in the BEIR layout, and no other flag, makes training data: its
    threshold (auto) finds 1. ${RANKPIPE_MINILM} is a stand-in (CI has no `make pretrained`)
    whose vocab.txt spells words letter by letter."""
    minilm = tmp_path / "minilm"
    minilm.mkdir()
    chars = [chr(c) for c in range(ord("a"), ord("z") + 1)] + list("0123456789")
    vocab = tokenization.RESERVED_TOKENS + chars + [f"##{c}" for c in chars]
    (minilm / "vocab.txt").write_text("\n".join(vocab) + "\n")
    for name in ("model.safetensors", "config.json"):
        (minilm / name).write_text("")
    monkeypatch.setenv("RANKPIPE_MINILM", str(minilm))
    mpnet = tmp_path / "mpnet"  # ${RANKPIPE_MPNET}, the companion: only its files must exist
    mpnet.mkdir()
    for name in ("model.safetensors", "config.json", "vocab.txt"):
        (mpnet / name).write_text("")
    monkeypatch.setenv("RANKPIPE_MPNET", str(mpnet))
    data = yaml.safe_load((CONFIG_DIR / "cranfield.yaml").read_text())
    data["collection"].update(binary_beir)
    path = tmp_path / "binary.yaml"
    path.write_text(yaml.safe_dump(data))
    folds = data["evaluator"]["cross_validation"]["folds"]  # the shipped shape: 5 folds
    out = run_executor(tmp_path / "run", *named_config(str(path)), cross_validation_folds=folds)
    summary = out.summary
    assert summary["positive_threshold"] == 1
    for fold in range(folds):
        train = f"fold{fold}_train"
        assert summary["examples_per_split"][train] > 0
        assert len(out.examples(train)) == summary["examples_per_split"][train]


# ------------------------------------------------------------------------------------------
# Cross-validation folds (issue 17): the tiny collection through the executor, k = 5
# ------------------------------------------------------------------------------------------

CV_FOLDS = 5


def _cv_split(num_folds: int = CV_FOLDS, seed: int = 0, **keys: object) -> dict:
    return {"method": "kfold", "num_folds": num_folds, "seed": seed, **keys}


def _cv_seed(qids: list[str], used: bool) -> int:
    """The first kfold seed whose hash leaves no fold of the tiny collection empty (`used`), or
    leaves some fold empty (not `used`)."""
    return next(
        seed
        for seed in range(100)
        if (len({splits.fold_of(q, CV_FOLDS, seed) for q in qids}) == CV_FOLDS) == used
    )


@pytest.fixture(scope="module")
def tiny_cv(tmp_path_factory: pytest.TempPathFactory) -> tuple[Tiny, Outputs, int]:
    tiny = Tiny.make()
    seed = _cv_seed(sorted(tiny.queries), used=True)
    paths = tiny.write_tsv(tmp_path_factory.mktemp("tiny-cv-data"))
    configs = tiny_configs(paths, split=_cv_split(seed=seed))
    out = run_executor(tmp_path_factory.mktemp("tiny-cv"), *configs, cross_validation_folds=5)
    return tiny, out, seed


def _qids(out: Outputs, split: str) -> list[str]:
    return [feature(e, "qid")[0] for e in out.examples(split)]


def test_cross_validation_eval_splits_partition_the_judged_queries(tiny_cv) -> None:
    tiny, out, seed = tiny_cv
    names = folds.split_names(CV_FOLDS)
    assert json.loads(out.split_names) == names
    assert sorted(p.name for p in Path(out.uris["examples"]).iterdir()) == sorted(
        f"Split-{n}" for n in names
    )
    judged = {q for q, _, _ in tiny.qrels}
    with_candidates = judged & {cols[0] for cols in out.run_lines()}
    assert with_candidates == judged  # BM25 finds something for every tiny query
    fold_of = {q: splits.fold_of(q, CV_FOLDS, seed) for q in sorted(judged)}
    seen: dict[str, int] = {}
    for fold in range(CV_FOLDS):
        qids = set(_qids(out, folds.split_name(fold, folds.EVAL)))
        assert qids and not qids & set(seen)  # each query in exactly one eval split ...
        seen.update(dict.fromkeys(qids, fold))
    assert seen == fold_of  # ... the fold its qid hashes to, every judged query in one
    summary = out.summary
    assert summary["cross_validation"] == {
        "folds": CV_FOLDS,
        "seed": seed,
        "queries_per_fold": [sum(f == fold for f in fold_of.values()) for fold in range(5)],
        "fold_of": fold_of,
    }
    assert list(summary["cross_validation"]["fold_of"]) == sorted(judged)
    # Folds line up with the kfold split: dev_fold -> dev, test_fold -> test.
    for qid, fold in fold_of.items():
        assert kfold_split(qid, CV_FOLDS, 0, 1, seed) == {0: "dev", 1: "test"}.get(fold, "train")
    assert list(summary["queries_per_split"]) == names
    assert list(summary["examples_per_split"]) == names
    assert list(summary["shards_per_split"]) == names
    assert summary["judged_queries_without_split"] == 0
    for name in names:
        role_qids = [q for q, f in fold_of.items() if name.startswith(f"fold{f}_")]
        assert summary["queries_per_split"][name] == len(role_qids)
        assert summary["examples_per_split"][name] == len(out.examples(name)) > 0
        assert summary["beam_counters"][f"examples_{name}"] == len(out.examples(name))
    assert check_schema(out, names) == sum(summary["examples_per_split"].values())


def test_cross_validation_train_splits_hold_their_folds_queries(tiny_cv) -> None:
    tiny, out, seed = tiny_cv
    qrels = {(q, d): r for q, d, r in tiny.qrels}
    run = {(cols[0], cols[2]): int(cols[3]) for cols in out.run_lines()}
    for fold in range(CV_FOLDS):
        train = out.examples(folds.split_name(fold, folds.TRAIN))
        qids = Counter(feature(e, "qid")[0] for e in train)
        assert qids and all(splits.fold_of(q, CV_FOLDS, seed) == fold for q in qids)
        assert max(qids.values()) <= 4  # samples_per_query
        for ex in train:  # pairwise: a positive (>= 1) and a lower-judged candidate
            qid, (pos, neg) = feature(ex, "qid")[0], feature(ex, "docids")
            assert qrels[(qid, pos)] >= 1 and qrels.get((qid, neg), 0) < qrels[(qid, pos)]
            assert (qid, neg) in run
        # The eval split of the same fold: every candidate of its queries, in rank order.
        for qid, examples in examples_by_qid(out, folds.split_name(fold, folds.EVAL)).items():
            rows = eval_rows(examples)
            assert [(qid, r[1]) for r in rows] == sorted(
                ((q, d) for q, d in run if q == qid), key=lambda k: run[k]
            )
            assert [r[3] for r in rows] == [qrels.get((qid, r[1]), 0) for r in rows]


@pytest.mark.parametrize(
    "split, folds_given, message",
    [
        (
            _cv_split(num_folds=4),
            5,
            "cross_validation_folds=5 (evaluator.cross_validation.folds) needs "
            "datagen.split.num_folds=5 (the folds are its qid hash), got 4",
        ),
        (
            None,  # tiny_configs' explicit lists
            5,
            "cross_validation_folds=5 (evaluator.cross_validation.folds) needs "
            "datagen.split.method kfold (the folds are its qid hash), got 'explicit'",
        ),
        (
            _cv_split(num_folds=11, dev_fold=0, test_fold=1),
            11,
            "cross-validation needs 3 to 10 folds (one tests, one validates, at least one "
            "trains), got 11",
        ),
    ],
    ids=["num-folds", "explicit", "too-many"],
)
def test_cross_validation_config_mismatch_fails_naming_both_keys(
    split: dict | None, folds_given: int, message: str, tmp_path: Path
) -> None:
    from components.ranking_datagen.component import RankingDataGen

    paths = Tiny.make().write_tsv(tmp_path / "data")
    collection, datagen = tiny_configs(paths, split=split)
    with pytest.raises(ValueError) as err:
        run_executor(tmp_path / "run", collection, datagen, cross_validation_folds=folds_given)
    assert str(err.value) == message
    assert leftover_files(tmp_path / "run") == []
    with pytest.raises(ValueError) as err:  # already when the pipeline is built
        RankingDataGen(collection, datagen, cross_validation_folds=folds_given)
    assert str(err.value) == message


def test_cross_validation_property_is_set_only_when_on(tmp_path: Path) -> None:
    from components.ranking_datagen.component import RankingDataGen

    paths = Tiny.make().write_tsv(tmp_path / "data")
    collection, datagen = tiny_configs(paths, split=_cv_split())
    assert "cross_validation_folds" not in RankingDataGen(collection, datagen).exec_properties
    on = RankingDataGen(collection, datagen, cross_validation_folds=CV_FOLDS)
    assert on.exec_properties["cross_validation_folds"] == CV_FOLDS


def test_cross_validation_empty_fold_fails_naming_the_fold(tmp_path: Path) -> None:
    tiny = Tiny.make()
    seed = _cv_seed(sorted(tiny.queries), used=False)
    empty = min(set(range(CV_FOLDS)) - {splits.fold_of(q, CV_FOLDS, seed) for q in tiny.queries})
    paths = tiny.write_tsv(tmp_path / "data")
    configs = tiny_configs(paths, split=_cv_split(seed=seed))
    with pytest.raises(BadRecordError) as err:
        run_executor(tmp_path / "run", *configs, cross_validation_folds=CV_FOLDS)
    assert str(err.value) == (
        f"{paths['qrels']}:0: split 'fold{empty}_train' is empty: none of the 9 judged queries "
        f"hashes to fold {empty} (datagen.split num_folds={CV_FOLDS} seed={seed})"
    )
    assert leftover_files(tmp_path / "run") == []


def test_cross_validation_threshold_counts_every_judged_query(tmp_path: Path) -> None:
    """Every query trains in some fold: the threshold is checked against all 9 queries' grades
    (the explicit train list alone has 5)."""
    paths = Tiny.make().write_tsv(tmp_path / "data")
    configs = tiny_configs(paths, split=_cv_split(), sampling={"positive_threshold": 3})
    with pytest.raises(ValueError) as err:
        run_executor(tmp_path / "run", *configs, cross_validation_folds=CV_FOLDS)
    assert str(err.value) == (
        "datagen.sampling.positive_threshold: 3 leaves the train split without a positive: the "
        "train queries' judgments have grades 0 (18x), 1 (9x), 2 (9x); use 1 or auto"
    )
