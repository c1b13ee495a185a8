"""The BERT encoder (post-LN) of a Hugging Face checkpoint, as Keras layers.

In rankcore because two layers run it: the Trainer (trainer_module/models: the BERT
cross-encoder and the dual encoder) and RankingDataGen's dense retrieval for hybrid candidates
(components/ranking_datagen/dense.py), and those two never import each other.

Word + position + token-type embeddings, LayerNorm; N x [self-attention, add & LayerNorm, GELU
FFN, add & LayerNorm]; variables named so `checkpoint_variables` maps every HF tensor to one.

MPNet (Song et al., "MPNet: Masked and Permuted Pre-training for Language Understanding",
NeurIPS 2020; all-mpnet-base-v2) is the same encoder with three differences, as transformers'
modeling_mpnet.py runs it: no token-type embeddings; positions counted from the padding id + 1
(the caller's `positions`, sentence.py); and a relative-position bias added to every layer's
attention logits, one learned scalar per head and bucket of the key's offset from the query
(`relative_buckets`), shared by all layers. Its tensors have their own names (`attention.attn.q`
for `attention.self.query`, ...), mapped in `checkpoint_variables`.
"""

from __future__ import annotations

import math
from typing import Any

import tensorflow as tf
import tf_keras as keras

from rankcore.encoders.hf_checkpoint import BertArchitecture


class GeneratorDropout(keras.layers.Layer):
    """Dropout drawing from a shared tf.random.Generator.

    Keras' Dropout keeps its RNG state out of checkpoints; a Generator is a variable, so the
    training checkpoint holds it and a resumed run draws exactly the same masks.
    """

    def __init__(self, rate: float, generator: tf.random.Generator, **kwargs):
        super().__init__(**kwargs)
        self.rate = rate
        self._generator = [generator]  # a list: tracked once, by the owning model

    def call(self, x: tf.Tensor, training: bool = False) -> tf.Tensor:
        if not training or self.rate == 0.0:
            return x
        keep = self._generator[0].uniform(tf.shape(x)) >= self.rate
        return tf.where(keep, x / (1.0 - self.rate), tf.zeros_like(x))


_MASKED = -1e9  # added to attention logits of [PAD] keys (float32 softmax: exp -> exactly 0)
POOLER = "pooler.dense"  # the HF name of the checkpoint's [CLS] pooler


def activation(name: str):
    """HF `hidden_act` -> a Keras activation."""
    if name == "gelu":  # HF's "gelu" is the exact erf form
        return lambda x: keras.activations.gelu(x, approximate=False)
    if name in ("gelu_new", "gelu_pytorch_tanh", "gelu_fast"):
        return lambda x: keras.activations.gelu(x, approximate=True)
    if name in ("relu", "tanh", "silu", "swish"):
        return keras.activations.get(name)
    raise ValueError(f"bert checkpoint: hidden_act {name!r} is not supported")


# The initial value of every variable of the encoder: the checkpoint overwrites them all.
_ZEROS = keras.initializers.Zeros()


def _dense(units: int, name: str, activation: Any = None) -> keras.layers.Dense:
    return keras.layers.Dense(units, activation=activation, kernel_initializer=_ZEROS, name=name)


def _layer_norm(arch: BertArchitecture, name: str) -> keras.layers.LayerNormalization:
    return keras.layers.LayerNormalization(epsilon=arch.layer_norm_eps, name=name)


