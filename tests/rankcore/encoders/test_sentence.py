"""rankcore.encoders.sentence: the sentence embedding against a numpy BERT forward pass."""

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "trainer_module"))
import bert_testdata  # noqa: E402  (the tiny checkpoint and the numpy reference forward)

from rankcore.encoders.sentence import SentenceEncoder  # noqa: E402

VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *(f"w{i}" for i in range(20))]


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
