"""Beam transforms of components.ranking_datagen.beam_transforms: the sharded BM25 in a real
(in-memory) Beam pipeline, from the document reader to the merged per-query candidates."""

from __future__ import annotations

import json
from pathlib import Path

import apache_beam as beam
import pytest
from apache_beam.metrics.metric import MetricsFilter
from apache_beam.options.pipeline_options import PipelineOptions
from bm25_reference import bm25_run, sharded_bm25_run
from datagen_testlib import load_collection

from components.ranking_datagen import beam_transforms, candidates
from components.ranking_datagen import collection as collection_io

DEPTH = 100


def _beam_bm25(
    shared_data: Path, tmp_path: Path, batch_size: int, stemmer: str
) -> tuple[dict, dict]:
    """Cranfield through ReadDocuments (batches of `batch_size`) and ShardedBm25 with
    `stemmer`; returns the run and the distribution of documents per scored shard."""
    cran = shared_data / "cranfield"
    _, queries = load_collection(shared_data, "cranfield")
    tokens = candidates.query_tokens(queries, stemmer)
    out = tmp_path / f"run-{batch_size}-{stemmer}.json"
    p = beam.Pipeline(options=PipelineOptions(["--direct_running_mode=in_memory"]))
    batches = (
        p
        | collection_io.ReadDocuments(
            str(cran / "cran.all.1400"), "cranfield", "fail", True, batch_size=batch_size
        )
    )["batches"]
    query_tokens = p | "QueryTokens" >> beam.Create([tokens])
    _ = (
        (batches, query_tokens)
        | beam_transforms.ShardedBm25(DEPTH, 0.9, 0.4, stemmer)
        | beam.Map(
            lambda merged: out.write_text(
                json.dumps(candidates.run_from_candidates(merged, queries))
            )
        )
    )
    result = p.run()
    result.wait_until_finish()
    (dist,) = result.metrics().query(MetricsFilter().with_name("bm25_shard_documents"))[
        "distributions"
    ]
    d = dist.committed
    return json.loads(out.read_text()), {"count": d.count, "sum": d.sum, "max": d.max}


@pytest.mark.parametrize(
    "batch_size,stemmer", [(7, "none"), (1024, "none"), (7, "porter"), (1024, "porter")]
)
def test_sharded_bm25_in_beam_equals_the_single_index(
    batch_size: int, stemmer: str, shared_data: Path, tmp_path: Path
) -> None:
    run, shards = _beam_bm25(shared_data, tmp_path, batch_size, stemmer)
    # No scoring step holds more than one batch (shard) of documents: one element per batch.
    assert shards == {"count": -(-1400 // batch_size), "sum": 1400, "max": min(batch_size, 1400)}
    docs, queries = load_collection(shared_data, "cranfield")
    assert run == sharded_bm25_run(docs, queries, DEPTH, 0.9, 0.4, 1024, stemmer)
    everything = bm25_run(docs, queries, len(docs), 0.9, 0.4, stemmer)
    assert candidates.rank_run(run, DEPTH) == candidates.rank_run(everything, DEPTH)
