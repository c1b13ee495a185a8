"""The companion weight chosen after training (recipe.frozen_documents.companion_weights): the
trained model's dev vectors rescaled to each weight are the vectors the model serves at that
weight, the dev queries choose the weight (with the fusion chosen for it), and the export
serves the chosen one (run_fn.choose_companion_weight, FrozenDocuments.at_companion_weight)."""

import json
import os
import types

import bert_testdata
import numpy as np
import pytest
import tensorflow as tf
import trainer_testdata

from rankcore import corpus_vectors
from rankcore.constants import EMBED_DOC_SIGNATURE, EMBED_QUERY_SIGNATURE, EMBEDDING_OUTPUT
from rankcore.encoders import hf_checkpoint
from trainer_module import run_fn, validation
from trainer_module.recipes import recipe_for
from trainer_module.recipes.zero_shot import ZeroShot
from trainer_module.train_results import TrainResult


def _companion_config(companion: str, checkpoint: str, weights: list, **overrides):
    frozen = {
        "companion_checkpoint_dir": companion,
        "companion_weight": 0.5,
        "companion_weights": weights,
    }
    return trainer_testdata.frozen_documents_config(
        checkpoint, recipe={"type": "frozen_documents", "frozen_documents": frozen}, **overrides
    )


@pytest.fixture(scope="module")
def mpnet(bert_checkpoint, tmp_path_factory) -> str:
    """A tiny MPNet companion whose WordPiece vocabulary is the model's vocab.txt."""
    directory = str(tmp_path_factory.mktemp("mpnet"))
    bert_testdata.write_mpnet_checkpoint(
        directory, hf_checkpoint.read_vocab_file(bert_checkpoint), seed=7
    )
    return directory


def test_rescaled_vectors_are_the_models_at_that_weight(
    mpnet, bert_checkpoint, lists_examples_dir, transform_graph, tmp_path
):
    """A served vector at 0.5, mapped by at_companion_weight(0.8), is the vector the same model
    serves at 0.8 (its encoders run again): no encoder runs for a weight tried. Zero-shot
    offers the configured recipe's weights and maps."""
    cfg = _companion_config(mpnet, bert_checkpoint, [0.2, 0.8], train_steps=2)
    controller = trainer_testdata.make_controller(
        cfg, lists_examples_dir, transform_graph, str(tmp_path)
    )
    model = controller.model
    ids = tf.constant([[5, 6, 7, 0], [8, 9, 10, 11]], tf.int64)
    at_half = (model.embed_query(ids).numpy(), model.embed_doc(ids).numpy())
    recipe = recipe_for(cfg)
    chosen, rescale = recipe.at_companion_weight(0.8, model.arch.hidden_size)
    chosen.prepare_export(model)
    assert model.companion_weight == 0.8
    for vectors, served in zip(at_half, (model.embed_query(ids), model.embed_doc(ids))):
        rescaled = np.stack([rescale(v) for v in vectors])
        np.testing.assert_allclose(rescaled, served.numpy(), atol=1e-6)
        assert not np.allclose(vectors, served.numpy(), atol=1e-3)
    assert chosen.cfg.recipe.frozen_documents.companion_weight == 0.8
    zero = recipe_for(cfg, 0)
    assert isinstance(zero, ZeroShot) and zero.companion_weights() == (0.2, 0.8)
    zero_chosen, zero_rescale = zero.at_companion_weight(0.8, model.arch.hidden_size)
    assert isinstance(zero_chosen, ZeroShot) and zero_chosen.cfg == chosen.cfg
    np.testing.assert_array_equal(zero_rescale(at_half[0][0]), rescale(at_half[0][0]))


def _unit(v) -> np.ndarray:
    v = np.asarray(v, np.float32)
    return v / np.linalg.norm(v)


# Angles from the query's direction of candidates 0 (the relevant one) to 3, in a part that
# ranks the relevant candidate first (its cosine 1, the others' at most 0.36) or last (0.07,
# the others' at least 0.98): the mix ranks it first at weight 0.2 when the own part prefers it,
# at 0.8 when the companion's does.
PREFERS = (0.0, 1.2, 1.3, 1.4)
AVOIDS = (1.5, 0.0, 0.1, 0.2)


def _dev(own_prefers_relevant: bool, companion_prefers_relevant: bool) -> validation.DevScores:
    """Three dev queries of four candidates, one relevant, served at weight 0.5 from 2 own and
    2 companion dimensions, each part ranking the relevant candidate first or last as told.
    The first stage gives every candidate the same score (fusion cannot help)."""
    half = np.float32(np.sqrt(0.5))
    qrels, run, first, vectors = {}, {}, {}, {}
    for q in range(3):
        qid = f"q{q}"
        query = np.concatenate([half * _unit([1, 0]), half * _unit([1, 0])])
        vectors[("q", qid)] = ([q + 1], query)
        for d in range(4):
            docid = f"{qid}d{d}"
            own = (PREFERS if own_prefers_relevant else AVOIDS)[d]
            other = (PREFERS if companion_prefers_relevant else AVOIDS)[d]
            vector = np.concatenate(
                [
                    half * _unit([np.cos(own), np.sin(own)]),
                    half * _unit([np.cos(other), np.sin(other)]),
                ]
            )
            vectors[("d", docid)] = ([10 + q * 4 + d], vector)
            run.setdefault(qid, {})[docid] = float(query @ vector)
            first.setdefault(qid, {})[docid] = 1.0
            qrels.setdefault(qid, {})[docid] = int(d == 0)
    return validation.DevScores(qrels, run, first, vectors)


