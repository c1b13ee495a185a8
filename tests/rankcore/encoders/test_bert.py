"""rankcore.encoders.bert: every variable of the encoder is a checkpoint tensor.

BertEncoder creates its variables as zeros (no random draw) because load_into overwrites them
all: this holds only while checkpoint_variables names every variable the encoder has, for BERT
(with and without the pooler) and MPNet (its relative attention bias) alike."""

import sys
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "trainer_module"))
import bert_testdata  # noqa: E402  (tiny BERT and MPNet checkpoints)

from rankcore.encoders import hf_checkpoint  # noqa: E402
from rankcore.encoders.bert import BertEncoder  # noqa: E402

WORDPIECES = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *(f"w{i}" for i in range(20))]


@pytest.mark.parametrize("kind", ["bert", "bert_pooler", "mpnet"])
def test_every_variable_is_loaded_from_the_checkpoint(tmp_path: Path, kind: str) -> None:
    directory = str(tmp_path / kind)
    if kind == "mpnet":
        tensors = bert_testdata.write_mpnet_checkpoint(directory, WORDPIECES)
    else:
        tensors = bert_testdata.write_checkpoint(directory, WORDPIECES, pooler=True)
    checkpoint = hf_checkpoint.read_checkpoint(directory)
    generator = tf.random.Generator.from_seed(0)
    encoder = BertEncoder(checkpoint.arch, 0.0, 0.0, generator, kind == "bert_pooler")
    ids = tf.constant([[5, 6, 7]], tf.int64)
    encoder(ids, tf.zeros_like(ids), ids, tf.ones_like(ids, tf.bool))
    wanted = encoder.checkpoint_variables()
    assert {id(v) for v in encoder.variables} == {id(v) for v, _ in wanted.values()}
    hf_checkpoint.load_into(wanted, checkpoint)
    for name, (variable, transpose) in wanted.items():
        expected = tensors[name].T if transpose else tensors[name]
        np.testing.assert_array_equal(variable.numpy(), expected.astype(np.float32))
