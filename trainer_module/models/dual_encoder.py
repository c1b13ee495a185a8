"""Dual encoder (bi-encoder) from a pretrained BERT-family checkpoint, used as sentence-transformers
uses all-MiniLM-L6-v2: query and document are encoded separately by the same encoder
(`[CLS] text [SEP]`, token types 0), the final hidden states are mean-pooled over the real tokens
(`[CLS]` and `[SEP]` included, as the sentence-transformers attention mask includes them), L2
normalised, and the score is the cosine similarity of the two vectors (rankcore/encoders/
sentence.py, the one definition of that embedding, shared with RankingDataGen's dense retrieval).

The model keeps the registry's contract ((query ids [B, Lq], doc ids [B, Ld]) -> scores [B]) for
validation, export and evaluation, and exposes `embed` so the in-batch loss (trainer_module/
losses.py: in_batch_softmax) can score every query of a batch against every document of it.

Variables: the encoder lives under `dual_encoder/encoder/...` (the "encoder" group of
`encoder_patterns`, trained at `encoder_learning_rate`); there are no other trainable variables.
"""

from __future__ import annotations

import tensorflow as tf
import tf_keras as keras

from rankcore.encoders import hf_checkpoint
from rankcore.encoders.bert import BertEncoder
from rankcore.encoders.hf_checkpoint import BertArchitecture
from rankcore.encoders.sentence import frame_single, mean_pool
from trainer_module.config import DualEncoderConfig


class DualEncoder(keras.Model):
    """(query ids [B, Lq], doc ids [B, Ld]) -> cosine similarity [B] (float32)."""

    def __init__(
        self,
        arch: BertArchitecture,
        cfg: DualEncoderConfig,
        cls_id: int,
        sep_id: int,
        seed: int,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.arch = arch
        self.cls_id, self.sep_id = cls_id, sep_id
        self.rng = tf.random.Generator.from_seed(seed)
        hidden, attention = hf_checkpoint.dropout_rates(
            arch, cfg.hidden_dropout, cfg.attention_dropout
        )
        # Mean pooling reads no pooler: the checkpoint's pooler (if any) stays unloaded.
        self.encoder = BertEncoder(arch, hidden, attention, self.rng, False, name="encoder")

    def embed(self, ids: tf.Tensor, training: bool = False) -> tf.Tensor:
        """Right-padded ids [B, L] -> L2-normalised mean-pooled embeddings [B, H] (float32)."""
        tokens, types, positions, mask = frame_single(ids, self.cls_id, self.sep_id)
        hidden, _ = self.encoder(tokens, types, positions, mask, training=training)
        return mean_pool(hidden, mask)

    def call(self, inputs: tuple[tf.Tensor, tf.Tensor], training: bool = False) -> tf.Tensor:
        query, doc = inputs
        return tf.reduce_sum(
            self.embed(query, training=training) * self.embed(doc, training=training), axis=-1
        )

    def checkpoint_variables(self) -> dict[str, tuple[tf.Variable, bool]]:
        return self.encoder.checkpoint_variables()


def build_dual_encoder(
    cfg: DualEncoderConfig,
    seed: int,
    vocab_size: int,
    vocab: list[str] | None,
    max_query_length: int,
    max_doc_length: int,
) -> DualEncoder:
    """Reads the checkpoint, checks it fits the data, builds the model and loads the weights."""
    if not cfg.checkpoint_dir:
        raise ValueError(
            "trainer config: dual_encoder.checkpoint_dir is required for model=dual_encoder"
        )
    checkpoint, cls_id, sep_id = hf_checkpoint.open_checkpoint(
        cfg.checkpoint_dir,
        "dual_encoder",
        vocab_size,
        vocab,
        max(max_query_length, max_doc_length) + 2,
    )
    model = DualEncoder(checkpoint.arch, cfg, cls_id, sep_id, seed, name="dual_encoder")
    dummy = tf.ones([1, 2], tf.int64)
    model((dummy, dummy), training=False)  # create the variables, then overwrite them
    hf_checkpoint.load_into(model.checkpoint_variables(), checkpoint)
    return model
