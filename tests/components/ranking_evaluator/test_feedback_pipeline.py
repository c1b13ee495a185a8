"""A dual encoder with pseudo-relevance feedback (rankcore/feedback.py) through a real
LocalDagRunner run of the demo pipeline, 3-fold cross-validated: the RankingEvaluator ranks each
fold's queries with its fold model's feedback, from the vectors of its own scoring pass, exactly
as the model's vectors and the first stage give it, and fuses at the model's alpha. The query's
feedback documents are the top of the first pass fused at that alpha
(ranking.feedback.source: fused), so the alpha reaches the rescoring too.

A tiny random BERT checkpoint (zero-shot) whose WordPiece vocabulary is the demo collection's
syllables: the model is no good, but its scores are a model's, and feedback changes them.
About a minute on 2 cores.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf
from demo_pipeline import _run_pipeline, _snapshot

from components.ranking_datagen.tokenization import RESERVED_TOKENS
from components.ranking_evaluator.corpus_documents import FROM_CORPUS_VECTORS
from components.ranking_evaluator.embedding import DOCUMENTS_EMBEDDED
from pipelines.demo_data import _SYLLABLES
from rankcore import feedback, folds
from rankcore.fusion import fuse_run, read_fusion
from rankcore.metrics import read_run

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "trainer_module"))
import bert_testdata  # noqa: E402  (a tiny BERT checkpoint written from scratch)

K = 3
PIPELINE_NAME = "feedback-test"
SETTING = feedback.setting(docs=2, weight=1.0, neighbours=2, neighbour_weight=0.3, source="fused")


@pytest.fixture(scope="module")
def feedback_run(tmp_path_factory: pytest.TempPathFactory):
    checkpoint = tmp_path_factory.mktemp("ckpt")
    pieces = RESERVED_TOKENS + _SYLLABLES + [f"##{s}" for s in _SYLLABLES]
    bert_testdata.write_checkpoint(str(checkpoint), pieces, pooler=False)
    outputs = tmp_path_factory.mktemp("rankpipe-feedback") / "outputs"
    settings = [
        f"runner.pipeline_name={PIPELINE_NAME}",
        f"evaluator.cross_validation.folds={K}",
        f"datagen.split.num_folds={K}",
        f"datagen.vocab.vocab_file={checkpoint}/vocab.txt",
        "datagen.max_doc_length=48",
        # The shipped Cranfield recipe's shape: the query tower trained against the
        # checkpoint's frozen document vectors, each train query's whole list.
        "datagen.sampling.mode=lists",
        "trainer.model=dual_encoder",
        f"trainer.dual_encoder.checkpoint_dir={checkpoint}",
        "trainer.recipe.type=frozen_documents",
        "trainer.loss=listwise_softmax",
        "trainer.train_steps=2",
        "trainer.checkpoint_every=2",
        "trainer.validate_every=0",
        "trainer.ranking.feedback.mode=fixed",
        f"trainer.ranking.feedback.docs={SETTING['docs']}",
        f"trainer.ranking.feedback.weight={SETTING['weight']}",
        f"trainer.ranking.feedback.neighbours={SETTING['neighbours']}",
        f"trainer.ranking.feedback.neighbour_weight={SETTING['neighbour_weight']}",
        "trainer.ranking.feedback.source=fused",
        "evaluator.min_values={}",
    ]
    output = _run_pipeline(outputs, settings)
    return _snapshot(outputs / "pipelines" / PIPELINE_NAME, output), outputs


def _examples(outputs: Path, split: str) -> list[tf.train.Example]:
    (split_dir,) = (outputs / "pipelines" / PIPELINE_NAME / "RankingDataGen" / "examples").glob(
        f"*/Split-{split}"
    )
    records = tf.data.TFRecordDataset(sorted(map(str, split_dir.glob("*"))), "GZIP")
    return [tf.train.Example.FromString(r.numpy()) for r in records]


def _ids(feature, name: str) -> list[int]:
    return list(feature[name].int64_list.value)


def _served_model(outputs: Path) -> str:
    """The final (served) Trainer's SavedModel: the fold models' frozen parts."""
    root = outputs / "pipelines" / PIPELINE_NAME / "Trainer" / "model"
    (model_dir,) = root.glob("*/Format-Serving")
    return str(model_dir)


def _vectors(model_dir: str, served_dir: str, examples: list[tf.train.Example]) -> tuple:
    """The fold model's vectors of every text of its split and its plain (pair) scores: a fold
    model is exported as its query tower (query_tower.json, complete false; no document
    signature), so its query vectors are its own signature's (no companion: the whole vector)
    and its document vectors the served model's frozen tower's, the same checkpoint."""
    assert json.loads(Path(model_dir, "query_tower.json").read_text())["complete"] is False
    fold, served = tf.saved_model.load(model_dir), tf.saved_model.load(served_dir)
    assert "embed_doc_ids" not in fold.signatures
    texts, pairs = {}, []
    for example in examples:
        f = example.features.feature
        qid, docid = f["qid"].bytes_list.value[0].decode(), f["docids"].bytes_list.value[0].decode()
        texts[("q", qid)] = _ids(f, "query_ids")
        texts[("d", docid)] = _ids(f, "doc_ids")[: f["doc_lengths"].int64_list.value[0]]
        pairs.append((qid, docid))
    vectors = {}
    for kind, loaded, signature in (("q", fold, "embed_query_ids"), ("d", served, "embed_doc_ids")):
        keys = [k for k in texts if k[0] == kind]
        width = max(1, max(len(texts[k]) for k in keys))
        ids = np.array([texts[k] + [0] * (width - len(texts[k])) for k in keys], np.int64)
        out = loaded.signatures[signature](ids=tf.constant(ids))["embedding"].numpy()
        vectors.update(zip(keys, out))
    plain: dict = {}
    for qid, docid in pairs:
        q, d = vectors[("q", qid)].astype(np.float64), vectors[("d", docid)].astype(np.float64)
        plain.setdefault(qid, {})[docid] = float(q @ d)
    return vectors, plain


def test_each_fold_is_ranked_with_its_models_feedback(feedback_run) -> None:
    run, outputs = feedback_run
    evaluation = run.evaluation.uri
    reranker = read_run(os.path.join(evaluation, "reranker.run"))
    candidate = read_run(os.path.join(evaluation, "candidate.run"))
    first_stage = read_run(os.path.join(evaluation, "first_stage.run"))
    per_fold = run.metrics["cross_validation"]["per_fold"]
    assert [f["feedback"] for f in per_fold] == [SETTING] * K
    assert run.metrics["fusion"]["feedbacks"] == [SETTING] * K
    changed = sources_differ = 0
    for f in per_fold:
        assert read_fusion(f["model"])["feedback"] == SETTING
        vectors, plain = _vectors(
            f["model"],
            _served_model(outputs),
            _examples(outputs, folds.split_name(f["fold"], "eval")),
        )
        want = feedback.rescore(plain, first_stage, vectors, SETTING, f["alpha"])
        assert want and set(want) <= set(reranker)
        from_first_stage = {**SETTING, "from": "first_stage"}
        other = feedback.rescore(plain, first_stage, vectors, from_first_stage)
        sources_differ += sum(
            any(abs(docs[d] - other[qid][d]) > 1e-4 for d in docs) for qid, docs in want.items()
        )
        for qid, docs in want.items():
            assert reranker[qid] == pytest.approx(docs, abs=2e-5)
            changed += any(abs(docs[d] - plain[qid][d]) > 1e-4 for d in docs)
        fused = fuse_run({q: reranker[q] for q in want}, first_stage, f["alpha"])
        for qid, docs in fused.items():
            assert candidate[qid] == pytest.approx(docs, abs=1e-9)
    assert changed == len(reranker)  # feedback moved every query's scores
    assert sources_differ > 0  # the fused first pass's top is not always the first stage's


def test_the_report_says_how_the_reranker_used_feedback(feedback_run) -> None:
    run, _ = feedback_run
    report = Path(run.evaluation.uri, "report.md").read_text()
    described = "; ".join(f"fold {i}: {feedback.describe(SETTING)}" for i in range(K))
    assert "pseudo-relevance feedback" in report and described in report


def test_no_document_is_embedded_with_the_corpus_vectors(feedback_run) -> None:
    """With frozen documents every fold model serves a document the checkpoint's vector, which
    the CorpusEncoder computed once (the corpus_vectors input): the evaluator embeds only the
    test queries and takes every document from the artifact; the rankings above were
    recomputed from each fold model's own signatures, so the taken vectors are that model's."""
    run, _ = feedback_run
    phases = run.metrics["scoring_phases"]
    assert phases[DOCUMENTS_EMBEDDED] == 0
    assert phases[FROM_CORPUS_VECTORS] > 0
    assert phases["texts_embedded"] == run.metrics["num_queries"]
