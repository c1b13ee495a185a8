"""Beam transforms of RankingDataGen: word counts, sharded BM25, tf.Transform tokenization,
example assembly (the dense retrieval of hybrid candidates: dense_retrieval.py)."""

from __future__ import annotations

import collections
import hashlib
import os

import apache_beam as beam
import numpy as np
import pyarrow as pa
import tensorflow as tf
import tensorflow_transform.beam as tft_beam
from tensorflow_transform.tf_metadata import schema_utils
from tfx_bsl.tfxio import tensor_adapter, tensor_representation_util

from components.ranking_datagen import candidates, outputs, tokenization
from components.ranking_datagen.sampling import Group
from rankcore import example_format

_NS = "rankpipe"
_KEY = "key"
# Texts per tokenizer call: large enough to amortize TF's per-call cost.
_MIN_BATCH, _MAX_BATCH = 64, 2048


def split_batch(batch: list[tuple], lowercase: bool) -> list[bytes]:
    """All normalized words of a batch of (id, text, ...) tuples, split in one TF call."""
    texts = tf.constant([item[1] for item in batch])
    words = tokenization.split_words(tokenization.normalize(texts, lowercase))
    return words.flat_values.numpy().tolist()


class MergeCounts(beam.CombineFn):
    """Counts words (input: lists of words) into a Counter. As a combiner it is lifted: each
    worker counts its batches before anything is shuffled, so one Counter per worker crosses
    the wire instead of one (word, count) element per word per batch (~2M on 200k passages);
    and Counter.update over a list runs in C."""

    def create_accumulator(self) -> collections.Counter:
        return collections.Counter()

    def add_input(self, acc: collections.Counter, words: list[bytes]):
        acc.update(words)
        return acc

    def merge_accumulators(self, accumulators):
        accumulators = iter(accumulators)
        merged = next(accumulators)
        for acc in accumulators:
            merged.update(acc)
        return merged

    def extract_output(self, acc: collections.Counter) -> collections.Counter:
        return acc


def learn_vocabulary(counts: collections.Counter, vocab_size: int) -> list[str]:
    """The WordPiece vocabulary learned from CountAllWords' output."""
    words = [(w.decode("utf-8", "replace"), c) for w, c in counts.items()]
    return tokenization.learn_wordpiece_vocab(words, vocab_size)


class CountAllWords(beam.PTransform):
    """Batches of (id, text, ...) -> a one-element PCollection: the Counter of all normalized
    words (as bytes) of all texts."""

    def __init__(self, lowercase: bool):
        super().__init__()
        self._lowercase = lowercase

    def expand(self, batches):
        return (
            batches
            | "SplitWords" >> beam.Map(split_batch, self._lowercase)
            | "CountWords" >> beam.CombineGlobally(MergeCounts())
        )


class _IndexShard(beam.DoFn):
    """A batch of documents (one shard) -> its candidates.ShardIndex over the query terms,
    tokenized with the `stemmer` the query tokens were."""

    def __init__(self, stemmer: str):
        self._stemmer = stemmer

    def setup(self) -> None:
        self._terms: set[str] | None = None

    def process(self, batch: list[tuple], query_tokens: dict[str, list[str]]):
        if self._terms is None:
            self._terms = {t for tokens in query_tokens.values() for t in tokens}
        yield candidates.index_shard(((d[0], d[1]) for d in batch), self._terms, self._stemmer)


class _SumStatistics(beam.CombineFn):
    """ShardStatistics summed over all shards (lifted: each worker sums its own first)."""

    def create_accumulator(self) -> candidates.ShardStatistics:
        return candidates.EMPTY_STATISTICS

    def add_input(self, acc, stats):
        return acc.merge(stats)

    def merge_accumulators(self, accumulators):
        merged = candidates.EMPTY_STATISTICS
        for acc in accumulators:
            merged = merged.merge(acc)
        return merged

    def extract_output(self, acc):
        return acc


