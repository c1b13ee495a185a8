"""An MPNet checkpoint as the dual encoder itself (dual_encoder.checkpoint_dir), with a BERT
companion: its towers frame each text as sentence-transformers frames MPNet (<s> text </s> at
its own ids, the examples' WordPiece ids + 4), only its query tower trains, and the export
serves [sqrt(1 - w) MPNet's, sqrt(w) the companion's]."""

import json
import os
import types

import bert_testdata
import numpy as np
import pytest
import tensorflow as tf
import tensorflow_text  # noqa: F401  (registers the ops the exported tokenizer graph uses)
import trainer_testdata

from rankcore.encoders import hf_checkpoint
from trainer_module import run_fn

STEPS = 6
WEIGHT = 0.3  # the companion's (BERT's) share


@pytest.fixture(scope="module")
def mpnet(bert_checkpoint, tmp_path_factory):
    """(directory, tensors) of a tiny MPNet checkpoint whose WordPiece vocabulary is the
    examples' (the BERT checkpoint's vocab.txt)."""
    directory = str(tmp_path_factory.mktemp("mpnet_model"))
    vocab = hf_checkpoint.read_vocab_file(bert_checkpoint)
    return directory, bert_testdata.write_mpnet_checkpoint(directory, vocab, seed=3)


@pytest.fixture(scope="module")
def trained(mpnet, bert_checkpoint, lists_examples_dir, transform_graph, tmp_path_factory):
    """(controller, its query encoder's weights before training) after STEPS steps of the
    MPNet query tower against its frozen document vectors, the BERT checkpoint beside it."""
    directory, _ = mpnet
    cfg = trainer_testdata.frozen_documents_config(
        directory,
        recipe={
            "type": "frozen_documents",
            "frozen_documents": {
                "companion_checkpoint_dir": bert_checkpoint,
                "companion_weight": WEIGHT,
            },
        },
        train_steps=STEPS,
        checkpoint_every=STEPS,
        log_every=1,
    )
    work = str(tmp_path_factory.mktemp("mpnet_trained"))
    controller = trainer_testdata.make_controller(cfg, lists_examples_dir, transform_graph, work)
    before = {n: v.numpy().copy() for n, (v, _) in controller.model.checkpoint_variables().items()}
    controller.train()
    return controller, before


def test_only_the_mpnet_query_tower_trains(trained, mpnet):
    """The losses are finite, the query encoder moved, and the frozen MPNet document tower is
    the checkpoint to the bit."""
    controller, before = trained
    model = controller.model
    assert len(controller.history) == STEPS
    assert np.all(np.isfinite([h[1] for h in controller.history]))
    names = [v.name for v in model.trainable_variables]
    assert names and all(n.startswith("dual_encoder/encoder/") for n in names)
    _, tensors = mpnet
    for name, (variable, transpose) in model.document_encoder.checkpoint_variables().items():
        want = tensors[name].T if transpose else tensors[name]
        np.testing.assert_array_equal(variable.numpy(), want, err_msg=name)
    after = model.checkpoint_variables()
    assert any(not np.allclose(after[n][0].numpy(), v) for n, v in before.items())


def test_the_export_serves_mpnet_framed_as_sentence_transformers_and_the_companion(
    trained, mpnet, bert_checkpoint, transform_graph, tmp_path
):
    """Document vectors are [sqrt(0.7) MPNet's (transformers' forward in numpy on the ids + 4),
    sqrt(0.3) BERT's ([CLS] text [SEP])]; query vectors hold the trained MPNet tower's part."""
    controller, _ = trained
    model = controller.model
    loaded, texts, ids, docs, queries = trainer_testdata.export_and_embed(
        model, transform_graph, tmp_path
    )
    _, mpnet_tensors = mpnet
    bert = hf_checkpoint.read_checkpoint(bert_checkpoint)
    bert_config = json.loads(open(os.path.join(bert_checkpoint, "config.json")).read())
    cls, sep = hf_checkpoint.special_ids(bert, "companion")
    hidden = bert_testdata.TINY_MPNET_CONFIG["hidden_size"]
    own_queries = model.own_query(ids).numpy()
    for i, t in enumerate(texts):
        own_doc = bert_testdata.reference_mpnet_embedding(
            mpnet_tensors, bert_testdata.TINY_MPNET_CONFIG, [w + 4 for w in t]
        )
        other = bert_testdata.reference_embedding(bert.tensors, bert_config, t, cls, sep)
        want = np.concatenate([np.sqrt(1 - WEIGHT) * own_doc, np.sqrt(WEIGHT) * other])
        np.testing.assert_allclose(docs[i], want, atol=1e-5)
        np.testing.assert_allclose(
            queries[i, :hidden], np.sqrt(1 - WEIGHT) * own_queries[i], atol=1e-6
        )
        np.testing.assert_allclose(queries[i, hidden:], np.sqrt(WEIGHT) * other, atol=1e-5)
        assert not np.allclose(own_queries[i], own_doc, atol=1e-3)  # the trained tower
    score = loaded.signatures["serving_default"](
        query=tf.constant(["w01 w02 w03"]), document=tf.constant(["w04 w05"])
    )["score"].numpy()
    np.testing.assert_allclose(score, [queries[0] @ docs[1]], atol=1e-5)


def test_the_trainer_reads_mpnets_wordpieces_as_the_examples_vocabulary(mpnet, transform_graph):
    """The Trainer's first check (run_fn.prepare, before any model is built) compares the
    examples' vocabulary with the checkpoint's WordPiece part: MPNet's four specials before it
    and <mask> after it are not a mismatch."""
    directory, _ = mpnet
    cfg = trainer_testdata.frozen_documents_config(directory, mixed_precision="off")
    _, vocab = run_fn.prepare(cfg, types.SimpleNamespace(transform_graph_path=transform_graph))
    assert vocab == hf_checkpoint.read_wordpiece_vocab(directory)
    assert hf_checkpoint.read_vocab_file(directory)[:4] == ["<s>", "<pad>", "</s>", "<unk>"]
