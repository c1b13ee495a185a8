"""RankingPusher in the real demo pipeline (two runs, see ranking_evaluator/demo_pipeline.py):
versioned pushes that never overwrite, the model card, and the pushed model scoring raw text in
a fresh process exactly as the evaluator scored the same pairs."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from demo_pipeline import DemoRuns

from rankcore.metrics import read_run

pytestmark = pytest.mark.e2e

SCORE_SCRIPT = textwrap.dedent(
    """
    import json, sys
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (tokenizer ops of the serving graph)

    model_dir, pairs_file = sys.argv[1:]
    pairs = json.load(open(pairs_file))
    model = tf.saved_model.load(model_dir)
    scores = model.signatures["serving_default"](
        query=tf.constant([q for q, _ in pairs]), document=tf.constant([d for _, d in pairs])
    )["score"].numpy()
    print(json.dumps([float(s) for s in scores]))
    """
)


def pushed_path(run) -> Path:
    return Path(run.pushed.custom_properties["pushed_destination"].string_value)


def digest(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def read_jsonl(path: Path) -> dict[str, dict]:
    return {row["_id"]: row for row in map(json.loads, path.read_text().splitlines())}


def test_pushes_are_versioned_and_never_overwritten(pipeline_runs: DemoRuns) -> None:
    first, second = pipeline_runs.first, pipeline_runs.second
    p1, p2 = pushed_path(first), pushed_path(second)
    for run, path in ((first, p1), (second, p2)):
        props = run.pushed.custom_properties
        assert props["pushed"].int_value == 1
        assert path.parent == pipeline_runs.serving_base
        assert path.name == props["pushed_version"].string_value
        assert (path / "saved_model.pb").is_file()
        assert f"Pushed model: {path}" in run.stdout  # the CLI summary reads these properties
    assert int(p2.name) > int(p1.name)
    assert sorted(os.listdir(pipeline_runs.serving_base)) == sorted([p1.name, p2.name])
    # The first version is still the first run's model and card, byte for byte.
    assert digest(p1) == digest(Path(first.pushed.uri))
    card1 = json.loads((p1 / "model_card.json").read_text())
    assert card1["model"]["uri"] == first.model.uri


def test_model_card_describes_data_config_metrics_and_evaluation(pipeline_runs: DemoRuns) -> None:
    second = pipeline_runs.second
    path = pushed_path(second)
    card = json.loads((path / "model_card.json").read_text())
    metrics = second.metrics
    assert card["version"] == path.name and card["serving_path"] == str(path)
    assert card["model"] == {"uri": second.model.uri, "mlmd_id": second.model.id}
    assert card["pipeline_name"] == "eval-pusher-test"
    assert card["config"]["trainer"]["train_steps"] == 121
    summary = json.loads(
        next(
            (pipeline_runs.pipeline_root / "RankingDataGen" / "summary").glob("*/summary.json")
        ).read_text()
    )
    assert card["data"] == summary
    evaluation = card["evaluation"]
    assert evaluation["uri"] == second.evaluation.uri
    assert evaluation["blessed"] is True and evaluation["checks"] == metrics["checks"]
    assert evaluation["aggregate"] == metrics["aggregate"]
    assert set(evaluation["comparisons"]) == {"first_stage", "baseline"}

    md = (path / "model_card.md").read_text()
    agg = metrics["aggregate"]
    stats = metrics["comparisons"]["first_stage"]["ndcg_cut_10"]
    row = (
        f"| ndcg_cut_10 | {agg['first_stage']['ndcg_cut_10']:.4f} | "
        f"{agg['baseline']['ndcg_cut_10']:.4f} | {agg['reranker']['ndcg_cut_10']:.4f} | "
        f"{agg['candidate']['ndcg_cut_10']:.4f} | "
        f"{stats['mean_delta']:+.4f} |"
    )
    assert row in md
    # The demo fuses with the first stage: the card says how (alpha, dev figures).
    assert card["fusion"] == metrics["fusion"]
    assert f"alpha = {metrics['fusion']['alpha']:.2f} (tuned)" in md
    assert f"**BLESSED** by RankingEvaluator on the test split ({metrics['num_queries']}" in md
    assert f"- collection `demo`: {summary['documents']} documents" in md


def test_pushed_model_scores_raw_text_like_the_evaluator(
    pipeline_runs: DemoRuns, tmp_path: Path
) -> None:
    """A fresh Python process loads the pushed SavedModel and scores raw query/document
    strings; the scores equal the ones in the evaluator's run for the same pairs (the reranker
    alone: the demo fuses, so candidate.run is the fused ranking)."""
    run = pipeline_runs.second
    evaluated = read_run(Path(run.evaluation.uri) / "reranker.run")
    queries = read_jsonl(pipeline_runs.collection / "queries.jsonl")
    docs = read_jsonl(pipeline_runs.collection / "corpus.jsonl")

    def doc_text(row: dict) -> str:  # RankingDataGen's BEIR reading: title + " " + text
        title = row.get("title", "").strip()
        return f"{title} {row['text']}" if title else row["text"]

    keys = [(q, d) for q in sorted(evaluated) for d in sorted(evaluated[q])]
    pairs = [(queries[q]["text"], doc_text(docs[d])) for q, d in keys]
    (tmp_path / "pairs.json").write_text(json.dumps(pairs))
    proc = subprocess.run(
        [sys.executable, "-c", SCORE_SCRIPT, str(pushed_path(run)), str(tmp_path / "pairs.json")],
        cwd=tmp_path,  # a bare process: only TensorFlow and tf-text, no project code
        env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    scores = json.loads(proc.stdout.strip().splitlines()[-1])
    assert len(scores) == len(keys) == run.metrics["candidates_scored"]
    expected = [evaluated[q][d] for q, d in keys]
    assert scores == pytest.approx(expected, rel=1e-5, abs=1e-6)
