"""The report's listed queries in words: each query's text and the top documents of each system.

A table of qids and deltas says which queries lost, not why; a reader needs the query and what
each system put at the top. The evaluator receives no raw text (RankingDataGen's outputs hold
token ids, qrels and runs), but the examples it scores carry every query's and candidate's
WordPiece ids (schemas/ranking_examples) and the SavedModel carries the vocabulary those ids
index (the TransformGraph's vocab.txt, an asset of the model's in-graph tokenizer). So the
texts shown are the ids decoded: the text as the model reads it, i.e. normalised (lowercased,
accents stripped when the vocabulary is lowercase), a document cut at datagen.max_doc_length
tokens, a word outside the vocabulary as [UNK]. No new artifact, and one read of the
evaluated split(s), which stops once every wanted text is found.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import tensorflow as tf

from components.artifacts import VOCAB_FILE
from rankcore import example_format as fmt
from rankcore.metrics import rank_documents

TOP_DOCUMENTS = 3  # documents shown per system and listed query
SNIPPET_CHARS = 80  # a document's text is cut to about this many characters
QUERY_CHARS = 300
# The systems whose top documents are shown: the candidate (what the blessing judges) and the
# references it is compared with (the reranker alone is in the summary table only).
SHOWN_SYSTEMS = ("candidate", "first_stage", "baseline")
_SPECIAL = {"[PAD]", "[CLS]", "[SEP]", "[MASK]"}
_READ_BATCH = 1024


def read_vocab(model_dir: str) -> list[str] | None:
    """The vocabulary of the model's tokenizer (SavedModel assets/vocab.txt, one token per
    line, id = line number - 1), or None when the model has none."""
    path = os.path.join(model_dir, "assets", VOCAB_FILE)
    if not tf.io.gfile.exists(path):
        return None
    with tf.io.gfile.GFile(path) as f:
        vocab = [line.rstrip("\r\n") for line in f]
    return vocab if vocab and vocab[0] == "[PAD]" else None


def decode(ids: Iterable[int], vocab: Sequence[str], max_chars: int | None = None) -> str:
    """WordPiece ids -> text: "##" pieces joined to the word before, reserved tokens but [UNK]
    left out, no space before closing punctuation or after an opening bracket; cut at a word
    boundary near `max_chars` with "…"."""
    words: list[str] = []
    length = 0
    for i in ids:
        token = vocab[i] if 0 <= i < len(vocab) else "[UNK]"
        if token in _SPECIAL:
            continue
        if token.startswith("##") and words:
            words[-1] += token[2:]
        else:
            words.append(token)
        length += len(token) + 1
        if max_chars is not None and length > max_chars + 20:
            break  # enough for the snippet: the rest is never shown
    text = " ".join(words)
    text = re.sub(r" ([.,;:!?%)\]}])", r"\1", text)
    text = re.sub(r"([(\[{]) ", r"\1", text)
    text = re.sub(r" ?([-/']) ?", r"\1", text)
    if max_chars is not None and len(text) > max_chars:
        cut = text.rfind(" ", 0, max_chars + 1)
        text = text[: cut if cut > max_chars // 2 else max_chars].rstrip() + "…"
    return text


def top_documents(
    runs: Mapping[str, Mapping[str, Mapping[str, float]]], qids: Iterable[str], k: int
) -> dict[str, dict[str, list[str]]]:
    """{system: {qid: the run's first k docids, in trec_eval's order}} for `qids`."""
    return {
        system: {q: rank_documents(run.get(q, {}))[:k] for q in qids}
        for system, run in runs.items()
    }


def _split_files(split_uris: Sequence[str]) -> list[str]:
    return sorted(f for uri in split_uris for f in tf.io.gfile.glob(os.path.join(uri, "*")))


def read_token_ids(
    split_uris: Sequence[str], wanted: Mapping[str, set[str]]
) -> tuple[dict[str, list[int]], dict[str, list[int]]]:
    """({qid: query ids}, {docid: document ids}) of the wanted queries and, per query, the
    wanted candidates, from the split's examples (one candidate each). Reads the qid and docid
    of a batch first and parses the whole example only for a wanted one; stops once every
    wanted text is found."""
    files = _split_files(split_uris)
    queries: dict[str, list[int]] = {}
    documents: dict[str, list[int]] = {}
    missing_docs = {d for docs in wanted.values() for d in docs}
    if not files or not wanted:
        return queries, documents
    keys = fmt.spec(fmt.QID, fmt.DOCIDS)
    dataset = tf.data.TFRecordDataset(
        files, compression_type="GZIP", num_parallel_reads=min(4, len(files))
    ).batch(_READ_BATCH)
    for batch in dataset:
        parsed = tf.io.parse_example(batch, keys)
        qids = parsed[fmt.QID].numpy()
        first_doc = tf.sparse.to_dense(parsed[fmt.DOCIDS], default_value=b"").numpy()[:, 0]
        records = batch.numpy()
        for qid_bytes, doc_bytes, record in zip(qids, first_doc, records):
            qid, docid = qid_bytes.decode(), doc_bytes.decode()
            if qid not in wanted:
                continue
            need_query = qid not in queries
            need_doc = docid in wanted[qid] and docid not in documents
            if not (need_query or need_doc):
                continue
            feature = tf.train.Example.FromString(record).features.feature
            if need_query:
                queries[qid] = list(feature[fmt.QUERY_IDS].int64_list.value)
            if need_doc:
                ids = feature[fmt.DOC_IDS].int64_list.value
                lengths = feature[fmt.DOC_LENGTHS].int64_list.value
                documents[docid] = list(ids[: lengths[0]] if lengths else ids)
                missing_docs.discard(docid)
        if len(queries) == len(wanted) and not missing_docs:
            break
    return queries, documents


def listed_queries(
    qids: Iterable[str],
    runs: Mapping[str, Mapping[str, Mapping[str, float]]],
    qrels: Mapping[str, Mapping[str, int]],
    split_uris: Sequence[str],
    model_dir: str,
    k: int = TOP_DOCUMENTS,
) -> dict[str, Any]:
    """metrics.json `listed_queries`: for each qid the report lists, its text and each system's
    top `k` documents (docid, judged grade or None, text), and `texts` saying where the texts
    came from ("" when they could not be read: no vocabulary in the model)."""
    qids = sorted(set(qids))
    top = top_documents({s: r for s, r in runs.items() if s in SHOWN_SYSTEMS}, qids, k)
    vocab = read_vocab(model_dir)
    query_ids: dict[str, list[int]] = {}
    doc_ids: dict[str, list[int]] = {}
    if vocab is not None:
        wanted = {q: {d for by_query in top.values() for d in by_query[q]} for q in qids}
        query_ids, doc_ids = read_token_ids(split_uris, wanted)
    out: dict[str, Any] = {}
    for q in qids:
        text = decode(query_ids[q], vocab, QUERY_CHARS) if q in query_ids and vocab else None
        out[q] = {
            "text": text,
            "top": {
                system: [
                    {
                        "docid": d,
                        "grade": qrels.get(q, {}).get(d),
                        "text": decode(doc_ids[d], vocab, SNIPPET_CHARS)
                        if d in doc_ids and vocab
                        else None,
                    }
                    for d in by_query[q]
                ]
                for system, by_query in top.items()
            },
        }
    return {
        "texts": "the examples' token ids, decoded with the model's vocabulary" if vocab else "",
        "queries": out,
    }


def listed_queries_or_none(*args: Any, **kwargs: Any) -> dict[str, Any] | None:
    """listed_queries, or None when it fails: the texts are for reading the report, so a
    problem is logged with its traceback but does not cost the evaluation."""
    try:
        return listed_queries(*args, **kwargs)
    except Exception:  # noqa: BLE001
        logging.exception("the report's query texts could not be read; the report has none")
        return None
