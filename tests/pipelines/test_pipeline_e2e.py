"""End to end: `rankpipe run` on Cranfield (real data) with LocalDagRunner and SQLite MLMD.

One full run (small training budget) and one identical re-run, shared by the tests below, which
check the artifacts each component produced, not only exit codes.
"""

from __future__ import annotations

import glob
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import tensorflow as tf
import tensorflow_text  # noqa: F401  (registers the tokenizer ops inside the SavedModel)
from ml_metadata import metadata_store
from ml_metadata.proto import metadata_store_pb2

from components.ranking_datagen import readers
from pipelines.config import load_config
from rankcore.metrics import read_run

pytestmark = pytest.mark.e2e

OVERRIDES = [
    "runner.pipeline_name=rankpipe-e2e-cranfield",
    "datagen.vocab.size=4000",
    "datagen.max_doc_length=128",
    "datagen.sampling.samples_per_query=24",
    "trainer.train_steps=300",
    "trainer.batch_size=32",
    "trainer.checkpoint_every=100",
    "trainer.validate_every=100",
    "trainer.log_every=10",
    # Bless whatever a short training gives, so the push path runs; the rules have unit tests.
    "evaluator.min_values={}",
    "evaluator.min_delta_vs_first_stage=null",
]


# A third run: a KNRM trained for one step, without fusion (it ranks far below BM25 on
# Cranfield and below the model run 1 pushed), under both rules that refuse a regression: the
# default first-stage rule (min_delta_vs_first_stage 0.0) and the rule against the served model
# (run 1's push, the baseline found under the same push destination). Each rule must refuse it
# on its own: the reasons name both (a mutation that drops either rule turns a test below red).
WORSE = [
    "trainer.train_steps=1",
    "trainer.ranking.fusion.mode=none",
    "evaluator.min_delta_vs_first_stage=0.0",
    "evaluator.min_delta_vs_baseline=0.0",
]


def _run(env: dict[str, str], extra: list[str] = ()) -> subprocess.CompletedProcess:
    args = [sys.executable, "-m", "pipelines.cli", "run", "cranfield-knrm"]
    for override in [*OVERRIDES, *extra]:
        args += ["--set", override]
    return subprocess.run(args, env=env, capture_output=True, text=True, check=False)


@pytest.fixture(scope="module")
def e2e(tmp_path_factory, shared_data: Path):
    outputs = tmp_path_factory.mktemp("outputs")
    env = dict(os.environ, RANKPIPE_OUTPUTS=str(outputs), RANKPIPE_SHARED_DATA=str(shared_data))
    first = _run(env)
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-5000:]
    second = _run(env)
    assert second.returncode == 0, second.stderr[-5000:]
    old = os.environ.get("RANKPIPE_OUTPUTS")
    os.environ["RANKPIPE_OUTPUTS"] = str(outputs)
    try:
        config = load_config("cranfield-knrm", OVERRIDES)
    finally:
        if old is None:
            os.environ.pop("RANKPIPE_OUTPUTS")
        else:
            os.environ["RANKPIPE_OUTPUTS"] = old
    store = metadata_store.MetadataStore(
        metadata_store_pb2.ConnectionConfig(
            sqlite=metadata_store_pb2.SqliteMetadataSourceConfig(
                filename_uri=config.runner.metadata_path
            )
        )
    )
    return {"config": config, "first": first, "second": second, "store": store, "env": env}


def _latest(store, type_name: str):
    artifacts = store.get_artifacts_by_type(type_name)
    assert artifacts, f"no {type_name} artifact in MLMD"
    return max(artifacts, key=lambda a: a.id)


def _count(pattern: str) -> int:
    return sum(1 for path in glob.glob(pattern) for _ in tf.data.TFRecordDataset(path, "GZIP"))


def test_examples_have_three_disjoint_splits(e2e) -> None:
    examples = _latest(e2e["store"], "Examples")
    qids = {}
    for split in ("train", "dev", "test"):
        files = sorted(glob.glob(os.path.join(examples.uri, f"Split-{split}", "*")))
        assert files and all(f.endswith(f"-of-{len(files):05d}.gz") for f in files)
        qids[split] = {
            tf.train.Example.FromString(r.numpy()).features.feature["qid"].bytes_list.value[0]
            for f in files
            for r in tf.data.TFRecordDataset(f, "GZIP")
        }
    assert qids["train"].isdisjoint(qids["dev"]) and qids["train"].isdisjoint(qids["test"])
    assert qids["dev"].isdisjoint(qids["test"])
    # Cranfield: 225 judged queries, split about 60/20/20 by qid hash.
    total = sum(len(q) for q in qids.values())
    assert 215 <= total <= 225
    assert len(qids["test"]) >= 30 and len(qids["dev"]) >= 30


