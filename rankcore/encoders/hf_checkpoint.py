"""Reads a local Hugging Face BERT-family checkpoint directory with numpy only (no torch).

Layout: `config.json` (BertConfig), `vocab.txt` (one WordPiece token per line, id = line - 1)
and `model.safetensors`: an 8-byte little-endian header length N, an N-byte JSON header
{name: {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {...}} and the raw
little-endian tensor bytes, offsets relative to the end of the header.

MPNet checkpoints (`"model_type": "mpnet"`, e.g. all-mpnet-base-v2) are read too: the same
post-LayerNorm encoder with no token types, RoBERTa's positions and a relative-position bias
(rankcore/encoders/bert.py). Their vocab.txt is BERT's WordPiece vocabulary behind `<s>`,
`<pad>`, `</s>`, `<unk>` (and `<mask>` after it): `wordpiece_vocab` gives the part WordPiece
ids index, `id_offset` where it starts. They run as sentence encoders only (sentence.py).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import struct
from dataclasses import dataclass
from typing import Any

import numpy as np
import tensorflow as tf

CONFIG_FILE = "config.json"
WEIGHTS_FILE = "model.safetensors"
VOCAB_FILE = "vocab.txt"

_DTYPES = {
    "F64": np.dtype("<f8"),
    "F32": np.dtype("<f4"),
    "F16": np.dtype("<f2"),
    "BF16": np.dtype("<u2"),  # widened to float32 below
    "I64": np.dtype("<i8"),
    "I32": np.dtype("<i4"),
    "I16": np.dtype("<i2"),
    "I8": np.dtype("i1"),
    "U8": np.dtype("u1"),
    "BOOL": np.dtype("?"),
}
# Key prefixes of task models wrapping a BertModel or MPNetModel (...ForSequenceClassification).
_MODEL_PREFIXES = ("bert.", "mpnet.")
# Old TF-converted checkpoints name LayerNorm parameters gamma/beta.
_LEGACY_SUFFIXES = {"LayerNorm.gamma": "LayerNorm.weight", "LayerNorm.beta": "LayerNorm.bias"}


def parse_safetensors(data: bytes, source: str = "<bytes>") -> dict[str, np.ndarray]:
    """Tensors of a safetensors buffer as numpy arrays (BF16 widened to float32)."""
    if len(data) < 8:
        raise ValueError(f"{source}: not a safetensors file (shorter than its 8-byte header size)")
    (header_len,) = struct.unpack("<Q", data[:8])
    if header_len > len(data) - 8:
        raise ValueError(f"{source}: header size {header_len} exceeds the file ({len(data)} B)")
    try:
        header = json.loads(data[8 : 8 + header_len].decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ValueError(f"{source}: unreadable safetensors header: {e}") from None
    if not isinstance(header, dict):
        raise ValueError(f"{source}: the safetensors header is not a JSON object")
    body = memoryview(data)[8 + header_len :]
    tensors = {}
    for name, spec in header.items():
        if name == "__metadata__":
            continue
        try:
            dtype = _DTYPES.get(spec["dtype"])
            shape = [int(d) for d in spec["shape"]]
            begin, end = (int(x) for x in spec["data_offsets"])
        except (KeyError, TypeError, ValueError) as e:
            raise ValueError(f"{source}: tensor {name}: malformed header entry ({e!r})") from None
        if dtype is None:
            raise ValueError(f"{source}: tensor {name}: unsupported dtype {spec['dtype']!r}")
        size = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
        if not 0 <= begin <= end <= len(body) or end - begin != size:
            raise ValueError(
                f"{source}: tensor {name}: data_offsets [{begin}, {end}] do not hold "
                f"{spec['dtype']} {shape} ({size} B) within {len(body)} data bytes"
            )
        array = np.frombuffer(body[begin:end], dtype=dtype).reshape(shape)
        if spec["dtype"] == "BF16":  # bfloat16 = the high half of a float32
            array = (array.astype(np.uint32) << 16).view(np.float32)
        tensors[name] = array
    return tensors


def read_safetensors(path: str) -> dict[str, np.ndarray]:
    with tf.io.gfile.GFile(path, "rb") as f:
        return parse_safetensors(f.read(), path)


@dataclass(frozen=True)
class BertArchitecture:
    """The parts of a HF BertConfig (config.json) the encoder needs."""

    vocab_size: int
    hidden_size: int
    num_layers: int
    num_heads: int
    intermediate_size: int
    hidden_act: str
    hidden_dropout: float
    attention_dropout: float
    max_position: int
    type_vocab_size: int  # 0: no token-type embeddings (MPNet)
    layer_norm_eps: float
    model_type: str = "bert"
    # MPNet's relative-position bias: buckets per direction pair (0: none, BERT) and the
    # distance past which every bucket is the last (T5's bucketing, transformers'
    # MPNetEncoder.relative_position_bucket).
    relative_attention_buckets: int = 0
    relative_max_distance: int = 128
    # Position id of the first token: 0 for BERT; padding id + 1 for MPNet (RoBERTa's
    # create_position_ids_from_input_ids counts real tokens from the padding id).
    first_position: int = 0

    @classmethod
    def from_hf_config(cls, config: dict[str, Any], source: str) -> BertArchitecture:
        kind = config.get("position_embedding_type", "absolute")
        if kind != "absolute":
            raise ValueError(f"{source}: position_embedding_type {kind!r} is not supported")
        # MPNet has no token types, counts positions from its padding id + 1 and adds a
        # relative-position bias; its config.json leaves out what BERT's defaults would get wrong.
        mpnet = config.get("model_type") == "mpnet"
        try:
            arch = cls(
                vocab_size=int(config["vocab_size"]),
                hidden_size=int(config["hidden_size"]),
                num_layers=int(config["num_hidden_layers"]),
                num_heads=int(config["num_attention_heads"]),
                intermediate_size=int(config["intermediate_size"]),
                hidden_act=str(config.get("hidden_act", "gelu")),
                hidden_dropout=float(config.get("hidden_dropout_prob", 0.1)),
                attention_dropout=float(config.get("attention_probs_dropout_prob", 0.1)),
                max_position=int(config.get("max_position_embeddings", 514 if mpnet else 512)),
                type_vocab_size=0 if mpnet else int(config.get("type_vocab_size", 2)),
                layer_norm_eps=float(config.get("layer_norm_eps", 1e-5 if mpnet else 1e-12)),
                model_type="mpnet" if mpnet else "bert",
                relative_attention_buckets=(
                    int(config.get("relative_attention_num_buckets", 32)) if mpnet else 0
                ),
                first_position=int(config.get("pad_token_id", 1)) + 1 if mpnet else 0,
            )
        except KeyError as e:
            raise ValueError(f"{source}: missing key {e.args[0]!r}") from None
        if arch.hidden_size % arch.num_heads:
            raise ValueError(
                f"{source}: hidden_size {arch.hidden_size} is not divisible by "
                f"num_attention_heads {arch.num_heads}"
            )
        if mpnet and (arch.relative_attention_buckets < 4 or arch.relative_attention_buckets % 4):
            raise ValueError(
                f"{source}: relative_attention_num_buckets must be a positive multiple of 4 "
                f"(found {arch.relative_attention_buckets})"
            )
        if not mpnet and arch.type_vocab_size < 2:
            raise ValueError(f"{source}: type_vocab_size must be >= 2 for query/document pairs")
        return arch

    @property
    def positions_used(self) -> int:
        """Position embeddings a sequence can use (MPNet's first ones are below its first id)."""
        return self.max_position - self.first_position


# MPNet's special tokens, ahead of (and, <mask>, after) BERT's WordPiece vocabulary.
MPNET_SPECIALS = ("<s>", "<pad>", "</s>", "<unk>", "<mask>")


@dataclass
class BertCheckpoint:
    directory: str
    arch: BertArchitecture
    vocab: list[str]
    tensors: dict[str, np.ndarray]  # names without a task-model prefix ("bert.", "mpnet.")

    @property
    def id_offset(self) -> int:
        """Where the WordPiece vocabulary starts in vocab.txt (wordpiece_offset)."""
        return wordpiece_offset(self.vocab, self.arch.model_type, self.directory)

    @property
    def wordpiece_vocab(self) -> list[str]:
        """The tokens WordPiece ids index (wordpiece_part)."""
        return wordpiece_part(self.vocab, self.arch.model_type, self.directory)


def wordpiece_offset(vocab: list[str], model_type: str, directory: str) -> int:
    """Where the WordPiece vocabulary starts in a checkpoint's vocab.txt: 0 for BERT; for MPNet
    the id of [PAD], after its four special tokens."""
    if model_type != "mpnet":
        return 0
    if "[PAD]" not in vocab:
        raise ValueError(f"mpnet checkpoint {directory}: vocab.txt has no [PAD]")
    return vocab.index("[PAD]")


def wordpiece_part(vocab: list[str], model_type: str, directory: str) -> list[str]:
    """The tokens WordPiece ids index ([PAD] = 0): vocab.txt without MPNet's specials."""
    part = vocab[wordpiece_offset(vocab, model_type, directory) :]
    while part and part[-1] in MPNET_SPECIALS:
        part = part[:-1]
    return part


CHECKPOINT_FILES = ("config.json", "model.safetensors", "vocab.txt")


# checkpoint_digest's results by (directory, each file's size and modification time): the
# k + 1 Trainers of a cross-validated run (one process on LocalDagRunner) would otherwise hash
# the same 530 MB of MiniLM and MPNet weights six times (about 2 s each on 2 cores).
_DIGESTS: dict[tuple, str] = {}


def checkpoint_digest(directory: str) -> str:
    """sha256 over the checkpoint's files (config, weights, vocabulary): two directories with
    the same digest hold the same model. Computed once per process while the files' sizes and
    modification times stay the same."""
    paths = [os.path.join(directory, name) for name in CHECKPOINT_FILES]
    stats = [tf.io.gfile.stat(path) for path in paths]
    key = (directory, *((s.length, s.mtime_nsec) for s in stats))
    if key in _DIGESTS:
        return _DIGESTS[key]
    digest = hashlib.sha256()
    for name, path in zip(CHECKPOINT_FILES, paths):
        digest.update(name.encode() + b"\0")
        with tf.io.gfile.GFile(path, "rb") as f:
            while chunk := f.read(1 << 24):
                digest.update(chunk)
    _DIGESTS[key] = digest.hexdigest()
    return _DIGESTS[key]


def read_vocab_file(directory: str) -> list[str]:
    path = os.path.join(directory, VOCAB_FILE)
    if not tf.io.gfile.exists(path):
        raise ValueError(f"bert checkpoint {directory}: no {VOCAB_FILE}")
    with tf.io.gfile.GFile(path, "r") as f:
        return [line.rstrip("\r\n") for line in f]


def read_wordpiece_vocab(directory: str) -> list[str]:
    """The checkpoint's WordPiece vocabulary (BertCheckpoint.wordpiece_vocab: vocab.txt without
    MPNet's specials), from its config.json and vocab.txt only (the weights stay unread)."""
    model_type = read_architecture(directory).model_type
    return wordpiece_part(read_vocab_file(directory), model_type, directory)


def read_architecture(directory: str) -> BertArchitecture:
    path = os.path.join(directory, CONFIG_FILE)
    if not tf.io.gfile.exists(path):
        raise ValueError(f"bert checkpoint {directory}: no {CONFIG_FILE}")
    with tf.io.gfile.GFile(path, "r") as f:
        return BertArchitecture.from_hf_config(json.load(f), path)


def _canonical(name: str) -> str:
    for prefix in _MODEL_PREFIXES:
        if name.startswith(prefix):
            name = name[len(prefix) :]
    for old, new in _LEGACY_SUFFIXES.items():
        if name.endswith(old):
            name = name[: -len(old)] + new
    return name


def read_checkpoint(directory: str) -> BertCheckpoint:
    """config.json + vocab.txt + model.safetensors of a checkpoint directory."""
    arch = read_architecture(directory)
    vocab = read_vocab_file(directory)
    weights = os.path.join(directory, WEIGHTS_FILE)
    if not tf.io.gfile.exists(weights):
        raise ValueError(
            f"bert checkpoint {directory}: no {WEIGHTS_FILE} (sharded or PyTorch .bin "
            "checkpoints are not supported)"
        )
    tensors = {_canonical(k): v for k, v in read_safetensors(weights).items()}
    if len(vocab) > arch.vocab_size:
        raise ValueError(
            f"bert checkpoint {directory}: {VOCAB_FILE} has {len(vocab)} tokens but the model "
            f"only {arch.vocab_size} embeddings (config.json vocab_size)"
        )
    logging.info("read %d tensors from %s", len(tensors), weights)
    return BertCheckpoint(directory, arch, vocab, tensors)


def check_vocab(
    directory: str, checkpoint_vocab: list[str], vocab_size: int, vocab: list[str] | None
) -> None:
    """The token ids the model gets must mean the checkpoint's tokens: the TransformGraph's
    vocabulary has to be the checkpoint's vocab.txt."""
    hint = (
        f"tokenize the examples with the checkpoint's vocabulary: set datagen.vocab.vocab_file "
        f"to {os.path.join(directory, VOCAB_FILE)} (and datagen.vocab.lowercase to match the "
        "checkpoint's casing) and re-run RankingDataGen"
    )
    if vocab_size != len(checkpoint_vocab):
        raise ValueError(
            f"trainer config: bert.checkpoint_dir: the TransformGraph's vocabulary has "
            f"{vocab_size} tokens, the checkpoint's {VOCAB_FILE} has {len(checkpoint_vocab)}; "
            + hint
        )
    if vocab is not None:
        for i, (ours, theirs) in enumerate(zip(vocab, checkpoint_vocab)):
            if ours != theirs:
                raise ValueError(
                    f"trainer config: bert.checkpoint_dir: the TransformGraph's vocabulary "
                    f"differs from the checkpoint's {VOCAB_FILE} at id {i} ({ours!r} vs "
                    f"{theirs!r}); " + hint
                )


def load_into(wanted: dict[str, tuple[tf.Variable, bool]], checkpoint: BertCheckpoint) -> None:
    """Assigns each variable its checkpoint tensor. `wanted` maps HF tensor name -> (variable,
    whether the HF tensor is a transposed torch Linear weight); call after building the model."""
    missing = sorted(set(wanted) - set(checkpoint.tensors))
    if missing:
        raise ValueError(
            f"checkpoint {checkpoint.directory}: missing tensor(s) {missing[:5]}"
            + (f" and {len(missing) - 5} more" if len(missing) > 5 else "")
        )
    for name, (variable, transpose) in wanted.items():
        array = checkpoint.tensors[name]
        array = array.T if transpose else array
        if tuple(array.shape) != tuple(variable.shape):
            raise ValueError(
                f"checkpoint {checkpoint.directory}: tensor {name} has shape "
                f"{tuple(checkpoint.tensors[name].shape)}, the model expects "
                f"{tuple(variable.shape)}{' (transposed)' if transpose else ''}"
            )
        variable.assign(np.asarray(array, dtype=variable.dtype.as_numpy_dtype))
    unused = sorted(set(checkpoint.tensors) - set(wanted))
    logging.info(
        "loaded %d tensors from %s; unused: %s",
        len(wanted),
        checkpoint.directory,
        unused or "none",
    )


def open_checkpoint(
    directory: str,
    model: str,
    vocab_size: int,
    vocab: list[str] | None,
    longest_input: int,
    sentence_encoder: bool = False,
) -> tuple[BertCheckpoint, int, int]:
    """Reads the checkpoint for `model` (its config name, for messages) and checks that it fits
    the data: the TransformGraph's vocabulary is its vocab.txt (for MPNet: its WordPiece part,
    `wordpiece_vocab`), the longest framed input fits its position embeddings, and it has [CLS]
    / [SEP]. Returns (checkpoint, cls_id, sep_id). An MPNet checkpoint is accepted only as a
    `sentence_encoder` (a dual encoder's towers frame one text each, rankcore/encoders/
    sentence.py framer: <s> text </s> at MPNet's own ids); then the two ids returned are its
    <s> and </s>, which such a model never frames with."""
    checkpoint = read_checkpoint(directory)
    mpnet = checkpoint.arch.model_type == "mpnet"
    if mpnet and not sentence_encoder:
        raise ValueError(
            f"trainer config: {model}: {directory} is an MPNet checkpoint; MPNet runs as a "
            "sentence encoder only (the dual_encoder model, a companion, "
            "datagen.hybrid.checkpoint_dir), not as a cross-encoder"
        )
    check_vocab(directory, checkpoint.wordpiece_vocab, vocab_size, vocab)
    if longest_input > checkpoint.arch.positions_used:
        raise ValueError(
            f"trainer config: {model}: the longest input ({longest_input} tokens with [CLS] and "
            f"[SEP]) exceeds the checkpoint's max_position_embeddings "
            f"{checkpoint.arch.max_position}"
            + (
                f" (positions start at {checkpoint.arch.first_position}: "
                f"{checkpoint.arch.positions_used} usable)"
                if checkpoint.arch.first_position
                else ""
            )
        )
    return checkpoint, *special_ids(checkpoint, model)


def special_ids(checkpoint: BertCheckpoint, model: str) -> tuple[int, int]:
    """The ([CLS], [SEP]) ids of the checkpoint's vocab.txt (MPNet's: <s>, </s>); `model` names
    it in the error."""
    tokens = ("<s>", "</s>") if checkpoint.arch.model_type == "mpnet" else ("[CLS]", "[SEP]")
    for token in tokens:
        if token not in checkpoint.vocab:
            raise ValueError(f"{model} checkpoint {checkpoint.directory}: vocab.txt has no {token}")
    return checkpoint.vocab.index(tokens[0]), checkpoint.vocab.index(tokens[1])


def dropout_rates(
    arch: BertArchitecture, hidden: float | None, attention: float | None
) -> tuple[float, float]:
    """(hidden, attention) dropout: the config's values, else the checkpoint's config.json's."""
    return (
        arch.hidden_dropout if hidden is None else hidden,
        arch.attention_dropout if attention is None else attention,
    )
