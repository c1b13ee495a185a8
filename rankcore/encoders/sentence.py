"""Sentence embeddings as sentence-transformers computes them for all-MiniLM-L6-v2: `[CLS] text
[SEP]` (token types 0) through the BERT encoder, the final hidden states mean-pooled over the
real tokens (`[CLS]` and `[SEP]` included, as its attention mask includes them), L2-normalised;
a (query, document) score is the dot product of the two vectors, their cosine.

The single definition of that embedding: the Trainer's dual encoder (trainer_module/models/
dual_encoder.py) calls `framer` (`frame_single` for BERT) and `mean_pool` in its graph, and
RankingDataGen's dense retrieval (hybrid candidates, components/ranking_datagen/dense.py) runs
`SentenceEncoder`, the checkpoint's encoder as it is (zero-shot), over the whole corpus.

An MPNet checkpoint (all-mpnet-base-v2, which sentence-transformers runs the same way: mean
pooling, L2-normalised) frames a text as `<s> text </s>`, pads with `<pad>` and counts positions
from the padding id + 1 (`frame_offset`). Its callers still hand it WordPiece ids of BERT's
vocabulary ([PAD] = 0, `SentenceEncoder.vocab`); the encoder adds the offset of that vocabulary
in its vocab.txt (4: after `<s>`, `<pad>`, `</s>`, `<unk>`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import TypeVar

import numpy as np
import tensorflow as tf
import tf_keras as keras

from rankcore.encoders import hf_checkpoint
from rankcore.encoders.bert import BertEncoder

T = TypeVar("T")
_POLICY_LOCK = threading.Lock()


def built_under(precision: str, build: Callable[[], T]) -> T:
    """`build()` under Keras' global precision policy `precision` ("float32", "mixed_bfloat16"),
    put back after: layers read the global policy when they are built, so it is set for the
    construction only, under a lock, since other components (and Beam's threads) may share
    this process. Keras has no scoped policy (tf_keras/src/mixed_precision/policy.py keeps one
    global)."""
    with _POLICY_LOCK:
        previous = keras.mixed_precision.global_policy()
        keras.mixed_precision.set_global_policy(precision)
        try:
            return build()
        finally:
            keras.mixed_precision.set_global_policy(previous)


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


def frame_offset(
    ids: tf.Tensor, bos_id: int, eos_id: int, pad_id: int, offset: int, first_position: int
) -> tuple[tf.Tensor, ...]:
    """MPNet's framing (transformers' MPNetTokenizer and create_position_ids_from_input_ids):
    right-padded WordPiece ids [B, L] (0 = padding) -> `<s> ids+offset </s>` [B, L + 2] padded
    with `pad_id`, token types (all 0, unused), positions first_position, first_position + 1, ...
    over the real tokens (pad_id on padding) and the real-token mask."""
    real = tf.not_equal(ids, 0)
    lengths = tf.reduce_sum(tf.cast(real, tf.int32), axis=1)
    batch, width = tf.shape(ids)[0], tf.shape(ids)[1] + 2
    body = tf.where(real, ids + tf.cast(offset, ids.dtype), tf.cast(pad_id, ids.dtype))
    bos = tf.fill([batch, 1], tf.constant(bos_id, ids.dtype))
    tail = tf.fill([batch, 1], tf.constant(pad_id, ids.dtype))
    tokens = tf.concat([bos, body, tail], axis=1)
    at_eos = tf.cast(tf.one_hot(lengths + 1, width), tf.bool)
    tokens = tf.where(at_eos, tf.constant(eos_id, ids.dtype), tokens)
    mask = tf.concat([tf.ones([batch, 1], tf.bool), real, tf.zeros([batch, 1], tf.bool)], 1)
    mask = tf.logical_or(mask, at_eos)
    counted = tf.cumsum(tf.cast(mask, tf.int32), axis=1) - 1 + first_position
    positions = tf.where(mask, counted, pad_id)
    return tokens, tf.zeros_like(tokens, tf.int32), positions, mask


def mean_pool(hidden: tf.Tensor, mask: tf.Tensor) -> tf.Tensor:
    """Final hidden states [B, L, H] and the real-token mask [B, L] -> L2-normalised mean of the
    real tokens' states [B, H] (float32)."""
    weights = tf.cast(mask, tf.float32)[..., None]
    pooled = tf.reduce_sum(tf.cast(hidden, tf.float32) * weights, axis=1) / tf.reduce_sum(
        weights, axis=1
    )
    return tf.math.l2_normalize(pooled, axis=-1)


def framer(
    checkpoint: hf_checkpoint.BertCheckpoint, what: str
) -> Callable[[tf.Tensor], tuple[tf.Tensor, ...]]:
    """The checkpoint's framing of right-padded WordPiece ids ([PAD] = 0): frame_single with
    its [CLS] / [SEP], or frame_offset for MPNet. `what` names the checkpoint's use in errors."""
    if checkpoint.arch.model_type != "mpnet":
        cls, sep = hf_checkpoint.special_ids(checkpoint, what)
        return lambda ids: frame_single(ids, cls, sep)
    specials = {}
    for token in ("<s>", "</s>", "<pad>"):
        if token not in checkpoint.vocab:
            raise ValueError(
                f"{what} checkpoint {checkpoint.directory}: an MPNet vocab.txt needs {token}"
            )
        specials[token] = checkpoint.vocab.index(token)
    return lambda ids: frame_offset(
        ids,
        specials["<s>"],
        specials["</s>"],
        specials["<pad>"],
        checkpoint.id_offset,
        checkpoint.arch.first_position,
    )


class SentenceEncoder:
    """A checkpoint's encoder, loaded as it is, embedding right-padded token ids (numpy in and
    out). Ids are WordPiece ids of `vocab` (0 = [PAD]): the checkpoint's vocab.txt for BERT,
    its BERT part for MPNet."""

    def __init__(self, checkpoint_dir: str):
        checkpoint = hf_checkpoint.read_checkpoint(checkpoint_dir)
        arch = checkpoint.arch
        self.vocab = checkpoint.wordpiece_vocab
        self.vocab_offset = checkpoint.id_offset  # vocab[0]'s id in vocab.txt
        self._frame = framer(checkpoint, "sentence encoder")
        self.max_length = arch.positions_used - 2  # room for [CLS] and [SEP] (<s>, </s>)
        generator = tf.random.Generator.from_seed(0)  # dropout is off: never drawn from
        self._encoder = BertEncoder(arch, 0.0, 0.0, generator, False, name="encoder")
        self._embed(tf.ones([1, 1], tf.int64))  # creates the variables, then overwritten
        hf_checkpoint.load_into(self._encoder.checkpoint_variables(), checkpoint)

    @tf.function(input_signature=[tf.TensorSpec([None, None], tf.int64)], autograph=False)
    def _embed(self, ids: tf.Tensor) -> tf.Tensor:
        tokens, types, positions, mask = self._frame(ids)
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
