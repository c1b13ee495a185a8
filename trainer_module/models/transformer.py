"""Small Transformer cross-encoder trained from scratch: [CLS] q [SEP] d [SEP] -> score."""

from __future__ import annotations

import tensorflow as tf
import tf_keras as keras

from rankcore.encoders.bert import GeneratorDropout
from trainer_module.config import TransformerConfig

# Ids of the datagen's reserved tokens ([PAD], [UNK], [CLS], [SEP], [MASK]) in a learned
# vocabulary; a given vocabulary (e.g. a BERT vocab.txt) is looked up instead.
CLS_ID, SEP_ID = 2, 3


def special_token_ids(vocab: list[str] | None) -> tuple[int, int]:
    """([CLS], [SEP]) ids in `vocab`; padding must be id 0, as the model masks id 0 out."""
    if vocab is None:
        return CLS_ID, SEP_ID
    missing = [t for t in ("[PAD]", "[CLS]", "[SEP]") if t not in vocab]
    if missing:
        raise ValueError(f"transformer: the vocabulary has no {', '.join(missing)} token")
    if vocab.index("[PAD]") != 0:
        raise ValueError(
            f"transformer: [PAD] must be id 0 in the vocabulary, is {vocab.index('[PAD]')}"
        )
    return vocab.index("[CLS]"), vocab.index("[SEP]")


def frame_pair(
    query: tf.Tensor, doc: tf.Tensor, cls_id: int, sep_id: int
) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor, tf.Tensor]:
    """Padded query [B, Lq] and doc [B, Ld] -> `[CLS] q [SEP] d [SEP]` tokens [B, L], segment
    ids (0 for `[CLS] q [SEP]`, 1 for `d [SEP]`), positions and the real-token mask.

    Pads stay inside the sequence: the mask takes them out of attention and positions count
    real tokens only, so scores do not depend on how much padding a batch has, and every real
    token sees exactly what a packed `[CLS] q [SEP] d [SEP]` gives it.
    """
    batch = tf.shape(query)[0]
    cls = tf.fill([batch, 1], tf.constant(cls_id, query.dtype))
    sep = tf.fill([batch, 1], tf.constant(sep_id, query.dtype))
    tokens = tf.concat([cls, query, sep, doc, sep], axis=1)
    mask = tf.not_equal(tokens, 0)
    positions = tf.maximum(tf.cumsum(tf.cast(mask, tf.int32), axis=1) - 1, 0)
    q_width = tf.shape(query)[1] + 2
    segments = tf.cast(tf.range(tf.shape(tokens)[1]) >= q_width, tf.int32)
    segments = tf.broadcast_to(segments[None, :], tf.shape(tokens))
    return tokens, segments, positions, mask


class EncoderLayer(keras.layers.Layer):
    """Post-LN Transformer block (BERT layout)."""

    def __init__(self, cfg: TransformerConfig, generator: tf.random.Generator, **kwargs):
        super().__init__(**kwargs)
        self.attention = keras.layers.MultiHeadAttention(
            cfg.num_heads, cfg.hidden_size // cfg.num_heads, name="attention"
        )
        self.attention_norm = keras.layers.LayerNormalization(epsilon=1e-12, name="layer_norm_1")
        self.ffn_in = keras.layers.Dense(cfg.intermediate_size, activation="gelu", name="ffn_in")
        self.ffn_out = keras.layers.Dense(cfg.hidden_size, name="ffn_out")
        self.ffn_norm = keras.layers.LayerNormalization(epsilon=1e-12, name="layer_norm_2")
        self.dropout = GeneratorDropout(cfg.dropout, generator)

    def call(self, x: tf.Tensor, attention_mask: tf.Tensor, training: bool = False) -> tf.Tensor:
        attn = self.attention(x, x, attention_mask=attention_mask, training=training)
        x = self.attention_norm(x + self.dropout(attn, training=training))
        ffn = self.ffn_out(self.ffn_in(x))
        return self.ffn_norm(x + self.dropout(ffn, training=training))


class TransformerCrossEncoder(keras.Model):
    def __init__(
        self,
        vocab_size: int,
        cfg: TransformerConfig,
        seed: int,
        cls_id: int = CLS_ID,
        sep_id: int = SEP_ID,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.cls_id, self.sep_id = cls_id, sep_id
        self.rng = tf.random.Generator.from_seed(seed)
        init = keras.initializers.TruncatedNormal(stddev=0.02)
        self.word_embeddings = keras.layers.Embedding(
            vocab_size, cfg.hidden_size, embeddings_initializer=init, name="word_embeddings"
        )
        self.position_embeddings = keras.layers.Embedding(
            cfg.max_position,
            cfg.hidden_size,
            embeddings_initializer=init,
            name="position_embeddings",
        )
        self.segment_embeddings = keras.layers.Embedding(
            2, cfg.hidden_size, embeddings_initializer=init, name="segment_embeddings"
        )
        self.embedding_norm = keras.layers.LayerNormalization(epsilon=1e-12, name="layer_norm_emb")
        self.dropout = GeneratorDropout(cfg.dropout, self.rng)
        self.layers_ = [
            EncoderLayer(cfg, self.rng, name=f"encoder_layer_{i}") for i in range(cfg.num_layers)
        ]
        self.pooler = keras.layers.Dense(cfg.hidden_size, activation="tanh", name="pooler")
        self.score = keras.layers.Dense(1, dtype="float32", name="score")

    def call(self, inputs: tuple[tf.Tensor, tf.Tensor], training: bool = False) -> tf.Tensor:
        query, doc = inputs
        tokens, segments, positions, mask = frame_pair(query, doc, self.cls_id, self.sep_id)
        x = (
            self.word_embeddings(tokens)
            + self.position_embeddings(positions)
            + self.segment_embeddings(segments)
        )
        x = self.dropout(self.embedding_norm(x), training=training)
        attention_mask = tf.logical_and(mask[:, None, :], tf.ones_like(mask)[:, :, None])
        for layer in self.layers_:
            x = layer(x, attention_mask=attention_mask, training=training)
        return tf.squeeze(self.score(self.pooler(x[:, 0])), axis=-1)
