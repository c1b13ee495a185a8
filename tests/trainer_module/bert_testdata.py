"""A tiny Hugging Face BERT checkpoint written from scratch, and a numpy BERT forward pass.

Both are independent of trainer_module: the safetensors file is laid out by hand (8-byte
little-endian header size, JSON header with dtype/shape/data_offsets, raw little-endian data),
and the reference forward pass is plain numpy over the HF tensor names.
"""

from __future__ import annotations

import json
import math
import os
import struct

import numpy as np
from scipy.special import erf

TINY_CONFIG = {
    "architectures": ["BertModel"],
    "model_type": "bert",
    "hidden_size": 32,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "intermediate_size": 64,
    "hidden_act": "gelu",
    "hidden_dropout_prob": 0.1,
    "attention_probs_dropout_prob": 0.1,
    "max_position_embeddings": 64,
    "type_vocab_size": 2,
    "layer_norm_eps": 1e-12,
    "position_embedding_type": "absolute",
    "pad_token_id": 0,
}


def write_safetensors(path: str, tensors: dict[str, np.ndarray], dtypes: dict | None = None):
    """The safetensors binary layout; `dtypes` maps names to "F32" (default), "F16" or "I64"."""
    np_types = {"F32": "<f4", "F16": "<f2", "I64": "<i8"}
    header, chunks, offset = {"__metadata__": {"format": "pt"}}, [], 0
    for name, array in tensors.items():
        kind = (dtypes or {}).get(name, "F32")
        raw = np.ascontiguousarray(array, dtype=np_types[kind]).tobytes()
        header[name] = {
            "dtype": kind,
            "shape": list(array.shape),
            "data_offsets": [offset, offset + len(raw)],
        }
        chunks.append(raw)
        offset += len(raw)
    blob = json.dumps(header).encode()
    blob += b" " * (-len(blob) % 8)  # the format pads the header to 8-byte alignment
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(blob)))
        f.write(blob)
        for raw in chunks:
            f.write(raw)


# The attention block's names under encoder.layer.N in transformers' BertModel and MPNetModel.
_ATTENTION = {
    "bert": (
        ("attention.self.query", "attention.self.key", "attention.self.value"),
        "attention.output.dense",
        "attention.output.LayerNorm",
    ),
    "mpnet": (
        ("attention.attn.q", "attention.attn.k", "attention.attn.v"),
        "attention.attn.o",
        "attention.LayerNorm",
    ),
}


def tiny_tensors(
    vocab_size: int, config: dict = TINY_CONFIG, seed: int = 0, pooler: bool = True
) -> dict[str, np.ndarray]:
    """Random weights under transformers' BertModel (or, for an mpnet config, MPNetModel)
    names (Linear weights are [out, in])."""
    rng = np.random.default_rng(seed)
    h, inter = config["hidden_size"], config["intermediate_size"]
    mpnet = config.get("model_type") == "mpnet"
    (qkv, out_dense, out_norm) = _ATTENTION["mpnet" if mpnet else "bert"]

    def w(*shape: int, scale: float = 0.2) -> np.ndarray:
        return rng.normal(0.0, scale, size=shape).astype(np.float32)

    t = {
        "embeddings.word_embeddings.weight": w(vocab_size, h, scale=0.5),
        "embeddings.position_embeddings.weight": w(config["max_position_embeddings"], h),
    }
    if not mpnet:
        t["embeddings.token_type_embeddings.weight"] = w(config["type_vocab_size"], h)
    t["embeddings.LayerNorm.weight"] = 1.0 + w(h, scale=0.1)
    t["embeddings.LayerNorm.bias"] = w(h, scale=0.1)
    if mpnet:  # large enough that a wrong bucket moves the output well past the tolerance
        t["encoder.relative_attention_bias.weight"] = w(
            config["relative_attention_num_buckets"], config["num_attention_heads"], scale=1.0
        )
    for i in range(config["num_hidden_layers"]):
        p = f"encoder.layer.{i}"
        for name in qkv:
            t[f"{p}.{name}.weight"], t[f"{p}.{name}.bias"] = w(h, h), w(h, scale=0.1)
        t[f"{p}.{out_dense}.weight"] = w(h, h)
        t[f"{p}.{out_dense}.bias"] = w(h, scale=0.1)
        t[f"{p}.{out_norm}.weight"] = 1.0 + w(h, scale=0.1)
        t[f"{p}.{out_norm}.bias"] = w(h, scale=0.1)
        t[f"{p}.intermediate.dense.weight"] = w(inter, h)
        t[f"{p}.intermediate.dense.bias"] = w(inter, scale=0.1)
        t[f"{p}.output.dense.weight"] = w(h, inter)
        t[f"{p}.output.dense.bias"] = w(h, scale=0.1)
        t[f"{p}.output.LayerNorm.weight"] = 1.0 + w(h, scale=0.1)
        t[f"{p}.output.LayerNorm.bias"] = w(h, scale=0.1)
    if pooler:
        t["pooler.dense.weight"], t["pooler.dense.bias"] = w(h, h), w(h, scale=0.1)
    return t