class _ScoreShard(beam.DoFn):
    """A ShardIndex + the global statistics -> the shard's top candidates of every query, as
    one candidates.ShardTop (rows, not an element per query: queries x shards elements would
    cost more than the scoring on a large collection)."""

    def __init__(self, depth: int, k1: float, b: float):
        self._depth, self._k1, self._b = depth, k1, b

    def setup(self) -> None:
        self._shard_docs = beam.metrics.Metrics.distribution(_NS, "bm25_shard_documents")
        self._scorer: tuple[object, candidates.Bm25Scorer] | None = None

    def process(self, shard, query_tokens: dict[str, list[str]], stats):
        self._shard_docs.update(len(shard.docids))
        if self._scorer is None or self._scorer[0] is not stats:
            self._scorer = (stats, candidates.Bm25Scorer(query_tokens, stats, self._k1, self._b))
        yield self._scorer[1].score(shard, self._depth)


class TopCandidatesCombine(beam.CombineFn):
    """Shards' rows -> the top `depth` per query across all shards (candidates.TopCandidates:
    score descending, then docid descending, as rank_run orders them). Like Top.PerKey, but
    a docid found in two shards (a duplicate across files) counts once; lifted, so each
    worker merges its own shards first and holds about queries x depth rows."""

    def __init__(self, depth: int):
        self._depth = depth

    def create_accumulator(self) -> candidates.TopCandidates:
        return candidates.TopCandidates(self._depth)

    def add_input(self, acc, shard_top):
        return acc.add(shard_top)

    def merge_accumulators(self, accumulators):
        merged = candidates.TopCandidates(self._depth)
        for acc in accumulators:
            merged.add(acc.result())
        return merged

    def extract_output(self, acc):
        return acc.result()


def _candidate_lists(top: candidates.ShardTop, query_tokens: dict[str, list[str]]) -> dict:
    return candidates.candidate_lists(top, sorted(query_tokens))


class ShardedBm25(beam.PTransform):
    """(batches of (docid, text, ...), a one-element PCollection of qid -> query tokens) ->
    one element: qid -> its top `depth` [(score, docid)], for each query that matches some
    document.

    Each batch is a shard: indexed over the query terms where it is (no shuffle of texts),
    its statistics summed by a combine, then scored with the global statistics (a side input)
    and merged by a combine. No step holds more than one batch of documents; the scores equal
    bm25s over the whole corpus (candidates.Bm25Scorer). `stemmer` (candidates.STEMMERS,
    `datagen.bm25.stemmer`) must be the one the query tokens were made with
    (candidates.query_tokens): documents and queries are then stemmed alike.
    """

    def __init__(self, depth: int, k1: float, b: float, stemmer: str = "none"):
        super().__init__()
        if stemmer not in candidates.STEMMERS:
            raise ValueError(
                f"datagen.bm25.stemmer: {stemmer!r} is not one of {', '.join(candidates.STEMMERS)}"
            )
        self._depth, self._k1, self._b, self._stemmer = depth, k1, b, stemmer

    def expand(self, inputs):
        batches, query_tokens = inputs
        tokens = beam.pvalue.AsSingleton(query_tokens)
        shards = batches | "IndexShards" >> beam.ParDo(_IndexShard(self._stemmer), tokens)
        stats = (
            shards
            | "ShardStatistics" >> beam.Map(candidates.shard_statistics)
            | "GlobalStatistics" >> beam.CombineGlobally(_SumStatistics())
        )
        return (
            shards
            | "ScoreShards"
            >> beam.ParDo(
                _ScoreShard(self._depth, self._k1, self._b),
                tokens,
                beam.pvalue.AsSingleton(stats),
            )
            | "TopPerQuery" >> beam.CombineGlobally(TopCandidatesCombine(self._depth))
            | "Lists" >> beam.Map(_candidate_lists, tokens)
        )


def _to_record_batch(batch: list[tuple[str, str]]) -> pa.RecordBatch:
    keys = pa.array([[k.encode()] for k, _ in batch], type=pa.large_list(pa.large_binary()))
    texts = pa.array([[t.encode()] for _, t in batch], type=pa.large_list(pa.large_binary()))
    return pa.RecordBatch.from_arrays([texts, keys], [tokenization.RAW_TEXT_KEY, _KEY])


