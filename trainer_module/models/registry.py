"""Model registry: config name -> builder. Every model maps (query [B, Lq], doc [B, Ld]) -> [B].

The one list of model names: trainer_module/config.py takes `MODEL_NAMES` from here, so this
module imports TensorFlow and the models only inside the builders (the pipeline config loads
without TensorFlow).

Pretrained or embedding variables are named under "encoder"/"embedding" so the default
encoder_patterns give them encoder_learning_rate (and freeze_patterns can target them).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import tf_keras as keras

    from trainer_module.config import TrainerConfig

Builder = Callable[["TrainerConfig", int, "list[str] | None", int, int], "keras.Model"]


def _knrm(cfg: TrainerConfig, vocab_size: int, vocab: list[str] | None, lq: int, ld: int):
    from trainer_module.models.embeddings import embedding_initializer
    from trainer_module.models.knrm import Knrm

    init = embedding_initializer(cfg.embedding_file, vocab, cfg.knrm.embedding_dim, cfg.seed)
    return Knrm(vocab_size, cfg.knrm, init, name="knrm")


def _conv_knrm(cfg: TrainerConfig, vocab_size: int, vocab: list[str] | None, lq: int, ld: int):
    from trainer_module.models.conv_knrm import ConvKnrm
    from trainer_module.models.embeddings import embedding_initializer

    init = embedding_initializer(cfg.embedding_file, vocab, cfg.conv_knrm.embedding_dim, cfg.seed)
    return ConvKnrm(vocab_size, cfg.conv_knrm, init, name="conv_knrm")


def _transformer(cfg: TrainerConfig, vocab_size: int, vocab: list[str] | None, lq: int, ld: int):
    from trainer_module.models.transformer import TransformerCrossEncoder, special_token_ids

    if lq + ld + 3 > cfg.transformer.max_position:
        raise ValueError(
            f"trainer config: transformer.max_position={cfg.transformer.max_position} is below "
            f"max_query_length + max_doc_length + 3 = {lq + ld + 3}"
        )
    cls_id, sep_id = special_token_ids(vocab)
    return TransformerCrossEncoder(
        vocab_size, cfg.transformer, cfg.seed, cls_id, sep_id, name="transformer"
    )


def _bert(cfg: TrainerConfig, vocab_size: int, vocab: list[str] | None, lq: int, ld: int):
    from trainer_module.models.bert import build_bert

    return build_bert(cfg.bert, cfg.seed, vocab_size, vocab, lq, ld)


def _dual_encoder(cfg: TrainerConfig, vocab_size: int, vocab: list[str] | None, lq: int, ld: int):
    from trainer_module.models.dual_encoder import build_dual_encoder

    return build_dual_encoder(cfg.dual_encoder, cfg.seed, vocab_size, vocab, lq, ld)


@dataclass(frozen=True)
class ModelEntry:
    """A model's builder and what it offers, so no caller asks the built model what it is."""

    build: Builder
    # Initialised from a pretrained checkpoint (<model>.checkpoint_dir): train_steps 0
    # (zero-shot) exports it as it is.
    pretrained: bool = False
    # Separate query and document towers (embed_query / embed_doc, L2-normalised): the
    # in-batch and frozen-documents recipes, dev scoring that embeds each text once and the
    # embed signatures of the export need them.
    towers: bool = False
    # mixed_bfloat16 speeds it on a CPU with native bfloat16 and keeps its quality, so
    # `mixed_precision: auto` picks it there (trainer_module/hardware.py). The pretrained
    # transformers: matrix products are nearly all their time, and their vectors stay within
    # a cosine of 1e-3 of float32's (docs/speed.md "bfloat16 on the CPU"). Not KNRM or Conv-KNRM:
    # their exact-match kernel (sigma 0.001 around cosine 1) is finer than bfloat16's 8-bit
    # mantissa, and their time is not in matrix products.
    bf16_on_cpu: bool = False


_REGISTRY: dict[str, ModelEntry] = {
    "knrm": ModelEntry(_knrm),
    "conv_knrm": ModelEntry(_conv_knrm),
    "transformer": ModelEntry(_transformer),
    "bert": ModelEntry(_bert, pretrained=True, bf16_on_cpu=True),
    "dual_encoder": ModelEntry(_dual_encoder, pretrained=True, towers=True, bf16_on_cpu=True),
}


# The `trainer.model` names trainer_module/config.py accepts, in registry order.
MODEL_NAMES = tuple(_REGISTRY)
# The models initialised from a pretrained checkpoint (zero-shot is theirs).
PRETRAINED_MODEL_NAMES = tuple(name for name, e in _REGISTRY.items() if e.pretrained)


def offers_towers(model: str) -> bool:
    """Whether model `model` has separate query and document towers (embed_query/embed_doc)."""
    entry = _REGISTRY.get(model)
    return bool(entry and entry.towers)


def bf16_pays_on_cpu(model: str) -> bool:
    """Whether `mixed_precision: auto` may pick bfloat16 for model `model` on a CPU that has
    it natively (ModelEntry.bf16_on_cpu)."""
    entry = _REGISTRY.get(model)
    return bool(entry and entry.bf16_on_cpu)


def model_names() -> list[str]:
    return sorted(_REGISTRY)


def build_model(
    cfg: TrainerConfig,
    vocab_size: int,
    max_query_length: int,
    max_doc_length: int,
    vocab: list[str] | None = None,
) -> keras.Model:
    """Builds (and creates the variables of) the configured model."""
    import tensorflow as tf

    if cfg.model not in _REGISTRY:
        raise ValueError(f"trainer config: model must be one of {model_names()}, got {cfg.model}")
    model = _REGISTRY[cfg.model].build(cfg, vocab_size, vocab, max_query_length, max_doc_length)
    if not model.built:  # a pretrained model's builder created (and loaded) them already
        dummy = tf.ones([1, 2], tf.int64)
        model((dummy, dummy), training=False)  # create variables now, inside the caller's scope
    return model