def write_checkpoint(
    directory: str,
    vocab: list[str],
    config: dict = TINY_CONFIG,
    seed: int = 0,
    pooler: bool = True,
    prefix: str = "",
) -> dict[str, np.ndarray]:
    """Writes config.json, vocab.txt and model.safetensors; returns the tensors (HF names).

    `prefix` ("bert.") writes the names the way task models (BertForSequenceClassification)
    do; an int64 `embeddings.position_ids` buffer is included as real checkpoints have it.
    """
    os.makedirs(directory, exist_ok=True)
    tensors = tiny_tensors(len(vocab), config, seed, pooler)
    with open(os.path.join(directory, "config.json"), "w") as f:
        json.dump({**config, "vocab_size": len(vocab)}, f)
    with open(os.path.join(directory, "vocab.txt"), "w") as f:
        f.write("\n".join(vocab) + "\n")
    stored = {prefix + k: v for k, v in tensors.items()}
    position_ids = np.arange(config["max_position_embeddings"], dtype=np.int64)[None, :]
    stored[prefix + "embeddings.position_ids"] = position_ids
    write_safetensors(
        os.path.join(directory, "model.safetensors"),
        stored,
        {prefix + "embeddings.position_ids": "I64"},
    )
    return tensors


# --------------------------------------------------------------------- numpy reference forward


def _layer_norm(x: np.ndarray, gamma: np.ndarray, beta: np.ndarray, eps: float) -> np.ndarray:
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * gamma + beta


def _linear(x: np.ndarray, t: dict, name: str) -> np.ndarray:
    return x @ t[f"{name}.weight"].T + t[f"{name}.bias"]


def _gelu(x: np.ndarray) -> np.ndarray:
    return 0.5 * x * (1.0 + erf(x / math.sqrt(2.0)))


def reference_hidden(
    t: dict[str, np.ndarray], config: dict, token_ids: list[int], token_types: list[int]
) -> np.ndarray:
    """HF BertModel's last hidden state [L, H] of ONE unpadded sequence, in float64."""
    t = {k: v.astype(np.float64) for k, v in t.items()}
    eps, heads = config["layer_norm_eps"], config["num_attention_heads"]
    n = len(token_ids)
    x = (
        t["embeddings.word_embeddings.weight"][token_ids]
        + t["embeddings.position_embeddings.weight"][np.arange(n)]
        + t["embeddings.token_type_embeddings.weight"][token_types]
    )
    x = _layer_norm(x, t["embeddings.LayerNorm.weight"], t["embeddings.LayerNorm.bias"], eps)
    dh = x.shape[1] // heads
    for i in range(config["num_hidden_layers"]):
        p = f"encoder.layer.{i}"

        def split(y: np.ndarray) -> np.ndarray:
            return y.reshape(n, heads, dh).transpose(1, 0, 2)  # [heads, L, dh]

        q = split(_linear(x, t, f"{p}.attention.self.query"))
        k = split(_linear(x, t, f"{p}.attention.self.key"))
        v = split(_linear(x, t, f"{p}.attention.self.value"))
        logits = q @ k.transpose(0, 2, 1) / math.sqrt(dh)
        probs = np.exp(logits - logits.max(-1, keepdims=True))
        probs /= probs.sum(-1, keepdims=True)
        ctx = (probs @ v).transpose(1, 0, 2).reshape(n, heads * dh)
        att = _linear(ctx, t, f"{p}.attention.output.dense")
        x = _layer_norm(
            x + att,
            t[f"{p}.attention.output.LayerNorm.weight"],
            t[f"{p}.attention.output.LayerNorm.bias"],
            eps,
        )
        ffn = _linear(_gelu(_linear(x, t, f"{p}.intermediate.dense")), t, f"{p}.output.dense")
        x = _layer_norm(
            x + ffn, t[f"{p}.output.LayerNorm.weight"], t[f"{p}.output.LayerNorm.bias"], eps
        )
    return x


def reference_embedding(
    t: dict[str, np.ndarray], config: dict, ids: list[int], cls_id: int, sep_id: int
) -> np.ndarray:
    """The dual encoder's vector of unpadded ids: [CLS] ids [SEP], token types 0, mean over
    every position, L2-normalised (sentence-transformers' all-MiniLM-L6-v2 recipe)."""
    hidden = reference_hidden(t, config, [cls_id, *ids, sep_id], [0] * (len(ids) + 2))
    pooled = hidden.mean(axis=0)  # every position is a real token: mean over all of them
    return pooled / np.linalg.norm(pooled)


def reference_scores(
    t: dict[str, np.ndarray],
    config: dict,
    head: dict[str, np.ndarray],
    cls_id: int,
    sep_id: int,
    queries: list[list[int]],
    docs: list[list[int]],
) -> np.ndarray:
    """Cross-encoder scores of unpadded (query, doc) id lists: [CLS] q [SEP] d [SEP], token
    types 0 / 1, tanh pooler (the checkpoint's, or `head`'s pooler), then `head`'s score."""
    scores = []
    for q, d in zip(queries, docs):
        tokens = [cls_id, *q, sep_id, *d, sep_id]
        types = [0] * (len(q) + 2) + [1] * (len(d) + 1)
        cls = reference_hidden(t, config, tokens, types)[0]
        pooler = t if "pooler.dense.weight" in t else head
        cls = np.tanh(_linear(cls, pooler, "pooler.dense"))
        scores.append(float(cls @ head["score.kernel"][:, 0] + head["score.bias"][0]))
    return np.asarray(scores)


