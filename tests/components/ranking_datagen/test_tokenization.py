"""Tests of components.ranking_datagen.tokenization: normalization, vocabulary learning and
checks, the preprocessing_fn, and decoding the token ids RankingDataGen wrote on Cranfield."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import tensorflow as tf
import tensorflow_transform as tft
from datagen_testlib import Outputs, feature

from components.ranking_datagen import tokenization
from components.ranking_datagen.readers import CranfieldDocuments, CranfieldQueries


def _normalize(text: str, lowercase: bool = True) -> str:
    return tokenization.normalize(tf.constant([text]), lowercase).numpy()[0].decode()


def test_normalize() -> None:
    # Accents stripped, case folded (NFKC: ß -> ss, ligatures split), controls -> one space.
    assert _normalize("  Café\tDÉJÀ\x07vu\r\n x ") == "cafe deja vu x"
    assert _normalize("Straße \ufb01n") == "strasse fin"
    # Default-ignorable characters (soft hyphen, zero-width space) vanish with the case fold.
    assert _normalize("aero\u00addynamic \u200bflow") == "aerodynamic flow"
    assert _normalize("Café  X", lowercase=False) == "Café X"


def test_split_words_matches_the_tokenizers_pretokenization() -> None:
    words = tokenization.split_words(tf.constant(["mach 2.5 (flat-plate) flow's"]))
    assert [w.decode() for w in words.flat_values.numpy()] == [
        "mach", "2", ".", "5", "(", "flat", "-", "plate", ")", "flow", "'", "s",
    ]  # fmt: skip


def test_learned_vocabulary_is_deterministic_and_reserved_first() -> None:
    counts = [("flutter", 50), ("wing", 40), ("wings", 20), ("swept", 9), ("flat", 3)]
    vocab = tokenization.learn_wordpiece_vocab(counts, 100)
    assert vocab[:5] == tokenization.RESERVED_TOKENS
    assert vocab == tokenization.learn_wordpiece_vocab(list(reversed(counts)), 100)
    assert {"flutter", "wing"} <= set(vocab)
    assert all(len(t) == 1 or t.startswith("##") or t.isalpha() or t[0] == "[" for t in vocab)
    # The size is a ceiling (the library's own search could overshoot it).
    many = [(f"w{chr(97 + i % 26)}{chr(97 + i // 26 % 26)}{i}", 1000 - i) for i in range(600)]
    for size in (150, 300, 500):
        assert size * 0.8 < len(tokenization.learn_wordpiece_vocab(many, size)) <= size
    # Below the single characters (and their ## forms) nothing smaller exists: those stay.
    floor = tokenization.learn_wordpiece_vocab(many, 60)
    assert len(floor) > 60
    assert all(len(t.removeprefix("##")) == 1 or t.startswith("[") for t in floor)


def test_threshold_search_finds_the_largest_vocabulary_that_fits() -> None:
    calls: list[int] = []

    def size_at(t: int) -> int:  # a Zipf-like curve: 120000 tokens at 1, 50 (chars) floor
        calls.append(t)
        return max(50, 120_000 // t)

    search = tokenization._search_threshold
    # Exact: 120000 // t <= 8000 first at t = 15 (8000); within 5% the search may stop early.
    t = search(size_at, guess=10, target=8000, slack=0.05, max_thresh=10**6)
    assert size_at(t) <= 8000 and size_at(t) >= 7600 and size_at(t - 1) > 8000
    assert len(set(calls)) <= 6  # the library's bisection needs ~20 runs on this range
    calls.clear()
    assert search(size_at, guess=900, target=8000, slack=0.0, max_thresh=10**6) == 15
    assert len(set(calls)) <= 12
    # Fits at threshold 1: nothing smaller to look for.
    assert search(size_at, guess=1, target=200_000, slack=0.05, max_thresh=10**6) == 1
    # Even the single characters do not fit: stop past the largest count instead of looping.
    assert search(size_at, guess=5, target=10, slack=0.05, max_thresh=1000) > 1000


def _vocab_file(tmp_path: Path, tokens: list[str], name: str = "vocab.txt") -> str:
    path = tmp_path / name
    path.write_text("".join(t + "\n" for t in tokens))
    return str(path)


def test_read_vocab_checks(tmp_path: Path) -> None:
    ok = ["[PAD]", "[UNK]", "a", "##b"]
    assert tokenization.read_vocab(_vocab_file(tmp_path, ok)) == ok
    # A pretrained BERT vocab has [unusedN] tokens and [UNK] at 100: accepted.
    bert = ["[PAD]"] + [f"[unused{i}]" for i in range(99)] + ["[UNK]", "[CLS]", "[SEP]", "x"]
    vocab = tokenization.read_vocab(_vocab_file(tmp_path, bert, "bert.txt"))
    assert tokenization.unk_id(vocab) == 100
    cases = {
        "nopad.txt": (["[UNK]", "[PAD]"], r"nopad\.txt:1: the first token must be '\[PAD\]'"),
        "dup.txt": (["[PAD]", "[UNK]", "a", "a"], r"dup\.txt:4: duplicate token 'a' \(first at "),
        "empty.txt": (["[PAD]", "[UNK]", ""], r"empty\.txt:3: empty token"),
        "nounk.txt": (["[PAD]", "a"], r"nounk\.txt: no '\[UNK\]' token"),
    }
    for name, (tokens, message) in cases.items():
        with pytest.raises(ValueError, match=message):
            tokenization.read_vocab(_vocab_file(tmp_path, tokens, name))


def test_preprocessing_fn_tokenizes_and_counts_unknowns(tmp_path: Path) -> None:
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "wing", "flutter", "##s", ".", "swept"]
    fn = tokenization.make_preprocessing_fn(_vocab_file(tmp_path, vocab))
    out = fn({"text": tf.constant(["Swept WINGS flutter.", "zebra wing", ""])})
    ids = tf.RaggedTensor.from_sparse(out["token_ids"]).to_list()
    assert ids == [[9, 5, 7, 6, 8], [1, 5], []]
    assert out["unk_count"].numpy().tolist() == [0, 1, 0]


# ------------------------------------------------------------------------------------------
# Decoding what RankingDataGen wrote on Cranfield (session fixture shared with test_executor)
# ------------------------------------------------------------------------------------------


def decode(ids: list[int], vocab: list[str]) -> list[str]:
    """WordPiece ids -> words: a "##" piece continues the word before it."""
    words: list[str] = []
    for i in ids:
        token = vocab[i]
        if token.startswith("##") and words:
            words[-1] += token[2:]
        else:
            words.append(token)
    return words


def words_of(normalized: str) -> list[str]:
    """The normalized text as the tokenizer's words: spaces around punctuation do not count."""
    return re.findall(r"[^\W_]+|[^\w\s]|_", normalized)


