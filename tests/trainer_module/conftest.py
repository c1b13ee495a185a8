"""Fixtures: a real TransformGraph and Examples directory, built once per test session."""

from __future__ import annotations

import pytest
import trainer_testdata


@pytest.fixture(scope="session")
def transform_graph(tmp_path_factory) -> str:
    root = tmp_path_factory.mktemp("tft")
    vocab = trainer_testdata.write_vocab(str(root / "vocab.txt"))
    return trainer_testdata.build_transform_graph(str(root / "transform_graph"), vocab)


@pytest.fixture(scope="session")
def examples_dir(tmp_path_factory, transform_graph) -> str:
    root = tmp_path_factory.mktemp("examples")
    return trainer_testdata.make_examples(str(root), transform_graph, group_size=2)


@pytest.fixture(scope="session")
def listwise_examples_dir(tmp_path_factory, transform_graph) -> str:
    root = tmp_path_factory.mktemp("examples_listwise")
    return trainer_testdata.make_examples(str(root), transform_graph, group_size=4)


@pytest.fixture(scope="session")
def lists_examples_dir(tmp_path_factory, transform_graph) -> str:
    """Examples whose train split holds whole candidate lists (datagen.sampling.mode lists)."""
    root = tmp_path_factory.mktemp("examples_lists")
    return trainer_testdata.make_examples(str(root), transform_graph, train_lists=True)


@pytest.fixture(scope="session")
def bert_checkpoint(tmp_path_factory, transform_graph) -> str:
    """A tiny BERT checkpoint whose vocab.txt is the TransformGraph's vocabulary."""
    import bert_testdata

    from trainer_module.run_fn import read_vocab

    root = str(tmp_path_factory.mktemp("bert_checkpoint"))
    bert_testdata.write_checkpoint(root, read_vocab(transform_graph))
    return root


@pytest.fixture(scope="session")
def trained_bert(bert_checkpoint, examples_dir, transform_graph, tmp_path_factory):
    """(controller, result, encoder weights before training) of 5 BERT steps; shared by the
    training and export tests (a BERT controller is the slowest to trace)."""
    cfg = trainer_testdata.small_config(
        model="bert",
        bert={"checkpoint_dir": bert_checkpoint},
        train_steps=5,
        validate_every=0,
        learning_rate=1e-2,
        encoder_learning_rate=1e-3,
    )
    work = str(tmp_path_factory.mktemp("bert_train"))
    controller = trainer_testdata.make_controller(cfg, examples_dir, transform_graph, work)
    before = {n: v.numpy().copy() for n, (v, _) in controller.model.checkpoint_variables().items()}
    return controller, controller.train(), before
