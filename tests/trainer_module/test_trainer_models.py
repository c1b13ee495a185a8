import numpy as np
import pytest
import tensorflow as tf
import trainer_testdata

from trainer_module.models import build_model, model_names


@pytest.mark.parametrize("name", ["knrm", "conv_knrm", "transformer"])
def test_scores_ignore_batch_padding(name):
    model = build_model(trainer_testdata.small_config(model=name), 70, 8, 16)
    q = tf.constant([[5, 6, 7], [9, 0, 0]], tf.int64)
    d = tf.constant([[5, 10, 11, 12], [9, 9, 0, 0]], tf.int64)
    tight = model((q, d)).numpy()
    padded = model((tf.pad(q, [[0, 0], [0, 5]]), tf.pad(d, [[0, 0], [0, 9]]))).numpy()
    alone = model((q[1:, :1], d[1:, :2])).numpy()
    assert tight.shape == (2,)
    np.testing.assert_allclose(padded, tight, atol=1e-5)
    np.testing.assert_allclose(alone, tight[1:], atol=1e-5)


def test_registry_lists_models():
    assert model_names() == ["bert", "conv_knrm", "dual_encoder", "knrm", "transformer"]


def test_transformer_positions_must_cover_max_lengths():
    cfg = trainer_testdata.small_config(model="transformer", transformer={"max_position": 16})
    with pytest.raises(ValueError, match="max_position"):
        build_model(cfg, 70, 8, 16)


def test_embedding_file_initialises_known_tokens(tmp_path):
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "w00", "w01"]
    path = tmp_path / "vectors.txt"
    path.write_text("2 3\nw01 0.5 -1 2\n[PAD] 9 9 9\nw00 1 2\n")  # header, pad, wrong size
    cfg = trainer_testdata.small_config(knrm={"embedding_dim": 3}, embedding_file=str(path))
    model = build_model(cfg, len(vocab), 8, 16, vocab=vocab)
    table = model.get_layer("embedding").embeddings.numpy()
    np.testing.assert_array_equal(table[6], [0.5, -1.0, 2.0])
    np.testing.assert_array_equal(table[0], [0.0, 0.0, 0.0])  # [PAD] stays zero
    assert np.abs(table[5]).max() < 1.0  # not in the file (wrong size): random init


def test_transformer_takes_cls_and_sep_from_the_vocabulary():
    """A BERT-style vocab.txt ([CLS]=101, [SEP]=102) is framed with its own ids, not 2/3."""
    bert_vocab = ["[PAD]"] + [f"[unused{i}]" for i in range(99)] + ["[UNK]", "[CLS]", "[SEP]"]
    bert_vocab += [f"w{i}" for i in range(20)]
    cfg = trainer_testdata.small_config(model="transformer")
    model = build_model(cfg, len(bert_vocab), 8, 16, vocab=bert_vocab)
    assert (model.cls_id, model.sep_id) == (101, 102)
    learned = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "w0"]
    assert (build_model(cfg, 70, 8, 16, vocab=learned).cls_id) == 2
    with pytest.raises(ValueError, match=r"transformer: the vocabulary has no \[CLS\]"):
        build_model(cfg, 70, 8, 16, vocab=["[PAD]", "[SEP]", "w0"])
    with pytest.raises(ValueError, match=r"\[PAD\] must be id 0"):
        build_model(cfg, 70, 8, 16, vocab=["[CLS]", "[PAD]", "[SEP]"])
