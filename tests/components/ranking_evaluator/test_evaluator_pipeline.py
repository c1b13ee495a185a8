"""RankingEvaluator on a real trained model: two LocalDagRunner runs of the demo pipeline (see
demo_pipeline.py), and the executor called directly on their artifacts."""

from __future__ import annotations

import glob
import json
import os
import shutil
from collections import defaultdict
from pathlib import Path

import pytest
import tensorflow as tf
import tfma_metrics
from demo_pipeline import DemoRuns, artifact
from tfx.dsl.components.base import base_beam_executor
from tfx.types import artifact_utils, standard_artifacts

from components import artifacts
from components.ranking_evaluator import executor, significance
from components.ranking_evaluator.component import HtmlReport
from rankcore import fusion
from rankcore.metrics import compute_metrics, mean_metrics, rank_documents, read_qrels, read_run

pytestmark = pytest.mark.e2e


def examples_by_query(examples_uri: str, split: str) -> dict[str, set[str]]:
    files = glob.glob(os.path.join(examples_uri, f"Split-{split}", "*.gz"))
    by_query: dict[str, set[str]] = defaultdict(set)
    for record in tf.data.TFRecordDataset(files, compression_type="GZIP"):
        feature = tf.train.Example.FromString(record.numpy()).features.feature
        docid = feature["docids"].bytes_list.value[0].decode()
        by_query[feature["qid"].bytes_list.value[0].decode()].add(docid)
    return dict(by_query)


def only_uri(pattern: str) -> str:
    (uri,) = glob.glob(pattern)
    return uri


@pytest.fixture(scope="module")
def inputs(pipeline_runs: DemoRuns) -> dict:
    root = pipeline_runs.pipeline_root / "RankingDataGen"
    return {
        "examples": only_uri(str(root / "examples" / "*")),
        "qrels": only_uri(str(root / "qrels" / "*" / artifacts.QRELS_FILE)),
        "first_stage": only_uri(str(root / "first_stage_run" / "*" / artifacts.RUN_FILE)),
    }


def test_first_run_scores_every_candidate_and_writes_runs(
    pipeline_runs: DemoRuns, inputs: dict
) -> None:
    run1 = pipeline_runs.first
    metrics = run1.metrics
    ev = Path(run1.evaluation.uri)
    expected = examples_by_query(inputs["examples"], "test")
    assert metrics["split"] == "test"
    assert metrics["num_queries"] == len(expected) > 5
    assert metrics["candidates_scored"] == sum(map(len, expected.values()))
    assert metrics["first_stage_candidates_without_example"] == 0

    candidate = read_run(ev / "candidate.run")
    first_stage = read_run(ev / "first_stage.run")
    assert {q: set(d) for q, d in candidate.items()} == expected
    full_first_stage = read_run(inputs["first_stage"])
    assert first_stage == {q: full_first_stage[q] for q in expected}
    assert not (ev / "baseline.run").exists()
    # The demo config fuses with the first stage (trainer.ranking.fusion.mode: tuned):
    # candidate.run is the fused ranking, reranker.run the reranker alone.
    assert metrics["fusion"]["mode"] == "tuned"
    assert metrics["runs"] == {
        "candidate": "candidate.run",
        "first_stage": "first_stage.run",
        "reranker": "reranker.run",
    }
    # Ranks in the files are trec_eval's order of the scores in the files.
    for name in ("candidate.run", "first_stage.run", "reranker.run"):
        ranked: dict[str, list[str]] = defaultdict(list)
        for line in (ev / name).read_text().splitlines():
            qid, _, docid, rank, _, _ = line.split()
            assert int(rank) == len(ranked[qid]) + 1
            ranked[qid].append(docid)
        run = read_run(ev / name)
        assert all(ranked[q] == rank_documents(run[q]) for q in run)
    # The TrecRun artifact is the candidate run.
    assert (
        Path(run1.candidate_run.uri, artifacts.RUN_FILE).read_bytes()
        == (ev / "candidate.run").read_bytes()
    )
    # A reranker that ignores the text would leave the first stage's order: this one did not.
    reranker = read_run(ev / "reranker.run")
    assert {q: set(d) for q, d in reranker.items()} == expected
    assert any(rank_documents(reranker[q]) != rank_documents(first_stage[q]) for q in reranker)
    # candidate.run is the reranker's run fused with the first stage's at the model's alpha.
    fused = fusion.fuse_run(reranker, first_stage, metrics["fusion"]["alpha"])
    for qid, docs in fused.items():
        assert candidate[qid] == pytest.approx(docs, abs=1e-12)


