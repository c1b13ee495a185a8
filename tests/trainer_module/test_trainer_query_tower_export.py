"""A fold model exported as its trained query tower (run_fn.export with custom_config
query_tower_only: trainer_module/export.py export_query_tower), beside the whole export of the
same model. The fold model's SavedModel holds the query encoder's weights only (no frozen
document tower, no companion), answers embed_query_ids with the first hidden_size values of the
whole export's query vectors, and says so in query_tower.json (complete false) with the same
frozen identity as the whole model's, which completes it in the RankingEvaluator
(components/ranking_evaluator/frozen_parts.py)."""

import json
import os

import bert_testdata
import numpy as np
import pytest
import tensorflow as tf
import tensorflow_text  # noqa: F401  (registers the ops the exported tokenizer graph uses)
import trainer_testdata

from rankcore import corpus_vectors
from rankcore.constants import EMBED_QUERY_SIGNATURE, EMBEDDING_OUTPUT
from rankcore.encoders import hf_checkpoint
from rankcore.fusion import read_fusion
from trainer_module import run_fn
from trainer_module.checkpointing import QUERY_TOWER_ONLY
from trainer_module.export import export_query_tower

WEIGHT = 0.3  # the companion's


@pytest.fixture(scope="module")
def exports(bert_checkpoint, lists_examples_dir, transform_graph, tmp_path_factory):
    """(the whole export, the query-tower export, the trained model) of the frozen-documents
    recipe with an MPNet companion, after two training steps."""
    mpnet = str(tmp_path_factory.mktemp("mpnet"))
    bert_testdata.write_mpnet_checkpoint(mpnet, hf_checkpoint.read_vocab_file(bert_checkpoint))
    companion = {"companion_checkpoint_dir": mpnet, "companion_weight": WEIGHT}
    cfg = trainer_testdata.frozen_documents_config(
        bert_checkpoint,
        recipe={"type": "frozen_documents", "frozen_documents": companion},
        train_steps=2,
        checkpoint_every=2,
    )
    work = tmp_path_factory.mktemp("work")
    controller = trainer_testdata.make_controller(
        cfg, lists_examples_dir, transform_graph, str(work)
    )
    result = controller.train()
    recipe = controller.task.recipe
    tower = recipe.document_tower(trainer_testdata.MAX_D, "float32")
    fitted = run_fn.Fitted(controller, recipe, tower, result)
    lengths = (trainer_testdata.MAX_Q, trainer_testdata.MAX_D)
    out = {}
    for name, custom in (("whole", {}), ("fold", {QUERY_TOWER_ONLY: True})):
        out[name] = str(work / name)
        run_fn.export(cfg, fitted, transform_graph, lengths, out[name], custom)
    return out["whole"], out["fold"], controller.model


def _tower(model_dir: str) -> dict:
    with open(os.path.join(model_dir, corpus_vectors.QUERY_TOWER_FILE)) as f:
        return json.load(f)


def test_the_fold_model_is_the_first_part_of_the_whole_models_query_vectors(
    exports, transform_graph
):
    whole_dir, fold_dir, model = exports
    whole, fold = tf.saved_model.load(whole_dir), tf.saved_model.load(fold_dir)
    assert set(fold.signatures) == {EMBED_QUERY_SIGNATURE}
    texts = trainer_testdata.tokenize(transform_graph, ["w01 w02 w03", "w04 w05", "w06"])
    width = max(len(t) for t in texts) + 3  # longer than max_query_length: both cut the same
    ids = tf.constant([t + [0] * (width - len(t)) for t in texts], tf.int64)
    served = whole.signatures[EMBED_QUERY_SIGNATURE](ids=ids)[EMBEDDING_OUTPUT].numpy()
    own = fold.signatures[EMBED_QUERY_SIGNATURE](ids=ids)[EMBEDDING_OUTPUT].numpy()
    hidden = model.arch.hidden_size
    assert own.shape == (3, hidden) and served.shape[1] > hidden
    np.testing.assert_allclose(own, served[:, :hidden], rtol=0, atol=1e-6)
    # The served vector is unit norm: the own part carries sqrt(1 - w) of it.
    np.testing.assert_allclose(np.sum(own**2, axis=1), 1 - WEIGHT, atol=1e-5)


def test_the_fold_model_saves_the_query_encoder_only(exports):
    whole_dir, fold_dir, _ = exports
    names = [
        n for n, _ in tf.train.list_variables(os.path.join(fold_dir, "variables", "variables"))
    ]
    weights = [n for n in names if "VARIABLE_VALUE" in n]
    assert weights and all("encoder/" in n for n in weights)
    assert not any("companion" in n or "document_encoder" in n for n in names)
    whole_names = tf.train.list_variables(os.path.join(whole_dir, "variables", "variables"))
    assert len(weights) < len([n for n, _ in whole_names if "VARIABLE_VALUE" in n]) / 2


def test_both_say_their_query_tower_with_the_same_frozen_identity(exports):
    whole_dir, fold_dir, model = exports
    whole, fold = _tower(whole_dir), _tower(fold_dir)
    assert (whole["complete"], fold["complete"]) == (True, False)
    assert whole["own_dims"] == fold["own_dims"] == model.arch.hidden_size
    assert whole["frozen_identity"] == fold["frozen_identity"]
    ((part,),) = [fold["frozen"]]
    assert part["max_length"] == trainer_testdata.MAX_Q
    assert part["scale"] == pytest.approx(np.sqrt(WEIGHT))
    # What the evaluator reads beside any model: the fusion and the document tower.
    assert read_fusion(fold_dir) == read_fusion(whole_dir)
    documents = corpus_vectors.DocumentTower.read(fold_dir)
    assert documents and documents == corpus_vectors.DocumentTower.read(whole_dir)


def test_the_frozen_identity_ignores_the_precision_not_the_parts(exports):
    _, fold_dir, _ = exports
    (part,) = _tower(fold_dir)["frozen"]
    spec = corpus_vectors.EncoderSpec(part["checkpoint_dir"], part["max_length"])
    documents = corpus_vectors.DocumentTower(((spec, 1.0),))

    def identity(precision: str, scale: float, cut: int) -> str:
        other = corpus_vectors.EncoderSpec(spec.checkpoint_dir, cut, precision)
        return corpus_vectors.QueryTower(8, ((other, scale),)).frozen_identity(documents)

    base = identity("float32", 0.5, 4)
    assert identity("mixed_bfloat16", 0.5, 4) == base
    assert identity("float32", 0.6, 4) != base
    assert identity("float32", 0.5, 5) != base


def test_only_a_partial_tower_is_exported_as_one(exports, tmp_path):
    _, _, model = exports
    with pytest.raises(ValueError, match="complete=False"):
        export_query_tower(
            model,
            trainer_testdata.MAX_Q,
            str(tmp_path / "x"),
            corpus_vectors.QueryTower(model.arch.hidden_size, ()),
            corpus_vectors.DocumentTower(()),
        )
