"""A dual encoder's towers in the Trainer: the traced embed functions (dev scoring embeds each
text once; a frozen-documents recipe embeds its documents once for the training lists)."""

from __future__ import annotations

from collections.abc import Callable

import tensorflow as tf
import tf_keras as keras

from trainer_module.models.registry import offers_towers


def embed_fns(
    model: keras.Model, model_name: str
) -> dict[str, Callable[[tf.Tensor], tf.Tensor]] | None:
    """A dual encoder's towers ("q": embed_query, "d": embed_doc) as inference functions of
    padded ids [B, L], for dev scoring (each text once) and frozen documents; None for a model
    without towers (the registry says which, `model_name` = trainer.model). Traced without
    autograph, as the Controller's score function is."""
    if not offers_towers(model_name):
        return None
    ids = tf.TensorSpec([None, None], tf.int64)
    return {
        kind: tf.function(
            lambda x, f=embed: f(x, training=False),
            input_signature=[ids],
            autograph=False,
        )
        for kind, embed in (("q", model.embed_query), ("d", model.embed_doc))
    }
