"""tf.data input pipelines over RankingDataGen's gzip TFRecord shards of grouped tf.Examples.

Train elements are dicts {"query": int64 [Lq], "docs": int64 [n, Ld], "labels": float32 [n]},
batched (padded with 0 = [PAD]); with frozen document vectors (make_list_dataset) they are
{"query": [Lq], "doc_vectors": float32 [n, H], "labels": [n], "mask": bool [n]}, one query's
whole candidate list each. Eval elements (n = 1 groups) are flat:
{"qid": str, "docid": str, "query": [Lq], "doc": [Ld], "label": float32, "judged": int64,
"first_stage_score": float32}.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
import tensorflow as tf

from rankcore import example_format as fmt
from trainer_module.config import TrainerConfig

# What the Trainer reads of a group (rankcore/example_format.py; first_stage_ranks it does not).
FEATURE_SPEC = fmt.spec(
    fmt.QID,
    fmt.DOCIDS,
    fmt.QUERY_IDS,
    fmt.DOC_IDS,
    fmt.DOC_LENGTHS,
    fmt.LABELS,
    fmt.JUDGED,
    fmt.FIRST_STAGE_SCORES,
)


def expand_patterns(file_patterns: list[str]) -> list[str]:
    files = sorted({f for p in file_patterns for f in tf.io.gfile.glob(p)})
    if not files:
        raise ValueError(f"no input files match {file_patterns}")
    return files


def _records(files: list[str]) -> tf.data.Dataset:
    return tf.data.TFRecordDataset(files, compression_type="GZIP")


def peek_group_size(file_patterns: list[str]) -> int:
    """n (candidates per group) of the first example; fixed within a dataset by contract."""
    for record in _records(expand_patterns(file_patterns)[:1]).take(1):
        parsed = tf.io.parse_single_example(record, fmt.spec(fmt.DOC_LENGTHS))
        return int(tf.size(parsed[fmt.DOC_LENGTHS].values))
    raise ValueError(f"the first file of {file_patterns} holds no examples")


def parse_group(record: tf.Tensor, max_query_length: int, max_doc_length: int) -> dict:
    """One serialized group -> truncated query [Lq], docs [n, Ld] (padded within the group)."""
    ex = tf.io.parse_single_example(record, FEATURE_SPEC)
    dense = {k: tf.sparse.to_dense(v) for k, v in ex.items() if isinstance(v, tf.SparseTensor)}
    docs = tf.RaggedTensor.from_row_lengths(dense[fmt.DOC_IDS], dense[fmt.DOC_LENGTHS])
    return {
        "qid": ex[fmt.QID],
        "docids": dense[fmt.DOCIDS],
        "query": dense[fmt.QUERY_IDS][:max_query_length],
        "docs": docs[:, :max_doc_length].to_tensor(0),
        "labels": dense[fmt.LABELS],
        "judged": dense[fmt.JUDGED],
        "first_stage_scores": dense[fmt.FIRST_STAGE_SCORES],
    }


_TRAIN_SPEC = fmt.spec(fmt.QUERY_IDS, fmt.DOC_IDS, fmt.DOC_LENGTHS, fmt.LABELS)


def _ragged_docs(ex: dict) -> tf.RaggedTensor:
    """A parsed batch's documents [b, (n), (L)]: DOC_IDS is each group's tokens concatenated,
    DOC_LENGTHS their lengths per candidate."""
    lengths = tf.RaggedTensor.from_sparse(ex[fmt.DOC_LENGTHS])
    return tf.RaggedTensor.from_nested_row_lengths(
        tf.RaggedTensor.from_sparse(ex[fmt.DOC_IDS]).flat_values,
        [lengths.row_lengths(), lengths.flat_values],
    )


def parse_train_batch(
    records: tf.Tensor,
    max_query_length: int,
    max_doc_length: int,
    static_shapes: bool = False,
    group_size: int | None = None,
) -> dict:
    """A batch of serialized groups -> query [b, Lq], docs [b, n, Ld], labels [b, n].

    Vectorized: one parse_example and ragged ops per batch instead of per record (the
    per-record map cost ~10% of a small model's step on 2 cores). The result equals
    parse_group per record + padded_batch (pads to the batch's longest query / doc, or to the
    max lengths with static_shapes).
    """
    ex = tf.io.parse_example(records, _TRAIN_SPEC)
    query = tf.RaggedTensor.from_sparse(ex[fmt.QUERY_IDS])[:, :max_query_length]
    docs = _ragged_docs(ex)[:, :, :max_doc_length]
    labels = tf.RaggedTensor.from_sparse(ex[fmt.LABELS])
    if static_shapes:
        b = records.shape[0]  # static with drop_remainder
        return {
            "query": query.to_tensor(0, shape=[b, max_query_length]),
            "docs": docs.to_tensor(0, shape=[b, group_size, max_doc_length]),
            "labels": labels.to_tensor(0.0, shape=[b, group_size]),
        }
    return {"query": query.to_tensor(0), "docs": docs.to_tensor(0), "labels": labels.to_tensor(0.0)}


def bucket_boundaries(max_length: int, min_length: int, factor: float) -> list[int]:
    """Geometric boundaries (tensor2tensor `_bucket_boundaries`), strictly increasing."""
    bounds, x = [], min_length
    while x < max_length:
        bounds.append(x)
        x = max(x + 1, int(math.ceil(x * factor)))
    return bounds


def make_train_dataset(
    file_patterns: list[str],
    cfg: TrainerConfig,
    max_query_length: int,
    max_doc_length: int,
    group_size: int,
    per_replica_batch: int,
    input_context: tf.distribute.InputContext | None = None,
) -> tf.data.Dataset:
    """Infinite, seeded, shuffled train batches for ONE replica.

    A batch holds per_replica_batch * grad_accumulation_steps groups (one optimizer step's
    worth; the step splits it into micro-batches), or with bucketing a token-budgeted count.
    """
    files = expand_patterns(file_patterns)
    ds = tf.data.Dataset.from_tensor_slices(files)
    ds = ds.shuffle(len(files), seed=cfg.seed, reshuffle_each_iteration=True).repeat()
    ds = ds.interleave(
        lambda f: _records(f),
        cycle_length=min(len(files), 8),
        num_parallel_calls=tf.data.AUTOTUNE,
        deterministic=True,  # reproducible order: required for exact resume
    )
    ds = ds.shuffle(cfg.shuffle_buffer, seed=cfg.seed, reshuffle_each_iteration=True)

    accum = cfg.grad_accumulation_steps
    if not cfg.bucketing.enabled:
        # Batch the serialized records, then parse whole batches (same batches as parsing
        # each record and padded_batch-ing them, at a fraction of the CPU).
        ds = ds.batch(per_replica_batch * accum, drop_remainder=True)
        ds = shard_batches(ds, input_context)  # before parsing: a worker parses its own only
        ds = ds.map(
            lambda r: parse_train_batch(
                r, max_query_length, max_doc_length, cfg.static_shapes, group_size
            ),
            num_parallel_calls=tf.data.AUTOTUNE,
            deterministic=True,
        )
        return ds.prefetch(tf.data.AUTOTUNE)

    if cfg.static_shapes:
        raise ValueError("trainer config: bucketing.enabled and static_shapes exclude each other")
    # Bucketing needs each element's length before batching: parse per record.
    ds = ds.map(
        lambda r: parse_group(r, max_query_length, max_doc_length),
        num_parallel_calls=tf.data.AUTOTUNE,
        deterministic=True,
    )
    ds = ds.map(lambda x: {k: x[k] for k in ("query", "docs", "labels")})
    shapes = {"query": [None], "docs": [None, None], "labels": [None]}
    replicas = input_context.num_replicas_in_sync if input_context else 1
    budget = max(1, cfg.bucketing.token_budget // replicas)
    # An element's length counts the query at its maximum: queries are short, and the
    # budget then bounds the padded batch strictly (b * n * (Lq_pad + Ld_pad) <= budget).
    longest = max_query_length + max_doc_length
    bounds = bucket_boundaries(
        longest + 1,
        max_query_length + cfg.bucketing.min_length,
        cfg.bucketing.length_factor,
    )
    uppers = [b - 1 for b in bounds] + [longest]  # longest length each bucket can hold
    sizes = [max(1, budget // (u * group_size)) * accum for u in uppers]
    ds = ds.bucket_by_sequence_length(
        lambda x: max_query_length + tf.shape(x["docs"])[1],
        bucket_boundaries=bounds,
        bucket_batch_sizes=sizes,
        padded_shapes=shapes,
        drop_remainder=True,
    )
    return shard_batches(ds, input_context).prefetch(tf.data.AUTOTUNE)


def shard_batches(
    ds: tf.data.Dataset, input_context: tf.distribute.InputContext | None
) -> tf.data.Dataset:
    """With several input pipelines (multi-worker: one per worker), pipeline i keeps batches
    i, i + n, i + 2n, ... of the one stream every pipeline builds alike (same files, same
    seeded shuffles). Replica r of a step then trains on the batch one pipeline would feed it
    (MirroredStrategy's replicas take consecutive batches of one pipeline), so N workers train
    on exactly the global batches of one worker with the same global batch size: the model
    matches a one-worker run to float tolerance. Every worker reads every record; only its own
    batches are parsed."""
    if input_context is None or input_context.num_input_pipelines <= 1:
        return ds
    return ds.shard(input_context.num_input_pipelines, input_context.input_pipeline_id)


class CandidateLists(NamedTuple):
    """Every train query's whole candidate list, the documents as rows of one table: queries
    [Q, Lq] (padded ids), doc_index [Q, n] int32 (each candidate's row of `documents`, 0 for
    padding), documents [D + 1, H] float32 (row 0 all zeros), labels [Q, n], mask [Q, n]
    (False: padding). A document listed by many queries is held once: NFCorpus's hybrid lists
    (about 2,100 train queries x 200 candidates x 1,152 floats) would be 1.9 GB as one vector
    per list entry, and are 17 MB of table and 1.7 MB of indices this way."""

    queries: np.ndarray
    doc_index: np.ndarray
    documents: np.ndarray
    labels: np.ndarray
    mask: np.ndarray

    def doc_vectors(self, rows: np.ndarray | slice = slice(None)) -> np.ndarray:
        """The lists' document vectors [rows, n, H] (zeros for padding), as a batch has them."""
        return self.documents[self.doc_index[rows]]


def make_list_dataset(
    lists: CandidateLists,
    cfg: TrainerConfig,
    per_replica_batch: int,
    input_context: tf.distribute.InputContext | None = None,
    extra: dict[str, np.ndarray] | None = None,
) -> tf.data.Dataset:
    """Infinite, seeded, shuffled batches of whole candidate lists for ONE replica: each batch
    {"query": [b, Lq], "doc_vectors": [b, n, H], "labels": [b, n], "mask": [b, n]} and
    `extra`'s float arrays [Q, ...] under their names, one row per train query. Each epoch
    visits every query once in a new order. The elements are gathered by index (queries, then
    their documents' rows of the table), so a checkpointed iterator holds indices, not vectors,
    and the lists' vectors exist only batch by batch. A batch's queries are cut to its longest
    one (`trim_query_padding`), or stay as wide as the longest train query with
    static_shapes."""
    count = lists.queries.shape[0]
    documents = tf.constant(lists.documents, tf.float32)
    tensors = {
        "query": tf.constant(lists.queries, tf.int64),
        "doc_index": tf.constant(lists.doc_index, tf.int32),
        "labels": tf.constant(lists.labels, tf.float32),
        "mask": tf.constant(lists.mask, tf.bool),
        **{name: tf.constant(array, tf.float32) for name, array in (extra or {}).items()},
    }

    def gather(i: tf.Tensor) -> dict[str, tf.Tensor]:
        batch = {k: tf.gather(v, i) for k, v in tensors.items()}
        batch["doc_vectors"] = tf.gather(documents, batch.pop("doc_index"))
        return batch

    ds = tf.data.Dataset.range(count)
    ds = ds.shuffle(count, seed=cfg.seed, reshuffle_each_iteration=True).repeat()
    ds = ds.batch(per_replica_batch * cfg.grad_accumulation_steps, drop_remainder=True)
    ds = shard_batches(ds, input_context)
    ds = ds.map(gather)
    if not cfg.static_shapes:
        ds = ds.map(trim_query_padding)
    return ds.prefetch(tf.data.AUTOTUNE)


def trim_query_padding(batch: dict[str, tf.Tensor]) -> dict[str, tf.Tensor]:
    """The batch with its "query" ids [b, L] cut to the last column any row uses (at least 1).

    The list arrays pad every query to the longest train query (57 word pieces on Cranfield,
    21 on average), so a batch of 16 carries about 40% padding the query tower would encode
    and mask again at every step. Cut, the query tower takes 17% less CPU a query (1.10x the
    queries/s on a shared 2-core machine; tests/benchmarks/bench_trainer.py section 6), and the
    masked positions never counted: the losses of the two stay within 1e-6."""
    query = batch["query"]
    used = tf.range(1, tf.shape(query)[1] + 1)[None, :] * tf.cast(query != 0, tf.int32)
    width = tf.maximum(tf.reduce_max(used), 1)
    return {**batch, "query": query[:, :width]}


def parse_eval_batch(records: tf.Tensor, max_query_length: int, max_doc_length: int) -> dict:
    """A batch of serialized dev/test groups (n = 1) -> one candidate per row: query [b, Lq]
    and doc [b, Ld] padded to the batch's longest, the rest [b]. Vectorized as
    parse_train_batch (one parse_example per batch; per record, parse_group's ops were most of
    reading a Trainer's candidate lists); equal to parse_group per record + padded_batch."""
    ex = tf.io.parse_example(records, FEATURE_SPEC)

    def first(rows: tf.RaggedTensor) -> tf.Tensor:  # each group's first (only) candidate's
        return tf.gather(rows.values, rows.row_starts())

    def first_of(key: str) -> tf.Tensor:
        return first(tf.RaggedTensor.from_sparse(ex[key]))

    docs = _ragged_docs(ex)
    return {
        "qid": ex[fmt.QID],
        "docid": first_of(fmt.DOCIDS),
        "query": tf.RaggedTensor.from_sparse(ex[fmt.QUERY_IDS])[:, :max_query_length].to_tensor(0),
        "doc": first(docs)[:, :max_doc_length].to_tensor(0),
        "label": first_of(fmt.LABELS),
        "judged": first_of(fmt.JUDGED),
        "first_stage_score": first_of(fmt.FIRST_STAGE_SCORES),
    }


def make_eval_dataset(
    file_patterns: list[str], batch_size: int, max_query_length: int, max_doc_length: int
) -> tf.data.Dataset:
    """Dev/test groups (n = 1) in file order, flattened to one candidate per element."""
    ds = _records(expand_patterns(file_patterns)).batch(batch_size)
    ds = ds.map(
        lambda r: parse_eval_batch(r, max_query_length, max_doc_length),
        num_parallel_calls=tf.data.AUTOTUNE,
        deterministic=True,
    )
    return ds.prefetch(tf.data.AUTOTUNE)
