"""BERT-family cross-encoder initialised from a local Hugging Face checkpoint (monoBERT-style).

Input `[CLS] q [SEP] d [SEP]`, token types 0 for `[CLS] q [SEP]` and 1 for `d [SEP]`; a post-LN
BERT encoder (word + position + token-type embeddings, LayerNorm; N x [self-attention, add &
LayerNorm, GELU FFN, add & LayerNorm]); score = Dense(dropout([tanh pooler](h_CLS))).

Variables: the pretrained part lives under `bert/encoder/...` (the "encoder" group of
`encoder_patterns`, trained at `encoder_learning_rate`); the new head (`bert/pooler` when the
checkpoint has none, `bert/score`) at `learning_rate`.
"""

from __future__ import annotations

import logging

import tensorflow as tf
import tf_keras as keras

from rankcore.encoders.bert import POOLER, BertEncoder, GeneratorDropout
from rankcore.encoders.hf_checkpoint import BertArchitecture
from trainer_module.config import BertConfig
from trainer_module.models.encoder_model import EncoderModel, open_model_checkpoint
from trainer_module.models.transformer import frame_pair


class BertCrossEncoder(EncoderModel):
    """(query ids [B, Lq], doc ids [B, Ld]) -> scores [B]; 0 = [PAD] anywhere in the inputs."""

    def __init__(
        self,
        arch: BertArchitecture,
        cfg: BertConfig,
        seed: int,
        cls_id: int,
        sep_id: int,
        pretrained_pooler: bool,
        **kwargs,
    ):
        super().__init__(arch, cfg, cls_id, sep_id, seed, **kwargs)
        self.encoder = BertEncoder(
            arch,
            self.hidden_dropout,
            self.attention_dropout,
            self.rng,
            cfg.pooler and pretrained_pooler,
            name="encoder",
        )
        # Without pretrained pooler weights the pooler is part of the new head.
        self.pooler = (
            keras.layers.Dense(
                arch.hidden_size,
                activation="tanh",
                kernel_initializer=keras.initializers.TruncatedNormal(stddev=0.02),
                name="pooler",
            )
            if cfg.pooler and not pretrained_pooler
            else None
        )
        self.head_dropout = GeneratorDropout(cfg.head_dropout, self.rng)
        self.score = keras.layers.Dense(
            1,
            dtype="float32",
            kernel_initializer=keras.initializers.TruncatedNormal(stddev=0.02),
            name="score",
        )

    def encode(
        self, query: tf.Tensor, doc: tf.Tensor, training: bool = False
    ) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
        """Hidden states [B, L, H], real-token mask [B, L] and [CLS] vector [B, H] (pooled by
        the checkpoint's pooler if any) of [CLS] q [SEP] d [SEP]."""
        tokens, token_types, positions, mask = frame_pair(query, doc, self.cls_id, self.sep_id)
        hidden, cls = self.encoder(tokens, token_types, positions, mask, training=training)
        return hidden, mask, cls

    def call(self, inputs: tuple[tf.Tensor, tf.Tensor], training: bool = False) -> tf.Tensor:
        query, doc = inputs
        _, _, pooled = self.encode(query, doc, training=training)
        if self.pooler is not None:
            pooled = self.pooler(pooled)
        pooled = self.head_dropout(pooled, training=training)
        return tf.squeeze(self.score(pooled), axis=-1)


def build_bert(
    cfg: BertConfig,
    seed: int,
    vocab_size: int,
    vocab: list[str] | None,
    max_query_length: int,
    max_doc_length: int,
) -> BertCrossEncoder:
    """Reads the checkpoint, checks it fits the data ([CLS] q [SEP] d [SEP] within its
    positions), builds the cross-encoder and loads the weights (the pooler's if it has one)."""
    checkpoint, cls_id, sep_id = open_model_checkpoint(
        "bert", cfg, vocab_size, vocab, max_query_length + max_doc_length + 3
    )
    arch = checkpoint.arch
    pretrained_pooler = f"{POOLER}.weight" in checkpoint.tensors
    if cfg.pooler and not pretrained_pooler:
        logging.info("bert: the checkpoint has no pooler; the [CLS] pooler is newly initialised")
    model = BertCrossEncoder(
        arch,
        cfg,
        seed,
        cls_id,
        sep_id,
        pretrained_pooler,
        name="bert",
    )
    model.create_variables()
    model.load_checkpoint(checkpoint)
    return model