def test_metrics_are_trec_eval_on_the_run_files_with_full_qrels(
    pipeline_runs: DemoRuns, inputs: dict
) -> None:
    metrics = pipeline_runs.first.metrics
    ev = Path(pipeline_runs.first.evaluation.uri)
    measures = metrics["aggregate"]["candidate"].keys()
    qrels = read_qrels(inputs["qrels"])
    split_qrels = {q: qrels[q] for q in metrics["per_query"]["candidate"]}
    for system in ("candidate", "first_stage"):
        run = read_run(ev / f"{system}.run")
        per_query = compute_metrics(split_qrels, run, list(measures), complete=True)
        assert per_query == metrics["per_query"][system]
        assert mean_metrics(per_query, list(measures)) == metrics["aggregate"][system]
    # Relevant documents outside the candidates count: recall stays below 1 where the first
    # stage missed some, and equals the retrieved share of all relevant documents.
    run = read_run(ev / "candidate.run")
    partial = [
        q
        for q, judged in split_qrels.items()
        if any(g > 0 and d not in run[q] for d, g in judged.items())
    ]
    assert partial
    for q in partial:
        relevant = {d for d, g in split_qrels[q].items() if g > 0}
        expected_recall = len(relevant & set(run[q])) / len(relevant)
        assert metrics["per_query"]["candidate"][q]["recall_1000"] == pytest.approx(
            expected_recall, abs=1e-12
        )
        assert expected_recall < 1


def test_comparison_vs_first_stage(pipeline_runs: DemoRuns) -> None:
    metrics = pipeline_runs.first.metrics
    cand, first = metrics["per_query"]["candidate"], metrics["per_query"]["first_stage"]
    qids = sorted(cand)
    assert set(metrics["comparisons"]) == {"first_stage"}
    for measure, stats in metrics["comparisons"]["first_stage"].items():
        a = [first[q][measure] for q in qids]
        b = [cand[q][measure] for q in qids]
        assert stats["mean_delta"] == pytest.approx(
            metrics["aggregate"]["candidate"][measure]
            - metrics["aggregate"]["first_stage"][measure]
        )
        assert (stats["wins"], stats["ties"], stats["losses"]) == significance.win_tie_loss(b, a)
        assert stats["randomization_p"] == significance.randomization_test(b, a, 10000, 0)
        assert stats["ttest_p"] == significance.paired_ttest(b, a)


def test_blessing_report_and_artifacts(pipeline_runs: DemoRuns) -> None:
    run1 = pipeline_runs.first
    metrics = run1.metrics
    assert metrics["blessed"] is True and metrics["reasons"] == []
    blessing_dir = Path(run1.blessing.uri)
    assert sorted(os.listdir(blessing_dir)) == ["BLESSED"]
    assert (blessing_dir / "BLESSED").read_text().splitlines() == metrics["checks"]
    props = run1.blessing.custom_properties
    assert props["blessed"].int_value == 1
    assert props["current_model"].string_value == run1.model.uri
    # Nothing was served before the first run: no baseline. (No `current_model_id`: that was
    # for TFX's Resolver, which the pipeline no longer uses.)
    assert "baseline_model" not in props and "current_model_id" not in props
    assert run1.metrics["baseline_model"] is None and run1.metrics["baseline_version"] is None

    main = metrics["main_metric"]
    value = metrics["aggregate"]["candidate"][main]
    # MLMD's SQLite store keeps ~6 significant digits of double properties.
    prop = run1.evaluation.custom_properties[f"candidate_{main}"].double_value
    assert prop == pytest.approx(value, abs=1e-6)
    md = (Path(run1.evaluation.uri) / "report.md").read_text()
    first_value = metrics["aggregate"]["first_stage"][main]
    alone = metrics["aggregate"]["reranker"][main]
    assert f"| {main} | {first_value:.4f} | {alone:.4f} | {value:.4f} |" in md
    assert f"fused (alpha={metrics['fusion']['alpha']:.2f})" in md
    assert "**BLESSED** on the test split" in md
    # The KFP-visible report: a system.HTML artifact whose URI is the page itself.
    html = Path(run1.report.uri).read_text()
    assert Path(run1.report.uri).is_file()
    assert html == (Path(run1.evaluation.uri) / "report.html").read_text()
    assert "Per-query" in html and html.count("<svg") >= 2  # inline plots (plots.py)
    assert run1.report.type == HtmlReport.TYPE_NAME == "system.HTML"