def _logged_losses(model_run_uri: str) -> dict[int, float]:
    """step -> training loss, from the Trainer's TensorBoard events in the ModelRun artifact."""
    losses = {}
    pattern = os.path.join(model_run_uri, "**", "train", "events.out.tfevents.*")
    for path in glob.glob(pattern, recursive=True):
        for record in tf.data.TFRecordDataset(path):
            event = tf.compat.v1.Event.FromString(record.numpy())
            for value in event.summary.value:
                if value.tag == "loss":
                    losses[event.step] = float(tf.make_ndarray(value.tensor))
    return losses


def test_training_loss_falls_on_cranfield(e2e) -> None:
    losses = _logged_losses(_latest(e2e["store"], "ModelRun").uri)
    steps = sorted(losses)
    assert steps == list(range(10, 301, 10))  # log_every=10 over 300 steps
    first = sum(losses[s] for s in steps[:5]) / 5
    last = sum(losses[s] for s in steps[-5:]) / 5
    assert last < 0.8 * first, (first, last, losses)


def test_model_exports_both_signatures(e2e) -> None:
    model = _latest(e2e["store"], "Model")
    loaded = tf.saved_model.load(os.path.join(model.uri, "Format-Serving"))
    assert {"serving_default", "score_examples", "rank_candidates"} <= set(loaded.signatures)
    scores = loaded.signatures["serving_default"](
        query=tf.constant(["heat conduction in composite slabs"] * 2),
        document=tf.constant(["heat conduction in a composite slab", "wing flutter at mach 2"]),
    )["score"].numpy()
    assert scores.shape == (2,)


def test_evaluation_has_runs_metrics_and_report(e2e, shared_data: Path) -> None:
    evaluation = _latest(e2e["store"], "ModelEvaluation")
    with open(os.path.join(evaluation.uri, "metrics.json")) as f:
        metrics = json.load(f)
    config = e2e["config"]
    for system in ("candidate", "first_stage"):
        assert set(config.evaluator.measures) <= set(metrics["aggregate"][system])
    assert metrics["num_queries"] >= 30
    # Relevant documents the first stage missed still count: recall_1000 of the first stage
    # (top 100 only) is below 1 on Cranfield.
    assert metrics["aggregate"]["first_stage"]["recall_1000"] < 1.0
    for name in ("candidate.run", "first_stage.run", "report.md", "report.html"):
        assert os.path.getsize(os.path.join(evaluation.uri, name)) > 0
    # Ranks in the candidate run follow the scores.
    rows = [line.split() for line in open(os.path.join(evaluation.uri, "candidate.run"))]
    by_query: dict[str, list[tuple[int, float]]] = {}
    for qid, _, _, rank, score, _ in rows:
        by_query.setdefault(qid, []).append((int(rank), float(score)))
    for ranked in by_query.values():
        ranked.sort()
        assert [r for r, _ in ranked] == list(range(1, len(ranked) + 1))
        assert all(a[1] >= b[1] for a, b in zip(ranked, ranked[1:]))


