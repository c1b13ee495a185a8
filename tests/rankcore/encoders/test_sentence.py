"""rankcore.encoders.sentence: the sentence embedding against a numpy BERT forward pass."""

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "trainer_module"))
import bert_testdata  # noqa: E402  (the tiny checkpoint and the numpy reference forward)

from rankcore.encoders.sentence import SentenceEncoder  # noqa: E402

VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *(f"w{i}" for i in range(20))]
TEXTS = [[5, 6, 7], [8], [], [9, 10, 11, 12, 13, 14, 15], [5, 6, 7]]


def _reference(tensors: dict, ids: list[int]) -> np.ndarray:
    """sentence-transformers' all-MiniLM-L6-v2 recipe in numpy: [CLS] ids [SEP], token types 0,
    the mean of every position's last hidden state, L2-normalised."""
    tokens = [VOCAB.index("[CLS]"), *ids, VOCAB.index("[SEP]")]
    hidden = bert_testdata.reference_hidden(
        tensors, bert_testdata.TINY_CONFIG, tokens, [0] * len(tokens)
    )
    pooled = hidden.mean(axis=0)
    return pooled / np.linalg.norm(pooled)


def test_embeddings_equal_the_reference_whatever_the_batch(tmp_path: Path) -> None:
    tensors = bert_testdata.write_checkpoint(str(tmp_path / "ckpt"), VOCAB, pooler=False)
    encoder = SentenceEncoder(str(tmp_path / "ckpt"))
    texts = [[5, 6, 7], [8], [], [9, 10, 11, 12, 13, 14, 15], [5, 6, 7]]
    expected = np.stack([_reference(tensors, ids) for ids in texts])
    for batch_size in (1, 2, 64):  # padding to other widths must not change a vector
        got = encoder.embed(texts, batch_size=batch_size)
        assert got.dtype == np.float32 and got.shape == (5, 32)
        np.testing.assert_allclose(got, expected, atol=2e-5)
    # Ids past the checkpoint's positions are cut, not an error: 64 positions, 62 ids.
    assert encoder.max_length == 62
    long = encoder.embed([[5] * 100])
    np.testing.assert_allclose(long[0], _reference(tensors, [5] * 62), atol=2e-5)
    assert encoder.embed([]).shape == (0, 32)


def test_mpnet_buckets_are_transformers_buckets() -> None:
    """MPNet's relative-position buckets (T5's bidirectional scheme) against transformers'
    formula, over offsets up to past max_distance, and a few values worked out by hand."""
    import tensorflow as tf

    from rankcore.encoders.bert import relative_buckets

    offsets = np.arange(-300, 301)
    got = relative_buckets(tf.constant(offsets, tf.int32), 32, 128).numpy()
    np.testing.assert_array_equal(got, [bert_testdata.mpnet_bucket(int(o)) for o in offsets])
    # key before the query by 1 -> 1; after it by 1 -> 16 + 1; 20 before -> 8 + 2; far -> last
    picked = [got[300 - 1], got[300 + 1], got[300 - 20], got[300 + 200], got[0]]
    assert picked == [1, 17, 10, 31, 15]