def test_second_run_compares_against_the_model_the_first_pushed(pipeline_runs: DemoRuns) -> None:
    """The baseline is the model served: the version the first run pushed (no Resolver)."""
    run1, run2 = pipeline_runs.first, pipeline_runs.second
    metrics = run2.metrics
    assert run2.model.id != run1.model.id
    pushed1 = run1.pushed.custom_properties
    version = pushed1["pushed_version"].string_value
    assert metrics["baseline_version"] == int(version)
    assert metrics["baseline_model"] == pushed1["pushed_destination"].string_value
    assert metrics["baseline_model"] == str(pipeline_runs.serving_base / version)
    props = run2.blessing.custom_properties
    assert props["baseline_model"].string_value == metrics["baseline_model"]
    assert props["baseline_version"].int_value == int(version)
    assert set(metrics["comparisons"]) == {"first_stage", "baseline"}
    ev2 = Path(run2.evaluation.uri)
    assert metrics["runs"]["baseline"] == "baseline.run"
    # The baseline is the first run's model on the same candidates: its run is the first
    # run's candidate run (up to float noise), and so are its metrics.
    baseline = read_run(ev2 / "baseline.run")
    earlier = read_run(Path(run1.evaluation.uri) / "candidate.run")
    assert baseline.keys() == earlier.keys()
    for qid in earlier:
        assert baseline[qid] == pytest.approx(earlier[qid], rel=1e-5, abs=1e-6)
    for qid, row in metrics["per_query"]["baseline"].items():
        assert row == pytest.approx(run1.metrics["per_query"]["candidate"][qid], abs=1e-9)
    stats = metrics["comparisons"]["baseline"][metrics["main_metric"]]
    assert stats["n"] == metrics["num_queries"]
    md = (ev2 / "report.md").read_text()
    assert "Δ candidate vs baseline" in md
    assert "## Largest " in md or "No query " in md