class _Block(keras.layers.Layer):
    """A block of an encoder layer (BertSelfAttention, BertLayer): its sublayers made by
    `_create` from the checkpoint's architecture and the encoder's dropout rates, dropping out
    with the encoder's generator. Both end as transformers' BertSelfOutput and BertOutput do
    (`_add_and_norm`): Dense `output_dense`, dropout, add the block's input, LayerNorm
    `output_norm`."""

    def __init__(
        self,
        arch: BertArchitecture,
        hidden_dropout: float,
        attention_dropout: float,
        generator: tf.random.Generator,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self._create(arch, hidden_dropout, attention_dropout, generator)

    def _create(self, arch, hidden_dropout, attention_dropout, generator) -> None:
        raise NotImplementedError

    def _add_and_norm(self, x: tf.Tensor, hidden: tf.Tensor, training: bool) -> tf.Tensor:
        out = self.dropout(self.output_dense(hidden), training=training)
        return self.output_norm(x + out)


class BertSelfAttention(_Block):
    """Multi-head self-attention + output projection, add & LayerNorm (BertAttention)."""

    def _create(self, arch, hidden_dropout, attention_dropout, generator) -> None:
        self.num_heads = arch.num_heads
        self.head_size = arch.hidden_size // arch.num_heads
        self.query = _dense(arch.hidden_size, "query")
        self.key = _dense(arch.hidden_size, "key")
        self.value = _dense(arch.hidden_size, "value")
        self.output_dense = _dense(arch.hidden_size, "output_dense")
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
        return self._add_and_norm(x, context, training)


class BertLayer(_Block):
    """BertLayer: attention block, then intermediate (activation) + output, add & LayerNorm."""

    def _create(self, arch, hidden_dropout, attention_dropout, generator) -> None:
        self.attention = BertSelfAttention(
            arch, hidden_dropout, attention_dropout, generator, name="attention"
        )
        self.intermediate = _dense(
            arch.intermediate_size, "intermediate", activation(arch.hidden_act)
        )
        self.output_dense = _dense(arch.hidden_size, "output_dense")
        self.output_norm = _layer_norm(arch, "output_layer_norm")
        self.dropout = GeneratorDropout(hidden_dropout, generator)

    def call(self, x: tf.Tensor, key_bias: tf.Tensor, training: bool = False) -> tf.Tensor:
        x = self.attention(x, key_bias, training=training)
        return self._add_and_norm(x, self.intermediate(x), training)


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
        # Every variable here is the checkpoint's (checkpoint_variables names them all, and
        # load_into refuses a checkpoint that lacks one), so they are created as zeros (_ZEROS):
        # drawing random values for MiniLM, its frozen copy and MPNet took about 1.3 s of each
        # dual-encoder Trainer's set-up on 2 cores, for values overwritten at once.
        init = _ZEROS
        self.word_embeddings = keras.layers.Embedding(
            arch.vocab_size, arch.hidden_size, embeddings_initializer=init, name="word_embeddings"
        )
        self.position_embeddings = keras.layers.Embedding(
            arch.max_position,
            arch.hidden_size,
            embeddings_initializer=init,
            name="position_embeddings",
        )
        self.token_type_embeddings = (
            keras.layers.Embedding(
                arch.type_vocab_size,
                arch.hidden_size,
                embeddings_initializer=init,
                name="token_type_embeddings",
            )
            if arch.type_vocab_size
            else None
        )
        # MPNet's, created in build() so that its name is under the layer's, as every other
        # variable's (encoder/relative_attention_bias: the trainer's encoder_patterns find it).
        self.relative_attention_bias = None
        self.embeddings_norm = _layer_norm(arch, "embeddings_layer_norm")
        self.dropout = GeneratorDropout(hidden_dropout, generator)
        self.layers_ = [
            BertLayer(arch, hidden_dropout, attention_dropout, generator, name=f"layer_{i}")
            for i in range(arch.num_layers)
        ]
        self.pooler = _dense(arch.hidden_size, "pooler", "tanh") if with_pooler else None

    def build(self, input_shape) -> None:
        if self.arch.relative_attention_buckets:
            self.relative_attention_bias = self.add_weight(
                name="relative_attention_bias",
                shape=[self.arch.relative_attention_buckets, self.arch.num_heads],
                initializer=_ZEROS,
            )
        super().build(input_shape)

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
        x = self.word_embeddings(tokens) + self.position_embeddings(positions)
        if self.token_type_embeddings is not None:
            x += self.token_type_embeddings(token_types)
        x = self.dropout(self.embeddings_norm(x), training=training)
        key_bias = tf.where(mask, 0.0, _MASKED)[:, None, None, :]
        if self.relative_attention_bias is not None:
            # [1, heads, L, L] + [B, 1, 1, L]: each layer adds it to its logits.
            key_bias = key_bias + self._relative_bias(tf.shape(tokens)[1])
        for layer in self.layers_:
            x = layer(x, key_bias, training=training)
        # Applied here, not by the caller, so its variables are named under encoder/.
        cls = x[:, 0] if self.pooler is None else self.pooler(x[:, 0])
        return x, cls

    def _relative_bias(self, length: tf.Tensor) -> tf.Tensor:
        """MPNet's bias [1, heads, L, L]: query i, key j -> the bias of j - i's bucket."""
        offsets = tf.range(length)[None, :] - tf.range(length)[:, None]
        buckets = relative_buckets(
            offsets, self.arch.relative_attention_buckets, self.arch.relative_max_distance
        )
        bias = tf.gather(self.relative_attention_bias, buckets)  # [L, L, heads]
        # float32 as the key bias it joins: under mixed precision the variable reads as the
        # compute dtype (bfloat16), and the softmax adds the bias in float32.
        return tf.cast(tf.transpose(bias, [2, 0, 1])[None], tf.float32)

    def checkpoint_variables(self) -> dict[str, tuple[tf.Variable, bool]]:
        """HF tensor name -> (variable, whether the HF tensor is a transposed Linear weight)."""
        names = _ATTENTION_NAMES[self.arch.model_type == "mpnet"]
        out: dict[str, tuple[tf.Variable, bool]] = {
            "embeddings.word_embeddings.weight": (self.word_embeddings.embeddings, False),
            "embeddings.position_embeddings.weight": (self.position_embeddings.embeddings, False),
        }
        if self.token_type_embeddings is not None:
            out["embeddings.token_type_embeddings.weight"] = (
                self.token_type_embeddings.embeddings,
                False,
            )
        if self.relative_attention_bias is not None:
            out["encoder.relative_attention_bias.weight"] = (self.relative_attention_bias, False)
        out.update(_norm_variables("embeddings.LayerNorm", self.embeddings_norm))
        for i, layer in enumerate(self.layers_):
            prefix = f"encoder.layer.{i}"
            att = layer.attention
            for hf, dense in (
                (f"{prefix}.{names['query']}", att.query),
                (f"{prefix}.{names['key']}", att.key),
                (f"{prefix}.{names['value']}", att.value),
                (f"{prefix}.{names['output']}", att.output_dense),
                (f"{prefix}.intermediate.dense", layer.intermediate),
                (f"{prefix}.output.dense", layer.output_dense),
            ):
                out.update(_dense_variables(hf, dense))
            out.update(_norm_variables(f"{prefix}.{names['norm']}", att.output_norm))
            out.update(_norm_variables(f"{prefix}.output.LayerNorm", layer.output_norm))
        if self.pooler is not None:
            out.update(_dense_variables(POOLER, self.pooler))
        return out


# The attention block's tensor names under encoder.layer.N: transformers' BertModel (False) and
# MPNetModel (True); the rest of a layer is named alike.
_ATTENTION_NAMES = {
    False: {
        "query": "attention.self.query",
        "key": "attention.self.key",
        "value": "attention.self.value",
        "output": "attention.output.dense",
        "norm": "attention.output.LayerNorm",
    },
    True: {
        "query": "attention.attn.q",
        "key": "attention.attn.k",
        "value": "attention.attn.v",
        "output": "attention.attn.o",
        "norm": "attention.LayerNorm",
    },
}


def relative_buckets(offsets: tf.Tensor, buckets: int, max_distance: int) -> tf.Tensor:
    """Key offset from the query (int32, key - query) -> bucket id, as MPNet buckets it (T5's
    bidirectional scheme): half the buckets per direction, the nearer half of those one per
    distance, the rest spaced logarithmically up to `max_distance`, beyond it the last.
    Written by hand: a few lines, and no library we use has it as a TF op."""
    half = buckets // 2
    exact = half // 2
    n = -offsets  # query - key: keys before the query are positive
    bucket = tf.cast(n < 0, tf.int32) * half
    n = tf.abs(n)
    # log(0) never reaches the result (n < exact takes the exact bucket); 1 keeps it finite.
    scaled = tf.math.log(tf.cast(tf.maximum(n, 1), tf.float32) / exact) / math.log(
        max_distance / exact
    )
    far = tf.minimum(exact + tf.cast(scaled * (half - exact), tf.int32), half - 1)
    return bucket + tf.where(n < exact, n, far)


def _dense_variables(name: str, dense: keras.layers.Dense) -> dict[str, tuple[tf.Variable, bool]]:
    # torch Linear stores weight [out, in]; a Keras Dense kernel is [in, out].
    return {f"{name}.weight": (dense.kernel, True), f"{name}.bias": (dense.bias, False)}


def _norm_variables(
    name: str, norm: keras.layers.LayerNormalization
) -> dict[str, tuple[tf.Variable, bool]]:
    return {f"{name}.weight": (norm.gamma, False), f"{name}.bias": (norm.beta, False)}