def _check_decodes(ids: list[int], text: str, limit: int, vocab: list[str]) -> bool:
    """Asserts the ids decode to the normalized text; returns whether it was truncated."""
    decoded = decode(ids, vocab)
    expected = words_of(_normalize(text))
    if not expected:  # an empty text is written as one [UNK]
        assert ids == [tokenization.UNK_ID]
        return False
    if len(ids) < limit or decoded == expected:  # == limit: may be exactly that long
        assert decoded == expected, text
        return False
    # Truncated at `limit` pieces: a prefix of the words (the last one may be cut mid-word).
    assert len(ids) == limit
    assert decoded[:-1] == expected[: len(decoded) - 1], text
    assert expected[len(decoded) - 1].startswith(decoded[-1]), text
    return True


def test_token_ids_decode_to_the_normalized_text(
    cranfield_bm25: Outputs, shared_data: Path
) -> None:
    vocab = cranfield_bm25.vocab
    docs = dict(
        CranfieldDocuments(allow_empty_text=True).read(str(shared_data / "cranfield/cran.all.1400"))
    )
    queries = dict(CranfieldQueries().read(str(shared_data / "cranfield/cran.qry")))
    seen_docs: dict[str, list[int]] = {}
    seen_queries: dict[str, list[int]] = {}
    for split in ("train", "dev", "test"):
        for ex in cranfield_bm25.examples(split):
            seen_queries.setdefault(feature(ex, "qid")[0], feature(ex, "query_ids"))
            doc_ids, offset = feature(ex, "doc_ids"), 0
            for docid, n in zip(feature(ex, "docids"), feature(ex, "doc_lengths")):
                seen_docs.setdefault(docid, doc_ids[offset : offset + n])
                offset += n
    assert len(seen_docs) > 1300 and len(seen_queries) > 200
    truncated_docs = sum(_check_decodes(seen_docs[d], docs[d], 192, vocab) for d in seen_docs)
    truncated_q = sum(_check_decodes(seen_queries[q], queries[q], 32, vocab) for q in seen_queries)
    # Both kinds occur, so both branches were checked; the rates agree with the summary's.
    summary = cranfield_bm25.summary
    assert 0 < truncated_docs < len(seen_docs)
    assert truncated_docs / len(seen_docs) == pytest.approx(summary["truncation_rate_documents"])
    assert truncated_q / len(seen_queries) == pytest.approx(summary["truncation_rate_queries"])
    assert summary["oov_rate"] == 0.0  # the vocabulary was learned on these very texts


def test_transform_graph_tokenizes_like_the_examples(cranfield_bm25: Outputs) -> None:
    tft_output = tft.TFTransformOutput(cranfield_bm25.uris["transform_graph"])
    asset = tft_output.vocabulary_file_by_name(tokenization.VOCAB_ASSET_NAME)
    assert Path(asset).read_text().splitlines() == cranfield_bm25.vocab
    example = cranfield_bm25.examples("dev")[0]
    layer = tft_output.transform_features_layer()
    # Decode the stored ids back to text and re-tokenize that text with the saved graph.
    text = " ".join(decode(feature(example, "query_ids"), cranfield_bm25.vocab))
    ids = tf.RaggedTensor.from_sparse(layer({"text": tf.constant([text])})["token_ids"])
    assert ids.to_list()[0] == feature(example, "query_ids")
