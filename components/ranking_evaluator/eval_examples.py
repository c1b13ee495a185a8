"""What the evaluator reads of a dev/test example (one candidate each; rankcore/example_format.py),
and the row types its scoring transforms pass around (scoring.py)."""

from __future__ import annotations

import tensorflow as tf

from rankcore import example_format as fmt

Key = tuple[str, str]  # (qid, docid)
Scored = tuple[str, str, tuple[float, ...]]  # (qid, docid, one score per model)
Text = tuple[str, str]  # ("q", qid) or ("d", docid)
Pair = tuple[str, str, tuple[int, ...], tuple[int, ...]]  # qid, docid, query ids, doc ids


def example_key(serialized: bytes) -> Key:
    """(qid, docid) of a dev/test example (one candidate each, see ranking_datagen)."""
    feature = tf.train.Example.FromString(serialized).features.feature
    return (
        feature[fmt.QID].bytes_list.value[0].decode(),
        feature[fmt.DOCIDS].bytes_list.value[0].decode(),
    )


def example_pair(serialized: bytes) -> Pair:
    """(qid, docid, query ids, document ids) of a dev/test example: the ids score_examples
    reads (the document cut at its first length, as score_examples cuts it)."""
    feature = tf.train.Example.FromString(serialized).features.feature
    doc = feature[fmt.DOC_IDS].int64_list.value
    lengths = feature[fmt.DOC_LENGTHS].int64_list.value
    return (
        feature[fmt.QID].bytes_list.value[0].decode(),
        feature[fmt.DOCIDS].bytes_list.value[0].decode(),
        tuple(feature[fmt.QUERY_IDS].int64_list.value),
        tuple(doc[: lengths[0]] if lengths else doc),
    )
