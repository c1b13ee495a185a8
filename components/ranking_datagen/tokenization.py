"""Text normalization, WordPiece vocabulary learning and the tf.Transform preprocessing_fn.

The preprocessing_fn below is the single definition of "text -> token ids": RankingDataGen runs
it through tf.Transform to encode the collection, and the Trainer attaches the resulting
TransformGraph to the exported model, so serving tokenizes with exactly the training graph.

Why the vocabulary is learned in a Beam pass *before* tf.Transform rather than inside it as a
`tft.experimental.ptransform_analyzer`: FastWordpieceTokenizer compiles its vocabulary into a
model buffer when the Python object is built, so it cannot consume a deferred analyzer output
(a placeholder at trace time). The tokenizer that can (WordpieceTokenizer over a lookup table) is
several times slower. So the vocabulary comes from an earlier full pass over the data (Beam
word counts, combined per worker + tensorflow-text's learner), and the transform graph is traced
with the finished vocabulary baked in; the single-graph guarantee is unchanged because the graph
still holds both normalization and tokenization, and the vocab file travels with it as a TFT
asset.
"""

from __future__ import annotations

import math
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
    the largest word count, each step a full learning run (seconds in pure Python), ~15 runs,
    and can return more tokens than asked when it runs out of range. Vocabulary size falls
    roughly like 1/threshold, so `_search_threshold` starts at the count of the
    `vocab_size`-th most frequent word and interpolates in log-log space: ~3-6 runs.
    """
    # Sorted, so Beam's arbitrary combine order cannot change the (deterministic) result.
    counts = sorted(word_counts, key=lambda kv: (-kv[1], kv[0]))
    if not counts:
        return list(RESERVED_TOKENS)
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
    words = learner.get_input_words(counts, params.reserved_tokens, params.max_token_length)
    allowed = learner.get_allowed_chars(words, params.max_unique_chars)
    words = learner.filter_input_words(words, allowed, params.max_input_tokens)
    learned: dict[int, list[str]] = {}

    def learn(thresh: int) -> int:
        if thresh not in learned:
            learned[thresh] = learner.learn_with_thresh(words, thresh, params)
        return len(learned[thresh])

    guess = counts[min(vocab_size, len(counts)) - 1][1]
    max_count = counts[0][1]
    thresh = _search_threshold(learn, guess, vocab_size, params.slack_ratio, max_count)
    return list(learned[thresh])


def _search_threshold(
    size_at: Callable[[int], int], guess: int, target: int, slack: float, max_thresh: int
) -> int:
    """The smallest threshold whose vocabulary fits `target` (stopping early at one within
    `slack` below it), given `size_at(threshold)`, non-increasing in the threshold. Past
    `max_thresh` (the largest word count) only single characters remain: that is the answer
    even if they do not fit."""
    too_low, fits = 0, None  # size_at(too_low) > target (0: none seen); size_at(fits) fits
    t = min(max(1, guess), max_thresh)
    while fits is None or fits - too_low > 1:
        size = size_at(t)
        if size <= target:
            fits = t
            if size >= target * (1 - slack) or t == 1:
                return t
        else:
            too_low = t
        if fits is None:  # above the target: step up as if size ~ 1/threshold (x1.5 at least)
            if t > max_thresh:
                return t
            t = max(int(t * max(size / target, 1.5)), t + 1)
        elif too_low == 0:  # below it: step down the same way
            t = max(1, min(fits - 1, int(t * size / target)))
        else:  # bracketed: interpolate log(size) against log(threshold)
            s_lo, s_hi = size_at(too_low), size_at(fits)
            frac = math.log(s_lo / target) / math.log(s_lo / s_hi) if s_lo > s_hi else 0.5
            t = round(math.exp(math.log(too_low) + frac * math.log(fits / too_low)))
            t = min(max(t, too_low + 1), fits - 1)
    return fits


def read_vocab(vocab_file: str) -> list[str]:
    """Reads a vocab.txt (one token per line, id = line - 1) and checks it can be used.

    [PAD] must be id 0 (models pad with 0) and [UNK] must exist: a learned vocabulary has it at
    id 1, a pretrained BERT-style one (e.g. at id 100) works too. Empty or repeated tokens would
    make FastWordpieceTokenizer fail or ids ambiguous, so they are errors naming the line.
    """
    with tf.io.gfile.GFile(vocab_file, "r") as f:
        vocab = [line.rstrip("\r\n") for line in f]
    return check_vocab(vocab, vocab_file)


def check_vocab(vocab: list[str], source: str, first_line: int = 1) -> list[str]:
    """read_vocab's checks over tokens already read; `source` and `first_line` (the line of
    vocab[0] in it) name the file and line in errors."""
    if not vocab or vocab[0] != "[PAD]":
        found = vocab[0] if vocab else "end of file"
        raise ValueError(
            f"{source}:{first_line}: the first token must be '[PAD]' (found {found!r})"
        )
    seen: dict[str, int] = {}
    for number, token in enumerate(vocab, start=first_line):
        if not token.strip():
            raise ValueError(f"{source}:{number}: empty token")
        if token in seen:
            raise ValueError(
                f"{source}:{number}: duplicate token {token!r} (first at line {seen[token]})"
            )
        seen[token] = number
    if "[UNK]" not in seen:
        raise ValueError(f"{source}: no '[UNK]' token")
    return vocab


def unk_id(vocab: list[str]) -> int:
    return vocab.index("[UNK]")


def wordpiece_model(vocab_file: str) -> np.ndarray:
    """FastWordpieceTokenizer's model (a flatbuffer) for a vocab.txt, compiled once: built from
    `vocab=` inside a traced function, every trace (tf.Transform traces several times) would
    recompile it and turn it into a constant through a Python list of ints, ~2 s a trace."""
    return wordpiece_model_of(read_vocab(vocab_file))


def wordpiece_model_of(vocab: list[str]) -> np.ndarray:
    """wordpiece_model for tokens already read and checked (an MPNet checkpoint's WordPiece
    part, rankcore/encoders/hf_checkpoint.py: wordpiece_vocab)."""
    return np.frombuffer(
        model_builder.build_fast_wordpiece_model(vocab, 100, "##", "[UNK]", False, False),
        dtype=np.uint8,
    )


def tokenize(texts: tf.Tensor, model: np.ndarray, lowercase: bool) -> tf.RaggedTensor:
    """Strings [N] -> WordPiece ids [N, (tokens)] (int64): the one "text -> token ids", run by
    the preprocessing_fn below and by the dense retrieval of hybrid candidates (dense.py)."""
    tokenizer = tf_text.FastWordpieceTokenizer(
        model_buffer=tf.constant(model), token_out_type=tf.int64
    )
    return tokenizer.tokenize(normalize(texts, lowercase))


def make_preprocessing_fn(vocab_file: str, lowercase: bool = True) -> Callable:
    """Returns the tf.Transform preprocessing_fn: raw `text` -> normalized WordPiece `token_ids`.

    Input feature spec: {"text": tf.io.FixedLenFeature([], tf.string)}.
    Outputs: `token_ids` (VarLen int64) and `unk_count` (int64 scalar, for the OOV rate).
    """
    model = wordpiece_model(vocab_file)

    def preprocessing_fn(inputs: dict[str, tf.Tensor]) -> dict[str, tf.Tensor]:
        tokens = tokenize(tf.reshape(inputs[RAW_TEXT_KEY], [-1]), model, lowercase)
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