def _tensor_adapter_config() -> tensor_adapter.TensorAdapterConfig:
    schema = schema_utils.schema_from_feature_spec(tokenization.RAW_FEATURE_SPEC)
    arrow_schema = pa.schema(
        [
            pa.field(tokenization.RAW_TEXT_KEY, pa.large_list(pa.large_binary())),
            pa.field(_KEY, pa.large_list(pa.large_binary())),
        ]
    )
    return tensor_adapter.TensorAdapterConfig(
        arrow_schema, tensor_representation_util.InferTensorRepresentationsFromSchema(schema)
    )


def _unbatch(batch_and_passthrough):
    # With output_record_batches, TFT returns passthrough keys as columns of the record batch.
    record_batch, _ = batch_and_passthrough
    column = record_batch.schema.get_field_index
    keys = record_batch.column(column(_KEY))
    token_ids = record_batch.column(column(tokenization.TOKEN_IDS_KEY))
    unk = record_batch.column(column(tokenization.UNK_COUNT_KEY))
    for i in range(record_batch.num_rows):
        ids = np.asarray(token_ids[i].values.to_numpy(zero_copy_only=False), dtype=np.int64)
        yield keys[i][0].as_py().decode(), (ids, int(unk[i][0].as_py()))


class TokenizeWithTransform(beam.PTransform):
    """Runs tf.Transform (analyze + transform) over (key, text) and writes the TransformGraph.

    Output: (key, (token_ids, unk_count)). Batches go through the graph as Arrow record batches
    (TFXIO), with the key passed through, so each tokenizer call sees a whole batch.
    """

    def __init__(self, vocab_file: str, lowercase: bool, transform_graph_dir: str, temp_dir: str):
        super().__init__()
        self._vocab_file = vocab_file
        self._lowercase = lowercase
        self._out_dir = transform_graph_dir
        self._temp_dir = temp_dir

    def expand(self, texts):
        batches = (
            texts
            | "Batch" >> beam.BatchElements(min_batch_size=_MIN_BATCH, max_batch_size=_MAX_BATCH)
            | "ToRecordBatch" >> beam.Map(_to_record_batch)
        )
        with tft_beam.Context(
            temp_dir=self._temp_dir, force_tf_compat_v1=False, passthrough_keys={_KEY}
        ):
            (transformed, _), transform_fn = (
                batches,
                _tensor_adapter_config(),
            ) | "AnalyzeAndTransform" >> tft_beam.AnalyzeAndTransformDataset(
                tokenization.make_preprocessing_fn(self._vocab_file, self._lowercase),
                output_record_batches=True,
            )
            _ = transform_fn | "WriteTransformGraph" >> tft_beam.WriteTransformFn(self._out_dir)
        return transformed | "Unbatch" >> beam.FlatMap(_unbatch)


class CountTokens(beam.DoFn):
    """Beam metrics over the encoded texts: totals, [UNK]s and truncations."""

    def __init__(self, max_query_length: int, max_doc_length: int):
        self._limits = {"q": max_query_length, "d": max_doc_length}

    def setup(self):
        self._counters = {
            name: beam.metrics.Metrics.counter(_NS, name)
            for name in (
                "texts_q",
                "texts_d",
                "tokens",
                "unk_tokens",
                "truncated_q",
                "truncated_d",
                "empty_after_tokenization",
            )
        }

    def process(self, element):
        key, (ids, unk) = element
        kind = key[0]
        self._counters[f"texts_{kind}"].inc()
        self._counters["tokens"].inc(len(ids))
        self._counters["unk_tokens"].inc(unk)
        if len(ids) > self._limits[kind]:
            self._counters[f"truncated_{kind}"].inc()
        if len(ids) == 0:
            self._counters["empty_after_tokenization"].inc()
        yield element


def _refs(group: Group):
    yield "q:" + group.qid, (group.key, -1)
    for position, docid in enumerate(group.docids):
        yield "d:" + docid, (group.key, position)


