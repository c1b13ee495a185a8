"""The CorpusEncoder's Beam job run for real (TFX executor, DirectRunner) over a few documents
with a tiny real BERT checkpoint: the artifact holds every document once per encoder, with the
examples' document ids and SentenceEncoder.embed's vector."""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

from components import artifacts
from components.corpus_encoder import constants
from components.corpus_encoder.component import CorpusEncoder
from components.corpus_encoder.config import DocumentsConfig, encoders_from_json
from components.corpus_encoder.executor import Executor
from components.ranking_datagen import readers, tokenization
from rankcore import corpus_vectors
from rankcore.corpus_vectors import EncoderSpec
from rankcore.encoders.sentence import SentenceEncoder

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "trainer_module"))
import bert_testdata  # noqa: E402  (a tiny BERT checkpoint written from scratch)

IN_MEMORY = ["--direct_running_mode=in_memory"]
WORDS = "the wing flutter of a swept delta at supersonic speed heat transfer in laminar flow"
DOCS_A = [
    {"_id": "d1", "title": "Wing flutter", "text": "The flutter of a swept wing."},
    {
        "_id": "d2",
        "title": "",
        "text": "Heat transfer in LAMINAR flow at supersonic speed, "
        "the wing of a delta, the wing of a delta, the wing.",
    },  # longer than the cut
    {"_id": "d3", "title": "", "text": ""},  # no text: [UNK], as the examples write it
    {"_id": "d4", "title": "Zebra", "text": "unknown quokka words"},
]
DOCS_B = [
    {"_id": "d1", "title": "", "text": "a second copy: RankingDataGen keeps the first file's"},
    {"_id": "d5", "title": "Delta", "text": "the delta wing at speed"},
]


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> str:
    directory = str(tmp_path_factory.mktemp("ckpt"))
    vocab = tokenization.RESERVED_TOKENS + sorted(set(WORDS.split())) + [",", ".", ":", "'"]
    bert_testdata.write_checkpoint(directory, vocab, pooler=False)
    return directory


def _write(path: Path, docs: list[dict]) -> None:
    path.write_text("".join(json.dumps(d) + "\n" for d in docs))


def _expected(pattern: str, checkpoint: str, max_length: int) -> dict[str, tuple]:
    """docid -> (ids, vector) computed outside Beam: the reader's texts (first file's copy),
    tokenization.tokenize with the checkpoint's vocab, cut, [UNK] for empty, embed."""
    reader = readers.get_reader(readers.DOCUMENTS, "beir_corpus", allow_empty_text=True)
    texts: dict[str, str] = {}
    for path in sorted(tf.io.gfile.glob(pattern)):
        for doc in reader.read(path):
            texts.setdefault(doc.docid, doc.text)
    encoder = SentenceEncoder(checkpoint)
    model = tokenization.wordpiece_model_of(encoder.vocab)
    unk = tokenization.unk_id(encoder.vocab)
    docids = sorted(texts)
    rows = tokenization.tokenize(tf.constant([texts[d] for d in docids]), model, True).to_list()
    ids = [row[:max_length] or [unk] for row in rows]
    vectors = encoder.embed(ids, batch_size=2)
    return {d: (tuple(i), v) for d, i, v in zip(docids, ids, vectors)}


def _run(
    tmp_path: Path, docs: DocumentsConfig, specs: list[EncoderSpec]
) -> artifacts.CorpusVectors:
    component = CorpusEncoder(docs, specs)  # the exec properties as the pipeline builds them
    out = artifacts.CorpusVectors()
    out.uri = str(tmp_path / "out")
    tf.io.gfile.makedirs(out.uri)
    context = Executor.Context(
        beam_pipeline_args=IN_MEMORY, tmp_dir=str(tmp_path / "tmp"), unique_id="1"
    )
    Executor(context).Do({}, {constants.CORPUS_VECTORS: [out]}, dict(component.exec_properties))
    return out


