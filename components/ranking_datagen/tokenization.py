"""Text normalization, WordPiece vocabulary learning and the tf.Transform preprocessing_fn.

The preprocessing_fn below is the single definition of "text -> token ids": RankingDataGen runs
it through tf.Transform to encode the collection, and the Trainer attaches the resulting
TransformGraph to the exported model, so serving tokenizes with exactly the training graph.

Why the vocabulary is learned in a Beam pass *before* tf.Transform rather than inside it as a
`tft.experimental.ptransform_analyzer`: FastWordpieceTokenizer compiles its vocabulary into a
model buffer when the Python object is built, so it cannot consume a deferred analyzer output
(a placeholder at trace time). The tokenizer that can (WordpieceTokenizer over a lookup table) is
several times slower. So the vocabulary comes from an earlier full pass over the data (Beam
CombinePerKey word counts + tensorflow-text's learner), and the transform graph is traced with the
finished vocabulary baked in; the single-graph guarantee is unchanged because the graph still holds
both normalization and tokenization, and the vocab file travels with it as a TFT asset.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import numpy as np
import tensorflow as tf
import tensorflow_text as tf_text
import tensorflow_transform as tft
from tensorflow_text.core.pybinds import (
    pywrap_fast_wordpiece_tokenizer_model_builder as model_builder,
)
from tensorflow_text.tools.wordpiece_vocab import wordpiece_tokenizer_learner_lib as learner

RESERVED_TOKENS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
PAD_ID, UNK_ID, CLS_ID, SEP_ID, MASK_ID = range(5)
# Name under which the vocabulary file is registered in the TransformGraph
# (tft.TFTransformOutput(...).vocabulary_file_by_name(VOCAB_ASSET_NAME)).
VOCAB_ASSET_NAME = "wordpiece"
RAW_TEXT_KEY = "text"
TOKEN_IDS_KEY = "token_ids"
UNK_COUNT_KEY = "unk_count"

# Splits words the way FastWordpieceTokenizer's end-to-end mode pre-tokenizes (whitespace and
# punctuation), so the learner counts the same words the tokenizer will see.
_SPLIT_PATTERN = r"\s+|[\p{P}\p{S}]"
_KEEP_PATTERN = r"[\p{P}\p{S}]"


def normalize(texts: tf.Tensor, lowercase: bool = True) -> tf.Tensor:
    """BERT-style normalization of a batch of strings (case fold, strip accents, clean spaces)."""
    if lowercase:
        texts = tf_text.case_fold_utf8(texts)
        texts = tf_text.normalize_utf8(texts, "NFD")
        texts = tf.strings.regex_replace(texts, r"\p{Mn}", "")
    texts = tf.strings.regex_replace(texts, r"[\p{Cc}\p{Cf}\s]+", " ")
    return tf.strings.strip(texts)


def split_words(normalized: tf.Tensor) -> tf.RaggedTensor:
    """Words of normalized texts, as counted for vocabulary learning."""
    return tf_text.regex_split(normalized, _SPLIT_PATTERN, _KEEP_PATTERN)


def learn_wordpiece_vocab(word_counts: Iterable[tuple[str, int]], vocab_size: int) -> list[str]:
    """Learns a WordPiece vocabulary of at most `vocab_size` tokens from word counts, with
    tensorflow-text's learner (`learn_with_thresh`: one learning run at a count threshold).

    The threshold search is ours, not the library's `learn()`: that one bisects between 1 and
    the largest word count, and each step is a full learning run (seconds to minutes in pure
    Python), so it took ~15 runs even when the answer is a threshold of 1 or 2, and could
    return more tokens than asked when it ran out of range. Vocabulary size falls as the
    threshold rises, so here: threshold 1 first (small corpora stop there), then doubling until
    the vocabulary fits, then bisection between the last two; ~2*log2(threshold) runs.
    """
    # Sorted, so Beam's arbitrary combine order cannot change the (deterministic) result.
    counts = sorted(word_counts, key=lambda kv: (-kv[1], kv[0]))
    params = learner.Params(
        upper_thresh=10_000_000,
        lower_thresh=1,
        num_iterations=4,
        max_input_tokens=5_000_000,
        max_token_length=50,
        max_unique_chars=1000,
        vocab_size=vocab_size,
        slack_ratio=0.05,
        include_joiner_token=True,
        joiner="##",
        reserved_tokens=RESERVED_TOKENS,
    )
    if not counts:
        return list(RESERVED_TOKENS)
    words = learner.get_input_words(counts, params.reserved_tokens, params.max_token_length)
    allowed = learner.get_allowed_chars(words, params.max_unique_chars)
    words = learner.filter_input_words(words, allowed, params.max_input_tokens)
    max_count = max(c for _, c in words) if words else 1
    learned: dict[int, list[str]] = {}

    def learn(thresh: int) -> list[str]:
        if thresh not in learned:
            learned[thresh] = learner.learn_with_thresh(words, thresh, params)
        return learned[thresh]

    def good_enough(vocab: list[str]) -> bool:
        return vocab_size * (1 - params.slack_ratio) <= len(vocab) <= vocab_size

    if len(learn(1)) <= vocab_size:
        return learn(1)
    too_low, fits = 1, 2  # learn(too_low) is too large; find a threshold that fits
    while len(learn(fits)) > vocab_size and fits <= max_count:
        too_low, fits = fits, fits * 2
    while fits - too_low > 1 and not good_enough(learn(fits)):
        mid = (too_low + fits) // 2
        if len(learn(mid)) > vocab_size:
            too_low = mid
        else:
            fits = mid
    return list(learn(fits))


def read_vocab(vocab_file: str) -> list[str]:
    """Reads a vocab.txt (one token per line, id = line - 1) and checks it can be used.

    [PAD] must be id 0 (models pad with 0) and [UNK] must exist: a learned vocabulary has it at
    id 1, a pretrained BERT-style one (e.g. at id 100) works too. Empty or repeated tokens would
    make FastWordpieceTokenizer fail or ids ambiguous, so they are errors naming the line.
    """
    with tf.io.gfile.GFile(vocab_file, "r") as f:
        vocab = [line.rstrip("\r\n") for line in f]
    if not vocab or vocab[0] != "[PAD]":
        found = vocab[0] if vocab else "end of file"
        raise ValueError(f"{vocab_file}:1: the first token must be '[PAD]' (found {found!r})")
    seen: dict[str, int] = {}
    for number, token in enumerate(vocab, start=1):
        if not token.strip():
            raise ValueError(f"{vocab_file}:{number}: empty token")
        if token in seen:
            raise ValueError(
                f"{vocab_file}:{number}: duplicate token {token!r} (first at line {seen[token]})"
            )
        seen[token] = number
    if "[UNK]" not in seen:
        raise ValueError(f"{vocab_file}: no '[UNK]' token")
    return vocab


def unk_id(vocab: list[str]) -> int:
    return vocab.index("[UNK]")


def make_preprocessing_fn(vocab_file: str, lowercase: bool = True) -> Callable:
    """Returns the tf.Transform preprocessing_fn: raw `text` -> normalized WordPiece `token_ids`.

    Input feature spec: {"text": tf.io.FixedLenFeature([], tf.string)}.
    Outputs: `token_ids` (VarLen int64) and `unk_count` (int64 scalar, for the OOV rate).
    """
    # The tokenizer's model (a flatbuffer) is compiled once here. Built from `vocab=` inside
    # the function, every trace (tf.Transform traces several times) would recompile it and turn
    # it into a constant through a Python list of ints: ~2 s a trace.
    model = np.frombuffer(
        model_builder.build_fast_wordpiece_model(
            read_vocab(vocab_file), 100, "##", "[UNK]", False, False
        ),
        dtype=np.uint8,
    )

    def preprocessing_fn(inputs: dict[str, tf.Tensor]) -> dict[str, tf.Tensor]:
        texts = tf.reshape(inputs[RAW_TEXT_KEY], [-1])
        tokenizer = tf_text.FastWordpieceTokenizer(
            model_buffer=tf.constant(model), token_out_type=tf.int64
        )
        tokens = tokenizer.tokenize(normalize(texts, lowercase))
        # A lookup table over the vocab file makes TF track the file as an asset of the graph;
        # annotate_asset names it so the Trainer finds it via vocabulary_file_by_name.
        table = tf.lookup.StaticHashTable(
            tf.lookup.TextFileInitializer(
                vocab_file,
                tf.string,
                tf.lookup.TextFileIndex.WHOLE_LINE,
                tf.int64,
                tf.lookup.TextFileIndex.LINE_NUMBER,
            ),
            default_value=-1,
        )
        tft.annotate_asset(VOCAB_ASSET_NAME, vocab_file.rsplit("/", 1)[-1])
        unk_id = table.lookup(tf.constant("[UNK]"))
        unk_count = tf.reduce_sum(tf.cast(tf.equal(tokens, unk_id), tf.int64), axis=1)
        return {TOKEN_IDS_KEY: tokens.to_sparse(), UNK_COUNT_KEY: unk_count}

    return preprocessing_fn


RAW_FEATURE_SPEC = {RAW_TEXT_KEY: tf.io.FixedLenFeature([], tf.string)}
