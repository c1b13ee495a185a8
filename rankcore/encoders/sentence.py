"""Sentence embeddings as sentence-transformers computes them for all-MiniLM-L6-v2: `[CLS] text
[SEP]` (token types 0) through the BERT encoder, the final hidden states mean-pooled over the
real tokens (`[CLS]` and `[SEP]` included, as its attention mask includes them), L2-normalised;
a (query, document) score is the dot product of the two vectors, their cosine.

The single definition of that embedding: the Trainer's dual encoder (trainer_module/models/
dual_encoder.py) calls `frame_single` and `mean_pool` in its graph, and RankingDataGen's dense
retrieval (hybrid candidates, components/ranking_datagen/dense.py) runs `SentenceEncoder`, the
checkpoint's encoder as it is (zero-shot), over the whole corpus.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import tensorflow as tf

from rankcore.encoders import hf_checkpoint
from rankcore.encoders.bert import BertEncoder


def frame_single(ids: tf.Tensor, cls_id: int, sep_id: int) -> tuple[tf.Tensor, ...]:
    """Right-padded ids [B, L] -> `[CLS] ids [SEP]` tokens [B, L + 2], segment ids (all 0),
    positions and the real-token mask. `[SEP]` follows the last real token; an empty text
    gives `[CLS] [SEP]`. Positions count real tokens only, as a packed sequence would."""
    batch = tf.shape(ids)[0]
    cls = tf.fill([batch, 1], tf.constant(cls_id, ids.dtype))
    tokens = tf.concat([cls, ids, tf.zeros_like(ids[:, :1])], axis=1)
    lengths = tf.reduce_sum(tf.cast(tokens != 0, tf.int32), axis=1)
    tokens = tokens + tf.one_hot(lengths, tf.shape(tokens)[1], dtype=tokens.dtype) * sep_id
    mask = tf.not_equal(tokens, 0)
    positions = tf.maximum(tf.cumsum(tf.cast(mask, tf.int32), axis=1) - 1, 0)
    return tokens, tf.zeros_like(tokens, tf.int32), positions, mask


def mean_pool(hidden: tf.Tensor, mask: tf.Tensor) -> tf.Tensor:
    """Final hidden states [B, L, H] and the real-token mask [B, L] -> L2-normalised mean of the
    real tokens' states [B, H] (float32)."""
    weights = tf.cast(mask, tf.float32)[..., None]
    pooled = tf.reduce_sum(tf.cast(hidden, tf.float32) * weights, axis=1) / tf.reduce_sum(
        weights, axis=1
    )
    return tf.math.l2_normalize(pooled, axis=-1)


class SentenceEncoder:
    """A checkpoint's encoder, loaded as it is, embedding right-padded token ids (numpy in and
    out). Ids must be the checkpoint's vocab.txt ids (0 = [PAD])."""

    def __init__(self, checkpoint_dir: str):
        checkpoint = hf_checkpoint.read_checkpoint(checkpoint_dir)
        self._cls, self._sep = hf_checkpoint.special_ids(checkpoint, "sentence encoder")
        self.max_length = checkpoint.arch.max_position - 2  # room for [CLS] and [SEP]
        generator = tf.random.Generator.from_seed(0)  # dropout is off: never drawn from
        self._encoder = BertEncoder(checkpoint.arch, 0.0, 0.0, generator, False, name="encoder")
        self._embed(tf.ones([1, 1], tf.int64))  # creates the variables, then overwritten
        hf_checkpoint.load_into(self._encoder.checkpoint_variables(), checkpoint)

    @tf.function(input_signature=[tf.TensorSpec([None, None], tf.int64)], autograph=False)
    def _embed(self, ids: tf.Tensor) -> tf.Tensor:
        tokens, types, positions, mask = frame_single(ids, self._cls, self._sep)
        hidden, _ = self._encoder(tokens, types, positions, mask, training=False)
        return mean_pool(hidden, mask)

    def embed(self, token_ids: Sequence[Sequence[int]], batch_size: int = 64) -> np.ndarray:
        """Token id lists (each cut to `max_length`) -> embeddings [N, H] float32, in order."""
        out = []
        for start in range(0, len(token_ids), batch_size):
            batch = [list(ids)[: self.max_length] for ids in token_ids[start : start + batch_size]]
            width = max(1, max(len(ids) for ids in batch))
            padded = np.zeros([len(batch), width], np.int64)
            for row, ids in enumerate(batch):
                padded[row, : len(ids)] = ids
            out.append(self._embed(tf.constant(padded)).numpy())
        if not out:
            return np.zeros([0, self._encoder.arch.hidden_size], np.float32)
        return np.concatenate(out)
