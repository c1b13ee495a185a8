"""The three places that rank a dual encoder's candidate lists with fusion and feedback rank
alike: the SavedModel's served `rank_candidates` signature (trainer_module/export.py), the
Trainer's choice on the dev queries (run_fn.choose_fusion) and the RankingEvaluator's rescoring
(feedback.rescore, then fusion.fuse_run, as components/ranking_evaluator calls them). All three
run rankcore/ranking.py; this test holds them to 1e-9 on the same vectors and first stage.

The model is a table: a text's vector is a fixed L2-normalised row picked by its (one) token,
so every path sees the very float32 vectors the served graph computes. The served signature
returns float32: its scores equal the numpy paths' float64 scores rounded to float32, and the
graph's float64 arithmetic (the same function on the TensorFlow backend, before that rounding)
equals numpy's to 1e-9.
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_text  # noqa: F401  (registers the ops the exported tokenizer graph uses)
import tf_keras as keras
import trainer_testdata

from rankcore import feedback, fusion, ranking
from rankcore.metrics import aggregate, compute_metrics
from trainer_module import validation
from trainer_module.export import export_serving_model
from trainer_module.run_fn import choose_fusion, read_vocab
from trainer_module.train_results import TrainResult

ALPHA = 0.4
DIM = 8
QUERIES = {"q0": "w00", "q1": "w01", "q2": "w02"}
# Each query's candidates (single-word texts) with float32-exact first-stage scores: a tie in
# q0 (w12 and w14: trec_eval ranks the larger docid first), q1 and q2 in another order.
FIRST_STAGE = {
    "q0": {"w10": 7.0, "w11": 6.5, "w12": 5.0, "w13": 4.25, "w14": 5.0, "w15": 1.0, "w16": 0.5},
    "q1": {"w20": 3.0, "w21": 9.0, "w22": 8.5, "w23": 1.5, "w24": 2.0, "w25": 6.0},
    "q2": {"w30": 2.0, "w31": 4.0, "w32": 6.0, "w33": 8.0, "w34": 1.0, "w35": 3.0, "w10": 5.0},
}
QRELS = {
    "q0": {"w13": 1, "w15": 2, "w16": 1},
    "q1": {"w23": 1, "w24": 1},
    "q2": {"w34": 2, "w30": 1},
}
SETTINGS = {
    "first_stage, documents and query": feedback.setting(2, 1.0, 2, 0.5),
    "fused, documents and query": feedback.setting(2, 1.0, 2, 0.5, source="fused"),
    "fused, query": feedback.setting(3, 2.0, source="fused"),
    "documents": feedback.setting(0, 0.0, 3, 0.6),
}


class TableEncoder(keras.Model):
    """A dual encoder whose vector of a text is `table`'s row of the text's first token."""

    def __init__(self, table: np.ndarray):
        super().__init__()
        self.table = tf.Variable(table, trainable=False, name="table")

    def embed_query(self, ids: tf.Tensor, training: bool = False) -> tf.Tensor:
        return tf.gather(self.table, ids[:, 0])

    def embed_doc(self, ids: tf.Tensor, training: bool = False) -> tf.Tensor:
        return tf.gather(self.table, ids[:, 0])

    def call(self, inputs, training: bool = False) -> tf.Tensor:
        query, doc = inputs
        return tf.reduce_sum(self.embed_query(query) * self.embed_doc(doc), axis=-1)


def _table(size: int) -> np.ndarray:
    """Random unit rows, float32 as a model's vectors."""
    rng = np.random.default_rng(7)
    table = rng.normal(size=(size, DIM))
    return (table / np.linalg.norm(table, axis=1, keepdims=True)).astype(np.float32)


def _metric(qrels: dict, run: dict) -> float:
    return aggregate(compute_metrics(qrels, run, ["ndcg_cut_10"]))["ndcg_cut_10"]


@pytest.fixture(scope="module")
def exported(transform_graph, tmp_path_factory):
    """{setting name: served model directory}, and the vectors every path reads."""
    vocab = read_vocab(transform_graph)
    table = _table(len(vocab))
    model = TableEncoder(table)
    root = tmp_path_factory.mktemp("ranking_paths")
    models = {}
    for i, (name, setting) in enumerate(SETTINGS.items()):
        models[name] = str(root / f"model{i}")
        export_serving_model(
            model,
            transform_graph,
            trainer_testdata.MAX_Q,
            trainer_testdata.MAX_D,
            models[name],
            fusion={"mode": "fixed", "alpha": ALPHA, "feedback": setting},
            towers=True,
        )
    texts = sorted({*QUERIES.values(), *(d for docs in FIRST_STAGE.values() for d in docs)})
    ids = trainer_testdata.tokenize(transform_graph, texts)
    assert all(len(row) == 1 for row in ids)  # one token each: its row is its vector
    rows = {text: table[row[0]] for text, row in zip(texts, ids)}
    vectors = {("q", q): rows[text] for q, text in QUERIES.items()}
    vectors.update({("d", d): rows[d] for docs in FIRST_STAGE.values() for d in docs})
    return models, vectors