def _dispatch_tokens(element):
    _, joined = element
    tokens = joined["tokens"]
    if not tokens:
        return  # Texts no group refers to (most documents): nothing to emit.
    ids = tokens[0][0]
    for group_key, position in joined["refs"]:
        yield group_key, (position, ids)


class BuildExample(beam.DoFn):
    """Group + its texts' token ids -> serialized tf.Example (schemas/ranking_examples)."""

    def __init__(self, max_query_length: int, max_doc_length: int, unk_id: int):
        self._max_q = max_query_length
        self._max_d = max_doc_length
        self._unk = np.array([unk_id], dtype=np.int64)

    def process(self, element):
        _, joined = element
        (group,) = joined["group"]
        parts = dict(joined["tokens"])
        query_ids = parts[-1][: self._max_q]
        docs = [parts[i][: self._max_d] for i in range(len(group.docids))]
        # An empty text would make a zero-length feature that the schema forbids; [UNK] keeps
        # the row (and the count above reports it).
        query_ids = query_ids if len(query_ids) else self._unk
        docs = [d if len(d) else self._unk for d in docs]
        example = example_format.serialize_group(
            group.qid,
            group.docids,
            query_ids,
            docs,
            group.labels,
            group.judged,
            group.scores,
            group.ranks,
        )
        beam.metrics.Metrics.counter(_NS, f"examples_{group.split}").inc()
        yield group.split, group.key, example


def shuffle_key(seed: int, key: str) -> bytes:
    """Seeded pseudo-random order of an example: a hash, so it does not depend on the runner."""
    return hashlib.sha256(f"{seed}:{key}".encode()).digest()


class WriteShard(beam.DoFn):
    """Writes one shard, its examples sorted by their seeded shuffle key.

    Written by hand instead of with beam.io.WriteToTFRecord because that sink assigns elements to
    shards and orders them as they arrive, so two runs would not give byte-identical files.
    """

    def __init__(self, out_dir: str, num_shards: dict[str, int]):
        self._out_dir = out_dir
        self._num_shards = num_shards

    def process(self, element):
        (split, shard), examples = element
        n = self._num_shards[split]
        path = os.path.join(outputs.split_dir(self._out_dir, split), outputs.shard_name(shard, n))
        tf.io.gfile.makedirs(os.path.dirname(path))
        with tf.io.TFRecordWriter(path, options="GZIP") as writer:
            for _, serialized in sorted(examples):
                writer.write(serialized)
        yield path


class WriteExamples(beam.PTransform):
    """Joins groups with token ids and writes sharded, shuffled, gzipped TFRecords per split."""

    def __init__(
        self,
        out_dir: str,
        num_shards: dict[str, int],
        seed: int,
        max_query_length: int,
        max_doc_length: int,
        unk_id: int,
    ):
        super().__init__()
        self._out_dir = out_dir
        self._num_shards = num_shards
        self._seed = seed
        self._max_q = max_query_length
        self._max_d = max_doc_length
        self._unk_id = unk_id

    def expand(self, inputs):
        groups, tokens = inputs
        refs = groups | "Refs" >> beam.FlatMap(_refs)
        per_group = (
            {"tokens": tokens, "refs": refs}
            | "JoinTokens" >> beam.CoGroupByKey()
            | "Dispatch" >> beam.FlatMap(_dispatch_tokens)
        )
        keyed_groups = groups | "KeyGroups" >> beam.Map(lambda g: (g.key, g))
        seed, num_shards = self._seed, self._num_shards

        def to_shard(item):
            split, key, serialized = item
            order = shuffle_key(seed, key)
            shard = int.from_bytes(order[:8], "big") % num_shards[split]
            return (split, shard), (order, serialized)

        return (
            {"group": keyed_groups, "tokens": per_group}
            | "JoinGroups" >> beam.CoGroupByKey()
            | "BuildExample" >> beam.ParDo(BuildExample(self._max_q, self._max_d, self._unk_id))
            | "AssignShard" >> beam.Map(to_shard)
            | "GroupShards" >> beam.GroupByKey()
            | "WriteShards" >> beam.ParDo(WriteShard(self._out_dir, self._num_shards))
        )