# --------------------------------------------------------------------- MPNet (all-mpnet-base-v2)

# TINY_CONFIG's sizes under MPNet's keys (all-mpnet-base-v2's config.json has no token types
# and no position_embedding_type; its positions start after the padding id).
TINY_MPNET_CONFIG = {
    **{
        k: v
        for k, v in TINY_CONFIG.items()
        if k not in ("type_vocab_size", "position_embedding_type")
    },
    "architectures": ["MPNetForMaskedLM"],
    "model_type": "mpnet",
    "max_position_embeddings": 40,
    "layer_norm_eps": 1e-5,
    "relative_attention_num_buckets": 32,
    "pad_token_id": 1,
    "bos_token_id": 0,
    "eos_token_id": 2,
}


def write_mpnet_checkpoint(
    directory: str, wordpieces: list[str], config: dict = TINY_MPNET_CONFIG, seed: int = 0
) -> dict[str, np.ndarray]:
    """An MPNet checkpoint laid out as all-mpnet-base-v2's: vocab.txt is `<s> <pad> </s> <unk>`,
    the WordPiece vocabulary, `<mask>`; tensors under transformers' MPNetModel names (with the
    int64 position_ids buffer and a pooler, both unread). Returns the float tensors."""
    vocab = ["<s>", "<pad>", "</s>", "<unk>", *wordpieces, "<mask>"]
    return write_checkpoint(directory, vocab, config, seed)


def mpnet_bucket(offset: int, buckets: int = 32, max_distance: int = 128) -> int:
    """transformers' MPNetEncoder.relative_position_bucket for one key - query offset."""
    half = buckets // 2
    exact = half // 2
    n = -offset
    bucket = half if n < 0 else 0
    n = abs(n)
    if n < exact:
        return bucket + n
    far = exact + int(math.log(n / exact) / math.log(max_distance / exact) * (half - exact))
    return bucket + min(far, half - 1)


def reference_mpnet_embedding(
    t: dict[str, np.ndarray], config: dict, vocab_ids: list[int]
) -> np.ndarray:
    """sentence-transformers' all-mpnet-base-v2 vector of ONE unpadded text given as vocab.txt
    ids: `<s> ids </s>`, positions from pad_token_id + 1, the relative bias in every layer, the
    mean of every position's last hidden state, L2-normalised; float64."""
    t = {k: v.astype(np.float64) for k, v in t.items()}
    eps, heads = config["layer_norm_eps"], config["num_attention_heads"]
    tokens = [config["bos_token_id"], *vocab_ids, config["eos_token_id"]]
    n = len(tokens)
    positions = np.arange(n) + config["pad_token_id"] + 1
    x = t["embeddings.word_embeddings.weight"][tokens]
    x = x + t["embeddings.position_embeddings.weight"][positions]
    x = _layer_norm(x, t["embeddings.LayerNorm.weight"], t["embeddings.LayerNorm.bias"], eps)
    table = t["encoder.relative_attention_bias.weight"]
    bias = np.array(
        [
            [table[mpnet_bucket(k - q, config["relative_attention_num_buckets"])] for k in range(n)]
            for q in range(n)
        ]
    ).transpose(2, 0, 1)  # [heads, query, key]
    dh = x.shape[1] // heads
    for i in range(config["num_hidden_layers"]):
        p = f"encoder.layer.{i}"

        def split(y: np.ndarray) -> np.ndarray:
            return y.reshape(n, heads, dh).transpose(1, 0, 2)

        q = split(_linear(x, t, f"{p}.attention.attn.q"))
        k = split(_linear(x, t, f"{p}.attention.attn.k"))
        v = split(_linear(x, t, f"{p}.attention.attn.v"))
        logits = q @ k.transpose(0, 2, 1) / math.sqrt(dh) + bias
        probs = np.exp(logits - logits.max(-1, keepdims=True))
        probs /= probs.sum(-1, keepdims=True)
        ctx = (probs @ v).transpose(1, 0, 2).reshape(n, heads * dh)
        x = _layer_norm(
            x + _linear(ctx, t, f"{p}.attention.attn.o"),
            t[f"{p}.attention.LayerNorm.weight"],
            t[f"{p}.attention.LayerNorm.bias"],
            eps,
        )
        ffn = _linear(_gelu(_linear(x, t, f"{p}.intermediate.dense")), t, f"{p}.output.dense")
        x = _layer_norm(
            x + ffn, t[f"{p}.output.LayerNorm.weight"], t[f"{p}.output.LayerNorm.bias"], eps
        )
    pooled = x.mean(axis=0)
    return pooled / np.linalg.norm(pooled)
