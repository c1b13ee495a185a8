"""Word-embedding table shared by the interaction models, with optional pretrained init."""

from __future__ import annotations

import logging
from typing import Any

import numpy as np
import tensorflow as tf

PAD_ID = 0


def load_embedding_matrix(
    path: str, vocab: list[str], dim: int, seed: int
) -> tuple[np.ndarray, int]:
    """Reads a GloVe/word2vec text file into a [len(vocab), dim] matrix.

    Tokens absent from the file keep a small random init; the [PAD] row is zero. Returns the
    matrix and the number of vocabulary tokens found in the file.
    """
    rng = np.random.default_rng(seed)
    matrix = rng.normal(0.0, 0.1, size=(len(vocab), dim)).astype(np.float32)
    matrix[PAD_ID] = 0.0
    index = {tok: i for i, tok in enumerate(vocab)}
    found = 0
    with tf.io.gfile.GFile(path, "r") as f:
        for line in f:
            parts = line.rstrip().split(" ")
            if len(parts) != dim + 1:
                continue  # word2vec header line or a vector of another size
            i = index.get(parts[0])
            if i is None or i == PAD_ID:
                continue
            matrix[i] = np.asarray(parts[1:], dtype=np.float32)
            found += 1
    logging.info("embedding init: %d/%d vocab tokens found in %s", found, len(vocab), path)
    return matrix, found


def embedding_initializer(
    embedding_file: str | None, vocab: list[str] | None, dim: int, seed: int
) -> Any:
    if not embedding_file:
        return "uniform"
    if vocab is None:
        raise ValueError("embedding_file needs the vocabulary (vocab_tokens) to map tokens")
    matrix, _ = load_embedding_matrix(embedding_file, vocab, dim, seed)
    return _Constant(matrix)


class _Constant:
    """Initializer returning a fixed matrix (keras' Constant only takes scalars in Keras 2)."""

    def __init__(self, value: np.ndarray):
        self.value = value

    def __call__(self, shape, dtype=None, **kwargs):
        if tuple(shape) != self.value.shape:
            raise ValueError(f"embedding matrix shape {self.value.shape} != variable {shape}")
        return tf.constant(self.value, dtype=dtype or tf.float32)
