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
import math

import tensorflow as tf
import tf_keras as keras

from trainer_module.config import BertConfig
from trainer_module.models import hf_checkpoint
from trainer_module.models.hf_checkpoint import BertArchitecture, BertCheckpoint
from trainer_module.models.transformer import GeneratorDropout, frame_pair

_MASKED = -1e9  # added to attention logits of [PAD] keys (float32 softmax: exp -> exactly 0)
_POOLER = "pooler.dense"


def activation(name: str):
    """HF `hidden_act` -> a Keras activation."""
    if name == "gelu":  # HF's "gelu" is the exact erf form
        return lambda x: keras.activations.gelu(x, approximate=False)
    if name in ("gelu_new", "gelu_pytorch_tanh", "gelu_fast"):
        return lambda x: keras.activations.gelu(x, approximate=True)
    if name in ("relu", "tanh", "silu", "swish"):
        return keras.activations.get(name)
    raise ValueError(f"bert checkpoint: hidden_act {name!r} is not supported")


def _layer_norm(arch: BertArchitecture, name: str) -> keras.layers.LayerNormalization:
    return keras.layers.LayerNormalization(epsilon=arch.layer_norm_eps, name=name)


class BertSelfAttention(keras.layers.Layer):
    """Multi-head self-attention + output projection, add & LayerNorm (BertAttention)."""

    def __init__(
        self,
        arch: BertArchitecture,
        hidden_dropout: float,
        attention_dropout: float,
        generator: tf.random.Generator,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.num_heads = arch.num_heads
        self.head_size = arch.hidden_size // arch.num_heads
        self.query = keras.layers.Dense(arch.hidden_size, name="query")
        self.key = keras.layers.Dense(arch.hidden_size, name="key")
        self.value = keras.layers.Dense(arch.hidden_size, name="value")
        self.output_dense = keras.layers.Dense(arch.hidden_size, name="output_dense")
        self.output_norm = _layer_norm(arch, "output_layer_norm")
        self.probs_dropout = GeneratorDropout(attention_dropout, generator)
        self.dropout = GeneratorDropout(hidden_dropout, generator)

    def _heads(self, x: tf.Tensor, batch: tf.Tensor, length: tf.Tensor) -> tf.Tensor:
        x = tf.reshape(x, [batch, length, self.num_heads, self.head_size])
        return tf.transpose(x, [0, 2, 1, 3])  # [B, heads, L, head_size]

    def call(self, x: tf.Tensor, key_bias: tf.Tensor, training: bool = False) -> tf.Tensor:
        batch, length = tf.shape(x)[0], tf.shape(x)[1]
        q = self._heads(self.query(x), batch, length)
        k = self._heads(self.key(x), batch, length)
        v = self._heads(self.value(x), batch, length)
        logits = tf.matmul(q, k, transpose_b=True) * (1.0 / math.sqrt(self.head_size))
        # Softmax in float32 under mixed precision; key_bias [B, 1, 1, L] masks [PAD] keys.
        probs = tf.nn.softmax(tf.cast(logits, tf.float32) + key_bias, axis=-1)
        probs = self.probs_dropout(tf.cast(probs, v.dtype), training=training)
        context = tf.transpose(tf.matmul(probs, v), [0, 2, 1, 3])
        context = tf.reshape(context, [batch, length, self.num_heads * self.head_size])
        out = self.dropout(self.output_dense(context), training=training)
        return self.output_norm(x + out)


class BertLayer(keras.layers.Layer):
    """BertLayer: attention block, then intermediate (activation) + output, add & LayerNorm."""

    def __init__(
        self,
        arch: BertArchitecture,
        hidden_dropout: float,
        attention_dropout: float,
        generator: tf.random.Generator,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.attention = BertSelfAttention(
            arch, hidden_dropout, attention_dropout, generator, name="attention"
        )
        self.intermediate = keras.layers.Dense(
            arch.intermediate_size, activation=activation(arch.hidden_act), name="intermediate"
        )
        self.output_dense = keras.layers.Dense(arch.hidden_size, name="output_dense")
        self.output_norm = _layer_norm(arch, "output_layer_norm")
        self.dropout = GeneratorDropout(hidden_dropout, generator)

    def call(self, x: tf.Tensor, key_bias: tf.Tensor, training: bool = False) -> tf.Tensor:
        x = self.attention(x, key_bias, training=training)
        out = self.dropout(self.output_dense(self.intermediate(x)), training=training)
        return self.output_norm(x + out)


class BertEncoder(keras.layers.Layer):
    """Embeddings + layers (+ the checkpoint's pooler): every pretrained variable."""

    def __init__(
        self,
        arch: BertArchitecture,
        hidden_dropout: float,
        attention_dropout: float,
        generator: tf.random.Generator,
        with_pooler: bool,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.arch = arch
        init = keras.initializers.TruncatedNormal(stddev=0.02)  # overwritten by the checkpoint
        self.word_embeddings = keras.layers.Embedding(
            arch.vocab_size, arch.hidden_size, embeddings_initializer=init, name="word_embeddings"
        )
        self.position_embeddings = keras.layers.Embedding(
            arch.max_position,
            arch.hidden_size,
            embeddings_initializer=init,
            name="position_embeddings",
        )
        self.token_type_embeddings = keras.layers.Embedding(
            arch.type_vocab_size,
            arch.hidden_size,
            embeddings_initializer=init,
            name="token_type_embeddings",
        )
        self.embeddings_norm = _layer_norm(arch, "embeddings_layer_norm")
        self.dropout = GeneratorDropout(hidden_dropout, generator)
        self.layers_ = [
            BertLayer(arch, hidden_dropout, attention_dropout, generator, name=f"layer_{i}")
            for i in range(arch.num_layers)
        ]
        self.pooler = (
            keras.layers.Dense(arch.hidden_size, activation="tanh", name="pooler")
            if with_pooler
            else None
        )

    def call(
        self,
        tokens: tf.Tensor,
        token_types: tf.Tensor,
        positions: tf.Tensor,
        mask: tf.Tensor,
        training: bool = False,
    ) -> tuple[tf.Tensor, tf.Tensor]:
        """Final hidden states [B, L, H] (pad positions hold garbage; never read) and the
        [CLS] vector [B, H], through the checkpoint's pooler when there is one."""
        x = (
            self.word_embeddings(tokens)
            + self.position_embeddings(positions)
            + self.token_type_embeddings(token_types)
        )
        x = self.dropout(self.embeddings_norm(x), training=training)
        key_bias = tf.where(mask, 0.0, _MASKED)[:, None, None, :]
        for layer in self.layers_:
            x = layer(x, key_bias, training=training)
        # Applied here, not by the caller, so its variables are named under encoder/.
        cls = x[:, 0] if self.pooler is None else self.pooler(x[:, 0])
        return x, cls

    def checkpoint_variables(self) -> dict[str, tuple[tf.Variable, bool]]:
        """HF tensor name -> (variable, whether the HF tensor is a transposed Linear weight)."""
        out: dict[str, tuple[tf.Variable, bool]] = {
            "embeddings.word_embeddings.weight": (self.word_embeddings.embeddings, False),
            "embeddings.position_embeddings.weight": (self.position_embeddings.embeddings, False),
            "embeddings.token_type_embeddings.weight": (
                self.token_type_embeddings.embeddings,
                False,
            ),
        }
        out.update(_norm_variables("embeddings.LayerNorm", self.embeddings_norm))
        for i, layer in enumerate(self.layers_):
            prefix = f"encoder.layer.{i}"
            att = layer.attention
            for hf, dense in (
                (f"{prefix}.attention.self.query", att.query),
                (f"{prefix}.attention.self.key", att.key),
                (f"{prefix}.attention.self.value", att.value),
                (f"{prefix}.attention.output.dense", att.output_dense),
                (f"{prefix}.intermediate.dense", layer.intermediate),
                (f"{prefix}.output.dense", layer.output_dense),
            ):
                out.update(_dense_variables(hf, dense))
            out.update(_norm_variables(f"{prefix}.attention.output.LayerNorm", att.output_norm))
            out.update(_norm_variables(f"{prefix}.output.LayerNorm", layer.output_norm))
        if self.pooler is not None:
            out.update(_dense_variables(_POOLER, self.pooler))
        return out


def _dense_variables(name: str, dense: keras.layers.Dense) -> dict[str, tuple[tf.Variable, bool]]:
    # torch Linear stores weight [out, in]; a Keras Dense kernel is [in, out].
    return {f"{name}.weight": (dense.kernel, True), f"{name}.bias": (dense.bias, False)}


def _norm_variables(
    name: str, norm: keras.layers.LayerNormalization
) -> dict[str, tuple[tf.Variable, bool]]:
    return {f"{name}.weight": (norm.gamma, False), f"{name}.bias": (norm.beta, False)}


class BertCrossEncoder(keras.Model):
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
        super().__init__(**kwargs)
        self.arch = arch
        self.cls_id, self.sep_id = cls_id, sep_id
        self.rng = tf.random.Generator.from_seed(seed)
        hidden, attention = hf_checkpoint.dropout_rates(
            arch, cfg.hidden_dropout, cfg.attention_dropout
        )
        self.encoder = BertEncoder(
            arch, hidden, attention, self.rng, cfg.pooler and pretrained_pooler, name="encoder"
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

    def checkpoint_variables(self) -> dict[str, tuple[tf.Variable, bool]]:
        return self.encoder.checkpoint_variables()

    def load_checkpoint(self, checkpoint: BertCheckpoint) -> None:
        """Assigns every encoder variable its checkpoint tensor (call after building)."""
        hf_checkpoint.load_into(self.checkpoint_variables(), checkpoint)


def build_bert(
    cfg: BertConfig,
    seed: int,
    vocab_size: int,
    vocab: list[str] | None,
    max_query_length: int,
    max_doc_length: int,
) -> BertCrossEncoder:
    """Reads the checkpoint, checks it fits the data, builds the model and loads the weights."""
    if not cfg.checkpoint_dir:
        raise ValueError("trainer config: bert.checkpoint_dir is required for model=bert")
    checkpoint, cls_id, sep_id = hf_checkpoint.open_checkpoint(
        cfg.checkpoint_dir, "bert", vocab_size, vocab, max_query_length + max_doc_length + 3
    )
    arch = checkpoint.arch
    pretrained_pooler = f"{_POOLER}.weight" in checkpoint.tensors
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
    dummy = tf.ones([1, 2], tf.int64)
    model((dummy, dummy), training=False)  # create the variables, then overwrite them
    model.load_checkpoint(checkpoint)
    return model