def test_vectors_and_ids_equal_the_encoder_and_the_examples_tokenization(
    tmp_path: Path, checkpoint: str, caplog: pytest.LogCaptureFixture
) -> None:
    data = tmp_path / "data"
    data.mkdir()
    _write(data / "a.jsonl", DOCS_A)
    _write(data / "b.jsonl", DOCS_B)
    pattern = str(data / "*.jsonl")
    docs = DocumentsConfig(pattern, "beir_corpus", allow_empty_documents=True, batch_size=2)
    short, long_ = EncoderSpec(checkpoint, 6), EncoderSpec(checkpoint, 40)
    # The same encoder twice is encoded once.
    with caplog.at_level(logging.INFO):
        out = _run(tmp_path, docs, [short, long_, EncoderSpec(checkpoint, 6)])
    # Each encoder's progress reaches `rankpipe run`'s console as a structured record
    # (pipelines/console/records.py EncodeProgress), its last one at every text.
    progress = [
        r.rankpipe_encode_progress for r in caplog.records if hasattr(r, "rankpipe_encode_progress")
    ]
    assert len(progress) >= 2 and {p["encoder"] for p in progress} == {Path(checkpoint).name}
    assert sum(p["done"] == p["total"] == 5 for p in progress) == 2

    meta = corpus_vectors.read_meta(out.uri)
    assert [e.key for e in meta.encoders] == [short.key(), long_.key()]
    assert all(e.documents == 5 and e.dim == 32 for e in meta.encoders)
    assert out.get_int_custom_property(constants.DOCUMENTS_PROPERTY) == 5
    assert out.get_int_custom_property(constants.ENCODERS_PROPERTY) == 2
    for spec in (short, long_):
        expected = _expected(pattern, checkpoint, spec.max_length)
        table = corpus_vectors.read_table(out.uri, spec.key())
        assert list(table.docids) == sorted(expected)
        for docid, ids, vector in zip(table.docids, table.ids, table.vectors):
            assert ids == expected[docid][0], docid
            np.testing.assert_allclose(vector, expected[docid][1], atol=1e-6, err_msg=docid)
    cut = corpus_vectors.read_table(out.uri, short.key())
    by_docid = dict(zip(cut.docids, cut.ids))
    assert len(by_docid["d2"]) == 6  # cut
    assert by_docid["d3"] == (tokenization.UNK_ID,)  # empty text
    assert tokenization.UNK_ID in by_docid["d4"]  # words outside the vocabulary
    # The first file's copy of d1: "flutter" is in it, not in b.jsonl's copy.
    assert (
        len(by_docid["d1"]) == 6
        and by_docid["d1"] != _expected(str(data / "b.jsonl"), checkpoint, 6)["d1"][0]
    )
    # The dual encoder's tower over it, looked up by the examples' ids.
    tower = corpus_vectors.vectors_by_ids(out.uri, [(long_.key(), 1.0)])
    assert len(tower) == 5


def test_exec_properties_carry_the_checkpoint_digest(tmp_path: Path, checkpoint: str) -> None:
    """A changed checkpoint under the same path changes the exec properties (TFX's cache
    misses); nothing else about the run does."""
    docs = DocumentsConfig(str(tmp_path / "x.jsonl"), "beir_corpus")
    before = CorpusEncoder(docs, [EncoderSpec(checkpoint, 8)]).exec_properties
    (entry,) = encoders_from_json(before[constants.ENCODERS])
    assert entry.checkpoint_digest and entry.spec == EncoderSpec(checkpoint, 8)
    other = str(tmp_path / "other")
    bert_testdata.write_checkpoint(other, tokenization.RESERVED_TOKENS + ["wing"], seed=1)
    moved = CorpusEncoder(docs, [EncoderSpec(other, 8)]).exec_properties
    assert json.loads(moved[constants.ENCODERS])[0]["checkpoint_digest"] != entry.checkpoint_digest
    with pytest.raises(ValueError, match="no encoder"):
        CorpusEncoder(docs, [])
    # The model's encoder and its companion swapped: the same vectors, the same properties.
    pair = [EncoderSpec(checkpoint, 8), EncoderSpec(other, 8, "mixed_bfloat16")]
    swapped = CorpusEncoder(docs, pair[::-1]).exec_properties
    assert swapped == CorpusEncoder(docs, pair).exec_properties


def test_a_failed_run_leaves_no_vectors(tmp_path: Path, checkpoint: str) -> None:
    data = tmp_path / "bad.jsonl"
    data.write_text('{"_id": "d1", "text": "wing"}\nnot json\n')
    docs = DocumentsConfig(str(data), "beir_corpus")
    with pytest.raises(readers.BadRecordError, match="bad.jsonl:2"):
        _run(tmp_path, docs, [EncoderSpec(checkpoint, 8)])
    assert not list((tmp_path / "out").iterdir())


def test_a_precision_policy_builds_the_encoder_under_it(tmp_path: Path, checkpoint: str) -> None:
    """precision mixed_bfloat16 (what the Trainer picks on a bf16 GPU): the vectors are the
    encoder's built under that Keras policy, a key of their own, and the process's global
    policy is as it was afterwards."""
    import tf_keras as keras

    data = tmp_path / "a.jsonl"
    _write(data, DOCS_A)
    docs = DocumentsConfig(str(data), "beir_corpus", allow_empty_documents=True, batch_size=2)
    plain, bf16 = EncoderSpec(checkpoint, 40), EncoderSpec(checkpoint, 40, "mixed_bfloat16")
    assert plain.key() != bf16.key()
    out = _run(tmp_path, docs, [plain, bf16])
    assert keras.mixed_precision.global_policy().name == "float32"
    assert [e.precision for e in corpus_vectors.read_meta(out.uri).encoders] == [
        "float32",
        "mixed_bfloat16",
    ]
    keras.mixed_precision.set_global_policy("mixed_bfloat16")
    try:
        encoder = SentenceEncoder(checkpoint)
    finally:
        keras.mixed_precision.set_global_policy("float32")
    low, high = (corpus_vectors.read_table(out.uri, s.key()) for s in (bf16, plain))
    assert low.ids == high.ids
    np.testing.assert_allclose(low.vectors, encoder.embed(list(low.ids), 2), atol=1e-6)
    assert not np.allclose(low.vectors, high.vectors, atol=1e-6)  # bf16 did compute
    np.testing.assert_allclose(low.vectors, high.vectors, atol=5e-2)
