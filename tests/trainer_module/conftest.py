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