def test_blessing_and_push_serve_raw_text(e2e, shared_data: Path) -> None:
    store = e2e["store"]
    blessing = _latest(store, "ModelBlessing")
    assert blessing.custom_properties["blessed"].int_value == 1
    assert os.path.exists(os.path.join(blessing.uri, "BLESSED"))
    pushed = min(store.get_artifacts_by_type("PushedModel"), key=lambda a: a.id)
    assert pushed.custom_properties["pushed"].int_value == 1
    destination = pushed.custom_properties["pushed_destination"].string_value
    assert destination in e2e["first"].stdout

    # The pushed model scores raw text exactly as the evaluator scored the same pairs (the
    # reranker alone: the shipped config fuses with BM25, so candidate.run is the fused run).
    evaluation = _latest(store, "ModelEvaluation")
    with open(os.path.join(evaluation.uri, "metrics.json")) as f:
        metrics = json.load(f)
    assert metrics["fusion"]["mode"] == "tuned" and metrics["runs"]["reranker"] == "reranker.run"
    run_rows = [line.split() for line in open(os.path.join(evaluation.uri, "reranker.run"))]
    sample = run_rows[:: max(1, len(run_rows) // 20)][:20]
    cran = shared_data / "cranfield"
    queries = {
        q.qid: q.text
        for q in readers.get_reader("queries", "cranfield").read(str(cran / "cran.qry"))
    }
    docs = {
        d.docid: d.text
        for d in readers.get_reader("documents", "cranfield", allow_empty_text=True).read(
            str(cran / "cran.all.1400")
        )
    }
    model = tf.saved_model.load(destination)
    scores = model.signatures["serving_default"](
        query=tf.constant([queries[r[0]] for r in sample]),
        document=tf.constant([docs[r[2]] for r in sample]),
    )["score"].numpy()
    expected = [float(r[4]) for r in sample]
    assert scores.tolist() == pytest.approx(expected, abs=1e-5)

    # Its rank_candidates signature fuses one query's candidates with their first-stage scores
    # exactly as the evaluator fused them (candidate.run), at the alpha the Trainer chose.
    fused_run = read_run(os.path.join(evaluation.uri, "candidate.run"))
    first_stage = read_run(os.path.join(evaluation.uri, "first_stage.run"))
    for qid in sorted(fused_run)[:3]:
        docids = sorted(fused_run[qid])
        out = model.signatures["rank_candidates"](
            query=tf.constant(queries[qid]),
            documents=tf.constant([docs[d] for d in docids]),
            first_stage_scores=tf.constant([first_stage[qid][d] for d in docids], tf.float32),
        )
        assert out["fused_score"].numpy().tolist() == pytest.approx(
            [fused_run[qid][d] for d in docids], abs=1e-5
        )


def test_summary_reports_metrics_next_to_first_stage(e2e) -> None:
    out = e2e["first"].stdout
    assert "Evaluation (the test split" in out
    assert "first stage" in out and "reranker" in out
    assert "ndcg_cut_10" in out and "Pushed model:" in out


def test_second_identical_run_is_cached(e2e) -> None:
    store = e2e["store"]
    complete, cached = metadata_store_pb2.Execution.COMPLETE, metadata_store_pb2.Execution.CACHED
    for type_name in (
        "components.ranking_datagen.component.RankingDataGen",
        "tfx.components.statistics_gen.component.StatisticsGen",
        "tfx.components.example_validator.component.ExampleValidator",
        "components.example_gate.ExampleGate",
        "components.ranking_trainer.component.RankingTrainer",
        "components.ranking_evaluator.component.RankingEvaluator",
        "components.ranking_pusher.component.RankingPusher",
    ):
        states = [e.last_known_state for e in store.get_executions_by_type(type_name)]
        assert states == [complete, cached], type_name
    # No Resolver: the evaluator's inputs and properties are unchanged, so it is cached too (its
    # baseline is found at run time under the push destination), and so is the push: one model,
    # pushed once.
    assert len(store.get_artifacts_by_type("PushedModel")) == 1


def _served_versions(store) -> tuple[str, list[str]]:
    """(push base directory, its version directories) of the one model pushed so far."""
    [served] = [
        a
        for a in store.get_artifacts_by_type("PushedModel")
        if a.custom_properties["pushed"].int_value
    ]
    base = os.path.dirname(served.custom_properties["pushed_destination"].string_value.rstrip("/"))
    return base, sorted(os.listdir(base))


# Module scope and last in the file on purpose: it adds a third run to the pipeline the tests
# above inspect (requested only by the two tests below).
@pytest.fixture(scope="module")
def worse(e2e) -> dict:
    store = e2e["store"]
    base, versions_before = _served_versions(store)
    assert [v for v in versions_before if v.isdigit()]
    third = _run(e2e["env"], WORSE)
    assert third.returncode == 0, third.stdout[-3000:] + third.stderr[-5000:]
    evaluation = _latest(store, "ModelEvaluation")
    with open(os.path.join(evaluation.uri, "metrics.json")) as f:
        metrics = json.load(f)
    return {"run": third, "metrics": metrics, "base": base, "versions_before": versions_before}


def test_a_model_worse_than_bm25_is_not_blessed_by_the_default_gate(e2e, worse) -> None:
    metrics, store = worse["metrics"], e2e["store"]
    main = metrics["main_metric"]
    assert metrics["fusion"] is None
    assert metrics["aggregate"]["candidate"][main] < metrics["aggregate"]["first_stage"][main]
    assert metrics["thresholds"]["min_delta_vs_first_stage"] == 0.0
    assert not metrics["blessed"]
    assert any(f"{main} change vs first stage" in r for r in metrics["reasons"]), metrics
    assert _latest(store, "ModelBlessing").custom_properties["blessed"].int_value == 0
    pushed = store.get_artifacts_by_type("PushedModel")
    assert sum(a.custom_properties["pushed"].int_value for a in pushed) == 1  # run 1's only
    assert "NOT BLESSED" in worse["run"].stdout


def test_a_model_worse_than_the_served_one_is_refused_and_not_pushed(e2e, worse) -> None:
    metrics, store = worse["metrics"], e2e["store"]
    main = metrics["main_metric"]
    assert metrics["thresholds"]["min_delta_vs_baseline"] == 0.0
    # Compared with the served model, and worse than it.
    assert "baseline" in metrics["comparisons"], metrics["comparisons"].keys()
    assert metrics["comparisons"]["baseline"][main]["mean_delta"] < 0
    assert not metrics["blessed"]
    # Refused by the rule against the served model too: a reason names it.
    assert any(f"{main} change vs baseline" in r for r in metrics["reasons"]), metrics["reasons"]
    assert _latest(store, "ModelBlessing").custom_properties["blessed"].int_value == 0
    # Nothing new under the push destination: the served version is still the only one.
    assert _served_versions(store) == (worse["base"], worse["versions_before"])
    pushed = store.get_artifacts_by_type("PushedModel")
    assert sum(a.custom_properties["pushed"].int_value for a in pushed) == 1