def _result(steps: int = 0) -> TrainResult:
    return TrainResult(steps, -1, None, None, "ndcg_cut_10", 0.0, False, 0.0, None, 0.0)


@pytest.mark.parametrize(
    ("own", "companion", "chosen"),
    [(False, True, 0.8), (True, False, 0.2), (True, True, 0.2)],
    ids=["companion-ranks", "own-ranks", "tie-keeps-the-earlier"],
)
def test_the_dev_queries_choose_the_weight(own, companion, chosen):
    """The weight whose rescaled dev run scores best is chosen (a tie keeps the earlier), the
    fusion is chosen again at it, and the model card line gives every weight's dev figure."""
    cfg = _companion_config("/ckpt/mpnet", "/ckpt/minilm", [0.2, 0.8], train_steps=0)
    recipe, dev, result = recipe_for(cfg, 0), _dev(own, companion), _result()
    result.fusion = run_fn.choose_fusion(cfg, dev, result)
    model = types.SimpleNamespace(arch=types.SimpleNamespace(hidden_size=2))
    seconds = {}
    best, lines = run_fn.choose_companion_weight(cfg, recipe, model, dev, result, seconds)
    assert best.cfg.recipe.frozen_documents.companion_weight == chosen
    assert isinstance(best, ZeroShot) and "companion_weight" in seconds
    assert len(lines) == 1 and lines[0].startswith(f"companion weight {chosen:g} chosen")
    rescaled = run_fn._rescaled(dev, recipe.at_companion_weight(chosen, 2)[1])
    metric = validation.validation_metric(dev.qrels, rescaled.run, "ndcg_cut_10")
    assert result.fusion["dev_reranker"] == pytest.approx(metric)
    assert result.final_metric == pytest.approx(metric)  # zero-shot: the chosen model's
    if own != companion:  # one part ranks the relevant candidate first, the other last
        assert metric == pytest.approx(1.0)
        other = 0.2 if chosen == 0.8 else 0.8
        assert f"{other:g}: " in lines[0]


def test_without_dev_queries_the_weight_cannot_be_chosen():
    cfg = _companion_config("/ckpt/mpnet", "/ckpt/minilm", [0.2, 0.8], train_steps=0)
    model = types.SimpleNamespace(arch=types.SimpleNamespace(hidden_size=2))
    with pytest.raises(ValueError, match="companion_weights are chosen on the dev queries"):
        run_fn.choose_companion_weight(cfg, recipe_for(cfg, 0), model, None, _result(), {})


def test_the_trainer_exports_the_chosen_weight(
    mpnet, bert_checkpoint, lists_examples_dir, transform_graph, tmp_path
):
    """run_fn with one weight to choose (0.8, the model built at 0.5): the SavedModel serves
    [sqrt(0.2) own, sqrt(0.8) companion] vectors, its document tower names those scales, and
    the model card's recipe lines say which weight was chosen and how it serves."""
    cfg = _companion_config(mpnet, bert_checkpoint, [0.8], train_steps=2, checkpoint_every=2)
    args = trainer_testdata.fn_args(tmp_path, lists_examples_dir, transform_graph, cfg, 2)
    result = run_fn.run_fn(args)
    parts = corpus_vectors.DocumentTower.read(args.serving_model_dir)
    np.testing.assert_allclose([s for _, s in parts], [np.sqrt(0.2), np.sqrt(0.8)])
    loaded = tf.saved_model.load(args.serving_model_dir)
    ids = tf.constant([[5, 6, 7], [8, 9, 10]], tf.int64)
    hidden = 32  # bert_testdata's tiny BERT
    for signature in (EMBED_QUERY_SIGNATURE, EMBED_DOC_SIGNATURE):
        vectors = loaded.signatures[signature](ids=ids)[EMBEDDING_OUTPUT].numpy()
        np.testing.assert_allclose(np.linalg.norm(vectors[:, :hidden], axis=1) ** 2, 0.2, atol=1e-5)
        np.testing.assert_allclose(np.linalg.norm(vectors[:, hidden:], axis=1) ** 2, 0.8, atol=1e-5)
    assert any(line.startswith("companion weight 0.8 chosen") for line in result.recipe)
    assert any("0.20 * the model's cosine + 0.80 * the companion's" in x for x in result.recipe)
    with open(os.path.join(args.model_run_dir, "train_results.json")) as f:
        assert json.load(f)["recipe"] == result.recipe


def test_companion_weights_rules():
    with pytest.raises(ValueError, match=r"companion_weights each must be in \(0, 1\)"):
        _companion_config("/ckpt/mpnet", "/ckpt/minilm", [0.5, 1.0])
    with pytest.raises(ValueError, match="companion_weights weigh a companion encoder"):
        _companion_config(None, "/ckpt/minilm", [0.5])
    served = {
        "companion_checkpoint_dir": "/ckpt/mpnet",
        "companion_weights": [0.3],
        "train_score": "served",
    }
    with pytest.raises(ValueError, match="companion_weights with train_score: served"):
        trainer_testdata.frozen_documents_config(
            "/ckpt/minilm", recipe={"type": "frozen_documents", "frozen_documents": served}
        )