def test_executor_rejects_with_reasons(
    pipeline_runs: DemoRuns, inputs: dict, tmp_path: Path
) -> None:
    """The executor directly: strict thresholds -> NOT_BLESSED with every failed rule; a served
    model that is the candidate itself is no baseline; odd batch sizes score the same."""
    run1 = pipeline_runs.first
    # A push destination whose newest (only) version is the first run's pushed model.
    serving = tmp_path / "serving"
    shutil.copytree(run1.pushed.custom_properties["pushed_destination"].string_value, serving / "7")
    model = artifact(standard_artifacts.Model, run1.model.uri)
    config = dict(json.loads(json.dumps(run1.metrics["thresholds"])))
    config.update(
        measures=["map", "ndcg_cut_10", "P_5"],
        relevance_level=1,
        main_metric="ndcg_cut_10",
        split="test",
        min_values={"ndcg_cut_10": 0.999, "map": 0.0},
        min_delta_vs_first_stage=0.5,
        min_delta_vs_baseline=0.0,
        require_significance=True,
        significance_level=0.05,
        randomization_trials=1000,
        seed=0,
        batch_size=7,
    )
    outputs = {
        name: [artifact(cls, str(tmp_path / name))]
        for name, cls in (
            ("evaluation", standard_artifacts.ModelEvaluation),
            ("blessing", standard_artifacts.ModelBlessing),
            ("candidate_run", artifacts.TrecRun),
        )
    }
    for [made] in outputs.values():
        os.makedirs(made.uri)
    outputs["report"] = [artifact(HtmlReport, str(tmp_path / "report" / "value"))]
    os.makedirs(tmp_path / "report")
    input_dict = {
        "examples": [
            artifact(
                standard_artifacts.Examples,
                inputs["examples"],
                split_names=artifact_utils.encode_split_names(["train", "dev", "test"]),
            )
        ],
        "model": [model],
        "qrels": [artifact(artifacts.Qrels, os.path.dirname(inputs["qrels"]))],
        "first_stage_run": [artifact(artifacts.TrecRun, os.path.dirname(inputs["first_stage"]))],
    }
    context = base_beam_executor.BaseBeamExecutor.Context(
        beam_pipeline_args=["--direct_running_mode=in_memory", "--direct_num_workers=1"],
        tmp_dir=str(tmp_path / "tmp"),
        unique_id="1",
    )
    executor.Executor(context).Do(
        input_dict, outputs, {"evaluator": json.dumps(config), "push_destination": str(serving)}
    )

    metrics = json.loads((tmp_path / "evaluation" / "metrics.json").read_text())
    main_value = metrics["aggregate"]["candidate"]["ndcg_cut_10"]
    delta = metrics["comparisons"]["first_stage"]["ndcg_cut_10"]["mean_delta"]
    p = metrics["comparisons"]["first_stage"]["ndcg_cut_10"]["randomization_p"]
    assert metrics["blessed"] is False
    assert metrics["reasons"][:2] == [
        f"ndcg_cut_10 = {main_value:.4f} (floor 0.9990): below floor",
        f"ndcg_cut_10 change vs first stage = {delta:+.4f} (need >= +0.5000): too small",
    ]
    assert len(metrics["reasons"]) == (2 if p < 0.05 and delta > 0 else 3)
    assert metrics["checks"][0] == (
        f"map = {metrics['aggregate']['candidate']['map']:.4f} (floor 0.0000)"
    )
    assert metrics["checks"][-1] == (
        "no baseline to compare with: min_delta_vs_baseline not applied"
    )
    assert metrics["baseline_model"] is None and "baseline" not in metrics["comparisons"]
    blessing = outputs["blessing"][0]
    assert os.listdir(blessing.uri) == ["NOT_BLESSED"]
    assert (Path(blessing.uri) / "NOT_BLESSED").read_text().splitlines() == metrics["reasons"]
    assert blessing.get_int_custom_property("blessed") == 0
    assert "NOT BLESSED" in Path(outputs["report"][0].uri).read_text()
    # Batches of 7 (a partial one at the end) give the pipeline's scores and metrics.
    scores = read_run(tmp_path / "evaluation" / "candidate.run")
    earlier = read_run(Path(run1.evaluation.uri) / "candidate.run")
    assert scores.keys() == earlier.keys()
    for qid in earlier:
        assert scores[qid] == pytest.approx(earlier[qid], rel=1e-5, abs=1e-6)
    assert main_value == pytest.approx(
        run1.metrics["aggregate"]["candidate"]["ndcg_cut_10"], abs=1e-9
    )
    # The per-example scores the workers wrote are deleted once read (under --temp_location
    # nothing else would delete them).
    assert not list((tmp_path / "tmp").glob("**/scores-*"))


def test_tfma_with_the_trained_model_matches_the_evaluator(
    pipeline_runs: DemoRuns, inputs: dict
) -> None:
    """One metric code path: the standard TFMA run (score_examples signature, query_key qid,
    the full qrels) reports the evaluator's numbers for the same model and split."""
    import tensorflow_model_analysis as tfma
    import tensorflow_text  # noqa: F401  (the model's tokenizer ops)

    run1 = pipeline_runs.first
    measures = list(run1.metrics["aggregate"]["candidate"])
    eval_config = tfma.EvalConfig(
        model_specs=[
            tfma.ModelSpec(
                signature_name="score_examples", label_key="labels", prediction_key="score"
            )
        ],
        metrics_specs=[
            tfma.MetricsSpec(
                query_key="qid",
                metrics=[
                    tfma.MetricConfig(
                        class_name="RankingMetrics",
                        module=tfma_metrics.__name__,
                        config=json.dumps({"measures": measures, "qrels_path": inputs["qrels"]}),
                    )
                ],
            )
        ],
        slicing_specs=[tfma.SlicingSpec()],
    )
    model = tfma.default_eval_shared_model(
        eval_saved_model_path=os.path.join(run1.model.uri, "Format-Serving"),
        eval_config=eval_config,
    )
    result = tfma.run_model_analysis(
        eval_shared_model=model,
        eval_config=eval_config,
        data_location=os.path.join(inputs["examples"], "Split-test", "*"),
        file_format="tfrecords",
        output_path=str(pipeline_runs.outputs / "tfma"),
    )
    ((_, by_output),) = result.slicing_metrics
    got = {k: v["doubleValue"] for k, v in by_output[""][""].items()}
    assert got == pytest.approx(run1.metrics["aggregate"]["candidate"], abs=1e-9)