def _served(model_dir: str) -> tuple[dict, dict]:
    """The served signature's (reranker run, fused run), each list given in the first stage's
    order (score desc, docid desc, as trec_eval ranks; the signature keeps ties in list order)."""
    loaded = tf.saved_model.load(model_dir)
    reranker, fused = {}, {}
    for qid, first in FIRST_STAGE.items():
        order = feedback.first_stage_order(first, first)
        out = loaded.signatures["rank_candidates"](
            query=tf.constant(QUERIES[qid]),
            documents=tf.constant(order),
            first_stage_scores=tf.constant([first[d] for d in order], tf.float32),
        )
        reranker[qid] = dict(zip(order, out["reranker_score"].numpy().astype(np.float64)))
        fused[qid] = dict(zip(order, out["fused_score"].numpy().astype(np.float64)))
    return reranker, fused


@pytest.mark.parametrize("name", SETTINGS)
def test_served_trainer_and_evaluator_rank_alike(exported, name):
    models, vectors = exported
    setting = SETTINGS[name]
    plain = {
        q: {d: float(vectors[("q", q)].astype(np.float64) @ vectors[("d", d)]) for d in docs}
        for q, docs in FIRST_STAGE.items()
    }

    # The evaluator's path: each list rescored with the model's feedback, then fused.
    evaluator = feedback.rescore(plain, FIRST_STAGE, vectors, setting, ALPHA)
    evaluator_fused = fusion.fuse_run(evaluator, FIRST_STAGE, ALPHA)
    assert any(abs(evaluator[q][d] - plain[q][d]) > 1e-3 for q in plain for d in plain[q])

    # The served signature: the same scores, rounded to its float32 outputs.
    served, served_fused = _served(models[name])
    for qid, docs in evaluator.items():
        assert served[qid].keys() == docs.keys()
        for d, score in docs.items():
            assert served[qid][d] == pytest.approx(float(np.float32(score)), abs=1e-9)
        # Its fusion is fusion.fuse over its own (float32) reranker scores ...
        order = list(served[qid])
        want = fusion.fuse(
            np.array([served[qid][d] for d in order]),
            np.array([FIRST_STAGE[qid][d] for d in order]),
            ALPHA,
        )
        np.testing.assert_allclose(
            [served_fused[qid][d] for d in order], want.astype(np.float32), rtol=0, atol=1e-9
        )
        # ... which is the evaluator's fused ranking, to float32 rounding.
        np.testing.assert_allclose(
            [served_fused[qid][d] for d in order],
            [evaluator_fused[qid][d] for d in order],
            rtol=0,
            atol=1e-6,
        )

    # The graph's own arithmetic, before its float32 outputs: numpy's to 1e-9.
    for qid, first in FIRST_STAGE.items():
        order = feedback.first_stage_order(first, first)
        in_graph = tf.function(
            lambda q, d, f: ranking.rank_list(q, d, f, setting, ALPHA, ranking.tensorflow()),
            reduce_retracing=True,
        )(
            tf.constant(vectors[("q", qid)]),
            tf.constant(np.array([vectors[("d", d)] for d in order])),
            tf.constant([first[d] for d in order], tf.float32),
        )
        assert in_graph.dtype == tf.float64
        np.testing.assert_allclose(
            in_graph.numpy(), [evaluator[qid][d] for d in order], rtol=0, atol=1e-9
        )

    # The Trainer's choice with this feedback and alpha fixed: its dev figures are those of the
    # served rankings.
    cfg = trainer_testdata.small_config(
        model="dual_encoder",
        dual_encoder={"checkpoint_dir": "/unused"},
        train_steps=0,
        ranking={
            "fusion": {"mode": "fixed", "alpha": ALPHA},
            "feedback": {"mode": "fixed", **_config_keys(setting)},
        },
    )
    dev = validation.DevScores(QRELS, plain, FIRST_STAGE, {k: ([], v) for k, v in vectors.items()})
    result = TrainResult(0, 0, None, None, "ndcg_cut_10", 0.0, False, 0.0, None, 0.0)
    chosen = choose_fusion(cfg, dev, result)
    assert chosen["feedback"] == setting and chosen["alpha"] == ALPHA
    assert chosen["dev_reranker"] == pytest.approx(_metric(QRELS, served), abs=1e-9)
    assert chosen["dev_fused"] == pytest.approx(_metric(QRELS, served_fused), abs=1e-9)
    assert chosen["dev_fused"] == pytest.approx(_metric(QRELS, evaluator_fused), abs=1e-9)


def _config_keys(setting: dict) -> dict:
    """trainer.ranking.feedback's keys of a rankcore/feedback.py setting."""
    keys = ("docs", "weight", "neighbours", "neighbour_weight")
    return {"source": setting["from"], **{k: setting[k] for k in keys}}


def test_the_fused_source_changes_the_ranking(exported):
    """The fused settings above are not the first stage's in disguise: their first pass picks
    other feedback documents, so the scores differ."""
    _, vectors = exported
    plain = {q: dict.fromkeys(docs, 0.0) for q, docs in FIRST_STAGE.items()}
    for name in ("fused, documents and query", "fused, query"):
        fused = feedback.rescore(plain, FIRST_STAGE, vectors, SETTINGS[name], ALPHA)
        first = {**SETTINGS[name], "from": "first_stage"}
        other = feedback.rescore(plain, FIRST_STAGE, vectors, first, ALPHA)
        assert any(abs(fused[q][d] - other[q][d]) > 1e-3 for q in plain for d in plain[q])
