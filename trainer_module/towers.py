"""A dual encoder's towers in the Trainer: the traced embed functions (dev scoring embeds each
text once; frozen documents are embedded once for the training lists) and the frozen document
tower's identity and this process's cache of its vectors.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable

import numpy as np
import tensorflow as tf
import tf_keras as keras

from rankcore.encoders import hf_checkpoint
from trainer_module.config import TrainerConfig

# Frozen document vectors (dual_encoder.frozen_documents) depend on the checkpoint's files, the
# precision policy and a text's token ids alone, so every Trainer of this process that freezes
# the same checkpoint shares them: LocalDagRunner runs cross-validation's k + 1 Trainers in one
# process, and each would otherwise embed the same corpus again (about a minute per Trainer on
# Cranfield on 2 cores). Keyed by document_tower(); token ids -> vector.
_FROZEN_DOCUMENT_VECTORS: dict[str, dict[tuple[int, ...], np.ndarray]] = {}


def document_tower(
    checkpoint_dir: str, companion_dir: str | None = None, companion_weight: float = 0.0
) -> str:
    """The identity of a frozen document tower: a digest of the checkpoint's files, the
    companion's (and its share) when there is one, and the precision policy. Two models with
    the same one give a document the same vector (rankcore/embeddings.py `document_tower`)."""
    parts = (
        hf_checkpoint.checkpoint_digest(checkpoint_dir),
        hf_checkpoint.checkpoint_digest(companion_dir) if companion_dir else "",
        str(companion_weight) if companion_dir else "",
        keras.mixed_precision.global_policy().name,
    )
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()


def frozen_document_cache(tower: str) -> dict[tuple[int, ...], np.ndarray]:
    """The process's document vectors of this frozen tower (document_tower(); filled as used),
    the companion's appended when there is one (dual_encoder.py: those vectors are served)."""
    return _FROZEN_DOCUMENT_VECTORS.setdefault(tower, {})


def configured_document_tower(cfg: TrainerConfig, frozen_documents: bool) -> str:
    """document_tower() of the configured dual encoder when it freezes its documents, else "".

    Frozen document vectors never change: each distinct document is embedded once, for the
    training lists and every dev scoring alike (and for this process's other Trainers of the
    same checkpoint). Its identity goes with the exported vectors (run_fn): the evaluator then
    takes documents from any fold's Trainer with the same tower."""
    if not frozen_documents:
        return ""
    return document_tower(
        cfg.dual_encoder.checkpoint_dir,
        cfg.dual_encoder.companion_checkpoint_dir,
        cfg.dual_encoder.companion_weight,
    )


def embed_fns(model: keras.Model) -> dict[str, Callable[[tf.Tensor], tf.Tensor]] | None:
    """A dual encoder's towers ("q": embed_query, "d": embed_doc) as inference functions of
    padded ids [B, L], for dev scoring (each text once) and frozen documents; None for a model
    without towers. Traced without autograph, as the Controller's score function is."""
    if not hasattr(model, "embed_query"):
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
