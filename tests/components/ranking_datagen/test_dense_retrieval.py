"""Dense hybrid retrieval from the corpus-vectors artifact (components/ranking_datagen/dense.py,
dense_retrieval.py): the stored vectors give the same dense candidates and scores as embedding
the documents, a document the artifact lacks or holds with other ids is embedded, and in the
executor, with the CorpusEncoder's real artifact, no document is embedded at all."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf
from datagen_testlib import IN_MEMORY, Tiny, run_executor, tiny_configs

from components import artifacts
from components.corpus_encoder import constants as encoder_constants
from components.corpus_encoder.component import CorpusEncoder
from components.corpus_encoder.config import DocumentsConfig
from components.corpus_encoder.executor import Executor as EncoderExecutor
from components.ranking_datagen import candidates, dense
from components.ranking_datagen.config import CORPUS_VECTORS
from rankcore import corpus_vectors
from rankcore.encoders.sentence import SentenceEncoder

MAX_Q, MAX_D, DEPTH = 8, 24, 3


def _write_artifact(
    uri: Path, spec: corpus_vectors.EncoderSpec, rows: list[tuple[str, list[int], np.ndarray]]
) -> None:
    """A corpus-vectors artifact in rankcore/corpus_vectors.py's layout: one gzipped shard of
    the (docid, ids, vector) records, then corpus_vectors.json."""
    key = spec.key()
    (uri / key).mkdir(parents=True)
    path = str(uri / key / f"{corpus_vectors.SHARD_PREFIX}-00000-of-00001.tfrecord.gz")
    with tf.io.TFRecordWriter(path, options="GZIP") as writer:
        for docid, ids, vector in rows:
            writer.write(corpus_vectors.to_example(docid, ids, vector))
    meta = corpus_vectors.EncodedMeta(
        key, spec.checkpoint_dir, spec.max_length, spec.precision, len(rows), rows[0][2].shape[0]
    )
    corpus_vectors.write_meta(str(uri), corpus_vectors.CorpusMeta((meta,)))


def _encoded(checkpoint: str, docs: dict[str, str]) -> list[tuple[str, list[int], np.ndarray]]:
    """Each document's ids (dense.encoder_ids) and its SentenceEncoder vector, embedded one at
    a time (other batches than the scorer's: the artifact is written by another job)."""
    encoder = SentenceEncoder(checkpoint)
    model = dense.encoder_wordpiece(encoder, checkpoint)
    docids = sorted(docs)
    ids = dense.encoder_ids([docs[d] for d in docids], model, True, MAX_D)
    return [(d, i, encoder.embed([i])[0]) for d, i in zip(docids, ids)]


def _stored(uri: Path, checkpoint: str, docids: list[str]) -> list[dense.Stored | None]:
    """Per document its entry read back from the artifact by docid (None: absent)."""
    table = corpus_vectors.read_table(str(uri), dense.corpus_encoder_spec(checkpoint, MAX_D).key())
    row = table.by_docid()
    return [
        dense.Stored(table.ids[row[d]], table.vectors[row[d]]) if d in row else None for d in docids
    ]


def _lists(scorer: dense.DenseScorer, top: candidates.ShardTop) -> dict[str, list]:
    merged = candidates.TopCandidates(DEPTH).add(top).result()
    return candidates.candidate_lists(merged, scorer.qids)


def test_stored_vectors_give_the_same_top_and_scores_and_embed_nothing(
    tmp_path: Path, checkpoint: str
) -> None:
    tiny = Tiny.make()
    spec = dense.corpus_encoder_spec(checkpoint, MAX_D)
    _write_artifact(tmp_path / "vectors", spec, _encoded(checkpoint, tiny.docs))
    scorer = dense.DenseScorer(checkpoint, True, tiny.queries, MAX_Q, MAX_D, batch_size=4)
    docids = sorted(tiny.docs)
    texts = [tiny.docs[d] for d in docids]
    stored = _stored(tmp_path / "vectors", checkpoint, docids)

    embedded = _lists(scorer, scorer.score(docids, texts, DEPTH))
    from_artifact = _lists(scorer, scorer.score(docids, texts, DEPTH, stored))
    assert from_artifact.keys() == embedded.keys() == set(tiny.queries)
    for qid in embedded:
        assert [d for _, d in from_artifact[qid]] == [d for _, d in embedded[qid]]
        np.testing.assert_allclose(
            [s for s, _ in from_artifact[qid]], [s for s, _ in embedded[qid]], atol=1e-6
        )
    assert scorer.document_vectors(texts, stored).stored == len(docids)  # none embedded


def test_a_document_missing_or_with_other_ids_is_embedded(tmp_path: Path, checkpoint: str) -> None:
    """The stored vector serves only the ids it was encoded from: d1's entry holds d2's vector
    (so a vector from the artifact is seen to be used), d3's entry holds d4's ids (another
    text under that docid: embedded), d5 is absent (embedded)."""
    tiny = Tiny.make()
    rows = {d: (d, ids, v) for d, ids, v in _encoded(checkpoint, tiny.docs)}
    rows["d1"] = ("d1", rows["d1"][1], rows["d2"][2])
    rows["d3"] = ("d3", rows["d4"][1], rows["d3"][2] * 0 + 1)
    del rows["d5"]
    _write_artifact(
        tmp_path / "vectors", dense.corpus_encoder_spec(checkpoint, MAX_D), list(rows.values())
    )
    scorer = dense.DenseScorer(checkpoint, True, tiny.queries, MAX_Q, MAX_D, batch_size=4)
    docids = sorted(tiny.docs)
    texts = [tiny.docs[d] for d in docids]
    got = scorer.document_vectors(texts, _stored(tmp_path / "vectors", checkpoint, docids))
    own = scorer.document_vectors(texts).vectors
    at = {d: i for i, d in enumerate(docids)}
    assert got.stored == len(docids) - 2
    np.testing.assert_array_equal(got.vectors[at["d1"]], rows["d2"][2])
    for docid in ("d3", "d5"):
        np.testing.assert_allclose(got.vectors[at[docid]], own[at[docid]], atol=1e-6)


def test_an_artifact_without_the_hybrid_encoder_names_the_keys(
    tmp_path: Path, checkpoint: str
) -> None:
    tiny = Tiny.make()
    other = corpus_vectors.EncoderSpec(checkpoint, MAX_D + 1)  # another cut: another key
    _write_artifact(tmp_path / "vectors", other, _encoded(checkpoint, tiny.docs))
    with pytest.raises(ValueError, match=r"datagen\.hybrid\.checkpoint_dir .*max_doc_length 24"):
        dense.stored_vectors_pattern(str(tmp_path / "vectors"), checkpoint, MAX_D)


def _corpus_encoder_output(tmp_path: Path, documents: str, checkpoint: str) -> list:
    """The real CorpusEncoder's artifact for the hybrid encoder, run as the pipeline builds it
    (pipelines/component_table.py: the documents as RankingDataGen reads them)."""
    docs = DocumentsConfig(documents, "msmarco_tsv", batch_size=4)
    component = CorpusEncoder(docs, [dense.corpus_encoder_spec(checkpoint, MAX_D)])
    out = artifacts.CorpusVectors()
    out.uri = str(tmp_path / "corpus_vectors")
    tf.io.gfile.makedirs(out.uri)
    context = EncoderExecutor.Context(
        beam_pipeline_args=IN_MEMORY, tmp_dir=str(tmp_path / "encoder_tmp"), unique_id="1"
    )
    outputs = {encoder_constants.CORPUS_VECTORS: [out]}
    EncoderExecutor(context).Do({}, outputs, dict(component.exec_properties))
    return [out]


def test_datagen_reads_the_corpus_encoders_vectors(tmp_path: Path, checkpoint: str) -> None:
    """RankingDataGen with the CorpusEncoder's artifact: the same first-stage run (hybrid
    union) and summary as embedding the documents, every document's vector from the artifact
    (the two components tokenize alike), and the counts in the summary's `hybrid` entry."""
    tiny = Tiny.make()
    paths = tiny.write_tsv(tmp_path / "data")
    hybrid = {"checkpoint_dir": checkpoint, "depth": DEPTH, "batch_size": 4}
    configs = tiny_configs(paths, candidates_depth=3, hybrid=hybrid)
    embedded = run_executor(tmp_path / "embedded", *configs)
    vectors = _corpus_encoder_output(tmp_path, paths["documents"], checkpoint)
    stored = run_executor(tmp_path / "stored", *configs, inputs={CORPUS_VECTORS: vectors})

    assert stored.run_lines() == embedded.run_lines()
    assert embedded.summary["hybrid"]["candidates_added"] > 0  # the union is exercised
    hybrid_counts = dict(embedded.summary["hybrid"])
    hybrid_counts.update(documents_from_corpus_vectors=len(tiny.docs), documents_embedded=0)
    assert stored.summary["hybrid"] == hybrid_counts
    assert "documents_embedded" not in embedded.summary["hybrid"]  # without it, as before
    counters = stored.summary["beam_counters"]
    assert counters["dense_from_corpus_vectors"] == counters["dense_documents"] == len(tiny.docs)
    for split in ("train", "dev", "test"):
        assert stored.examples(split) == embedded.examples(split)