def test_mpnet_embeddings_equal_the_reference_whatever_the_batch(tmp_path: Path) -> None:
    """An MPNet checkpoint (all-mpnet-base-v2's layout): callers give WordPiece ids of BERT's
    vocabulary ([PAD] = 0), the encoder frames `<s> ids+4 </s>` with MPNet's positions and
    relative bias, and its vectors equal transformers' forward pass in numpy."""
    tensors = bert_testdata.write_mpnet_checkpoint(str(tmp_path / "mpnet"), VOCAB)
    encoder = SentenceEncoder(str(tmp_path / "mpnet"))
    assert encoder.vocab == VOCAB  # the WordPiece part: [PAD] = 0, <mask> left out
    config = bert_testdata.TINY_MPNET_CONFIG
    texts = [[5, 6, 7], [8], [], [9, 10, 11, 12, 13, 14, 15], [5, 6, 7]]
    expected = np.stack(
        [
            bert_testdata.reference_mpnet_embedding(tensors, config, [i + 4 for i in t])
            for t in texts
        ]
    )
    for batch_size in (1, 2, 64):
        got = encoder.embed(texts, batch_size=batch_size)
        assert got.dtype == np.float32 and got.shape == (5, 32)
        np.testing.assert_allclose(got, expected, atol=2e-5)
    # 40 positions, the first two below MPNet's first id (pad 1 + 1): 38, less <s> and </s>.
    assert encoder.max_length == 36
    long = encoder.embed([[5] * 100])
    np.testing.assert_allclose(
        long[0], bert_testdata.reference_mpnet_embedding(tensors, config, [9] * 36), atol=2e-5
    )


def test_mpnet_checkpoints_are_refused_as_a_cross_encoder(tmp_path: Path) -> None:
    """A cross-encoder frames a pair with [CLS]/[SEP] over the TransformGraph's ids: an MPNet
    checkpoint there is a config error that says where it does run; as a sentence encoder (the
    dual encoder) it is opened, its vocabulary checked without its specials."""
    import pytest

    from rankcore.encoders import hf_checkpoint

    path = str(tmp_path / "mpnet")
    bert_testdata.write_mpnet_checkpoint(path, VOCAB)
    with pytest.raises(ValueError, match="MPNet runs as a sentence encoder only"):
        hf_checkpoint.open_checkpoint(path, "bert", len(VOCAB), None, 10)
    checkpoint, bos, eos = hf_checkpoint.open_checkpoint(
        path, "dual_encoder", len(VOCAB), VOCAB, 10, sentence_encoder=True
    )
    assert checkpoint.vocab[bos] == "<s>" and checkpoint.vocab[eos] == "</s>"
    with pytest.raises(ValueError, match="differs from the checkpoint's vocab.txt at id 3"):
        other = [*VOCAB[:3], "changed", *VOCAB[4:]]
        hf_checkpoint.open_checkpoint(path, "dual_encoder", len(VOCAB), other, 10, True)
    with pytest.raises(ValueError, match=r"positions start at 2: 38 usable"):
        hf_checkpoint.open_checkpoint(path, "dual_encoder", len(VOCAB), VOCAB, 39, True)


@pytest.mark.parametrize("kind", ["bert", "mpnet"])
def test_mixed_bfloat16_vectors_are_float32_and_near_the_reference(
    kind: str, tmp_path: Path
) -> None:
    """Under mixed_bfloat16 (what `mixed_precision: auto` picks on a CPU with AVX512_BF16) the
    encoder runs, MPNet's relative bias included, and its vectors are float32 within
    bfloat16's rounding of the float32 reference."""
    import tf_keras as keras

    path = str(tmp_path / kind)
    if kind == "mpnet":
        tensors = bert_testdata.write_mpnet_checkpoint(path, VOCAB)
        config = bert_testdata.TINY_MPNET_CONFIG
        reference = [
            bert_testdata.reference_mpnet_embedding(tensors, config, [i + 4 for i in t])
            for t in TEXTS
        ]
    else:
        tensors = bert_testdata.write_checkpoint(path, VOCAB, pooler=False)
        reference = [_reference(tensors, t) for t in TEXTS]
    keras.mixed_precision.set_global_policy("mixed_bfloat16")
    try:
        got = SentenceEncoder(path).embed(TEXTS)
    finally:
        keras.mixed_precision.set_global_policy("float32")
    assert got.dtype == np.float32
    cosine = (got / np.linalg.norm(got, axis=1, keepdims=True) * np.stack(reference)).sum(1)
    assert cosine.min() > 0.99
    assert not np.allclose(got, np.stack(reference), atol=2e-5)  # bfloat16 did the work
