"""What the Trainer's two models over a Hugging Face BERT-family checkpoint share (bert.py's
cross-encoder, dual_encoder.py's bi-encoder): opening the configured checkpoint, and the model's
base (architecture, special token ids, the dropout generator, the encoder's variables).
"""

from __future__ import annotations

import tensorflow as tf
import tf_keras as keras

from rankcore.encoders import hf_checkpoint
from rankcore.encoders.hf_checkpoint import BertArchitecture, BertCheckpoint
from trainer_module.config import BertConfig, DualEncoderConfig


def open_model_checkpoint(
    model: str,
    cfg: BertConfig | DualEncoderConfig,
    vocab_size: int,
    vocab: list[str] | None,
    longest_input: int,
    sentence_encoder: bool = False,
) -> tuple[BertCheckpoint, int, int]:
    """(checkpoint, cls_id, sep_id) of `model`'s (its config name) required checkpoint_dir,
    checked to fit the data (hf_checkpoint.open_checkpoint; MPNet only as a
    `sentence_encoder`)."""
    if not cfg.checkpoint_dir:
        raise ValueError(f"trainer config: {model}.checkpoint_dir is required for model={model}")
    return hf_checkpoint.open_checkpoint(
        cfg.checkpoint_dir, model, vocab_size, vocab, longest_input, sentence_encoder
    )


class EncoderModel(keras.Model):
    """A model around a checkpoint's BERT encoder (`self.encoder`, set by the subclass): the
    checkpoint's architecture, the [CLS] / [SEP] ids it frames text with, the one
    tf.random.Generator every dropout draws from (a variable: the training checkpoint holds it,
    so a resumed run draws the same masks) and the encoder's dropout rates (the config's, else
    the checkpoint's config.json's)."""

    def __init__(
        self,
        arch: BertArchitecture,
        cfg: BertConfig | DualEncoderConfig,
        cls_id: int,
        sep_id: int,
        seed: int,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.arch = arch
        self.cls_id, self.sep_id = cls_id, sep_id
        self.rng = tf.random.Generator.from_seed(seed)
        self.hidden_dropout, self.attention_dropout = hf_checkpoint.dropout_rates(
            arch, cfg.hidden_dropout, cfg.attention_dropout
        )

    def create_variables(self) -> None:
        """Creates the variables (a call on a dummy pair), for load_checkpoint to overwrite."""
        dummy = tf.ones([1, 2], tf.int64)
        self((dummy, dummy), training=False)

    def checkpoint_variables(self) -> dict[str, tuple[tf.Variable, bool]]:
        """The trained encoder's variables by Hugging Face tensor name (a dual encoder's: its
        query encoder's; frozen towers load their own)."""
        return self.encoder.checkpoint_variables()

    def load_checkpoint(self, checkpoint: BertCheckpoint) -> None:
        """Assigns every encoder variable its checkpoint tensor (call after building)."""
        hf_checkpoint.load_into(self.checkpoint_variables(), checkpoint)
