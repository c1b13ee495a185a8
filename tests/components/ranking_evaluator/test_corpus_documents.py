"""The evaluator's scoring pass (scoring.score_split, as passes.py calls it) with the
corpus-vectors artifact, run for real: the CorpusEncoder's Beam job writes the artifact over a
few documents with a tiny BERT checkpoint, and a SavedModel with a frozen document tower (its
documents embedded by that checkpoint as it is, its queries by a tower of its own, and
document_tower.json beside it, as the Trainer exports such a model) is scored with and without
the artifact: with it no document is embedded, and the scores are the same."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import apache_beam as beam
import numpy as np
import pytest
import tensorflow as tf

from components import artifacts
from components.corpus_encoder import constants as encoder_constants
from components.corpus_encoder.component import CorpusEncoder
from components.corpus_encoder.config import DocumentsConfig
from components.corpus_encoder.encode import document_ids, wordpiece_of
from components.corpus_encoder.executor import Executor as EncoderExecutor
from components.ranking_datagen import tokenization
from components.ranking_evaluator import scoring
from components.ranking_evaluator.corpus_documents import (
    FROM_CORPUS_VECTORS,
    CorpusDocuments,
    corpus_documents,
)
from components.ranking_evaluator.embedding import DOCUMENTS_EMBEDDED
from rankcore import corpus_vectors
from rankcore import example_format as fmt
from rankcore.constants import EMBED_DOC_SIGNATURE, EMBED_QUERY_SIGNATURE, EMBEDDING_OUTPUT
from rankcore.corpus_vectors import DocumentTower, EncoderSpec
from rankcore.encoders.sentence import SentenceEncoder

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "trainer_module"))
import bert_testdata  # noqa: E402  (a tiny BERT checkpoint written from scratch)

MAX_D = 8  # the documents' cut: the encoder's max_length and the model's max_doc_length
WORDS = "the wing flutter of a swept delta at supersonic speed heat transfer in laminar flow"
DOCS = {
    "d1": "The flutter of a swept wing.",
    "d2": "Heat transfer in laminar flow at supersonic speed, the wing of a delta, the wing.",
    "d3": "",  # [UNK], as the examples write an empty document
    "d4": "the delta wing at speed",
    "d5": "laminar flow",
}
# q4's ids are d5's: a query is never taken from the artifact (its tower is the model's own).
QUERIES = {
    "q1": "wing flutter",
    "q2": "heat transfer at supersonic speed",
    "q3": "delta",
    "q4": "laminar flow",
}
CANDIDATES = {
    "q1": ["d1", "d2", "d4"],
    "q2": ["d2", "d3", "d5", "d1"],
    "q3": ["d4", "d5"],
    "q4": ["d5", "d2"],
}


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> str:
    directory = str(tmp_path_factory.mktemp("ckpt"))
    vocab = tokenization.RESERVED_TOKENS + sorted(set(WORDS.split())) + [",", "."]
    bert_testdata.write_checkpoint(directory, vocab, pooler=False)
    return directory


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory, checkpoint: str) -> str:
    """The CorpusEncoder's artifact (its executor, DirectRunner) over DOCS."""
    root = tmp_path_factory.mktemp("corpus")
    documents = root / "corpus.jsonl"
    documents.write_text(
        "".join(json.dumps({"_id": d, "title": "", "text": t}) + "\n" for d, t in DOCS.items())
    )
    config = DocumentsConfig(str(documents), "beir_corpus", allow_empty_documents=True)
    component = CorpusEncoder(config, [EncoderSpec(checkpoint, MAX_D)])
    out = artifacts.CorpusVectors()
    out.uri = str(root / "out")
    tf.io.gfile.makedirs(out.uri)
    context = EncoderExecutor.Context(
        beam_pipeline_args=["--direct_running_mode=in_memory"],
        tmp_dir=str(root / "tmp"),
        unique_id="1",
    )
    EncoderExecutor(context).Do(
        {}, {encoder_constants.CORPUS_VECTORS: [out]}, dict(component.exec_properties)
    )
    return out.uri


class _FrozenTowerModel(tf.Module):
    """A dual encoder's embedding signatures: documents by the checkpoint as it is (cut at
    MAX_D, as export.py's embed_doc_ids cuts them), queries by a tower of its own (the
    checkpoint's vector through a fixed random map, L2-normalised)."""

    def __init__(self, checkpoint_dir: str):
        super().__init__()
        self._sentence = SentenceEncoder(checkpoint_dir)
        self.encoder = self._sentence._encoder  # tracked: the SavedModel holds its weights
        dim = int(self._sentence.embed([[5]]).shape[-1])
        rng = np.random.default_rng(7)
        self.query_map = tf.Variable(rng.normal(size=[dim, dim]).astype(np.float32))

    @tf.function(input_signature=[tf.TensorSpec([None, None], tf.int64, name="ids")])
    def embed_doc_ids(self, ids: tf.Tensor) -> dict[str, tf.Tensor]:
        return {EMBEDDING_OUTPUT: self._sentence._embed(ids[:, :MAX_D])}

    @tf.function(input_signature=[tf.TensorSpec([None, None], tf.int64, name="ids")])
    def embed_query_ids(self, ids: tf.Tensor) -> dict[str, tf.Tensor]:
        vector = tf.matmul(self._sentence._embed(ids), self.query_map)
        return {EMBEDDING_OUTPUT: tf.math.l2_normalize(vector, axis=-1)}


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory, checkpoint: str) -> dict[str, str]:
    """The frozen-tower model ("tower": document_tower.json beside it) and the same SavedModel
    without the file ("plain": its documents count as a trained tower's)."""
    root = tmp_path_factory.mktemp("models")
    module = _FrozenTowerModel(checkpoint)
    out = {}
    for name in ("tower", "plain"):
        out[name] = str(root / name)
        tf.saved_model.save(
            module,
            out[name],
            signatures={
                EMBED_DOC_SIGNATURE: module.embed_doc_ids,
                EMBED_QUERY_SIGNATURE: module.embed_query_ids,
            },
        )
    DocumentTower(((EncoderSpec(checkpoint, MAX_D), 1.0),)).write(out["tower"])
    return out


def _examples(directory: Path, checkpoint: str, extra: dict[str, list[int]]) -> str:
    """A test split of one candidate per example, with the documents' ids as RankingDataGen
    writes them (the corpus encoder's tokenization), except d2 left uncut (longer than MAX_D:
    the lookup cuts it as the model does); `extra` adds documents with ids of their own."""
    encoder = SentenceEncoder(checkpoint)
    model, unk = wordpiece_of(encoder, checkpoint)
    docids = list(DOCS)
    cut = dict(zip(docids, document_ids([DOCS[d] for d in docids], model, True, MAX_D, unk)))
    cut["d2"] = document_ids([DOCS["d2"]], model, True, 1000, unk)[0]
    assert len(cut["d2"]) > MAX_D
    cut.update(extra)
    query_ids = dict(zip(QUERIES, document_ids(list(QUERIES.values()), model, True, 100, unk)))
    candidates = {**CANDIDATES, "q3": CANDIDATES["q3"] + list(extra)}
    split = directory / "Split-test"
    split.mkdir(parents=True)
    with tf.io.TFRecordWriter(str(split / "data-00000-of-00001.gz"), options="GZIP") as writer:
        for qid, docs in candidates.items():
            for rank, docid in enumerate(docs, 1):
                writer.write(
                    fmt.serialize_group(
                        qid, [docid], query_ids[qid], [cut[docid]], [0.0], [1], [1.0 / rank], [rank]
                    )
                )
    return str(split)


def _score(split: str, models: dict[str, str], out: str, corpus: dict) -> tuple[dict, dict]:
    phases: dict = {}
    runs, how = scoring.score_split(
        beam.Pipeline,
        [split],
        models,
        batch_size=2,
        scores_prefix=os.path.join(out, "p"),
        phases=phases,
        corpus=corpus,
    )
    assert set(how.values()) == {scoring.EMBED_ONCE}
    return runs, phases


def _assert_same(got: dict, want: dict) -> None:
    assert got.keys() == want.keys()
    for qid, docs in want.items():
        assert got[qid].keys() == docs.keys()
        np.testing.assert_allclose(
            [got[qid][d] for d in docs], list(docs.values()), rtol=0, atol=1e-6
        )


def test_which_models_take_their_documents_from_the_artifact(
    corpus: str, models: dict[str, str], checkpoint: str, tmp_path: Path
) -> None:
    tower = corpus_documents(corpus, models["tower"])
    assert tower == CorpusDocuments(corpus, ((EncoderSpec(checkpoint, MAX_D).key(), 1.0),), MAX_D)
    assert corpus_documents(None, models["tower"]) is None  # no artifact wired
    assert corpus_documents(corpus, models["plain"]) is None  # a trained document tower
    other = tmp_path / "other"  # a tower of encoders the artifact does not hold
    other.mkdir()
    DocumentTower(((EncoderSpec(checkpoint, MAX_D + 1), 1.0),)).write(str(other))
    assert corpus_documents(corpus, str(other)) is None


def test_a_frozen_tower_model_embeds_no_document_and_scores_the_same(
    corpus: str, models: dict[str, str], checkpoint: str, tmp_path: Path
) -> None:
    split = _examples(tmp_path / "examples", checkpoint, {})
    tower = {"candidate": models["tower"]}
    want, embedded = _score(split, tower, str(tmp_path / "embedded"), {})
    documents = len({d for docs in CANDIDATES.values() for d in docs})
    assert embedded[DOCUMENTS_EMBEDDED] == documents and embedded[FROM_CORPUS_VECTORS] == 0
    taken = {"candidate": corpus_documents(corpus, models["tower"])}
    got, phases = _score(split, tower, str(tmp_path / "taken"), taken)
    assert phases[DOCUMENTS_EMBEDDED] == 0
    assert phases[FROM_CORPUS_VECTORS] == documents
    assert phases["texts_embedded"] == len(QUERIES)
    _assert_same(got["candidate"], want["candidate"])


def test_documents_the_artifact_lacks_are_embedded_by_the_model(
    corpus: str, models: dict[str, str], checkpoint: str, tmp_path: Path
) -> None:
    """A document outside the corpus, and one whose ids differ from the encoded ones (another
    tokenization), are embedded; the other documents come from the artifact; a model without
    a tower in the same pass embeds all of its documents."""
    d4 = corpus_vectors.read_table(corpus, EncoderSpec(checkpoint, MAX_D).key())
    d4_ids = list(d4.ids[d4.docids.index("d4")])
    extra = {"unknown": [5, 6, 7], "retokenized": d4_ids[::-1]}
    split = _examples(tmp_path / "examples", checkpoint, extra)
    both = {"candidate": models["tower"], "plain": models["plain"]}
    want, _ = _score(split, both, str(tmp_path / "embedded"), {})
    taken = {"candidate": corpus_documents(corpus, models["tower"])}
    got, phases = _score(split, both, str(tmp_path / "taken"), taken)
    documents = len({d for docs in CANDIDATES.values() for d in docs})
    assert phases[FROM_CORPUS_VECTORS] == documents
    assert phases[DOCUMENTS_EMBEDDED] == len(extra) + documents + len(extra)  # tower + plain
    for name in both:
        _assert_same(got[name], want[name])
    _assert_same(got["candidate"], got["plain"])  # the same encoder, whichever way


def test_a_pass_that_lost_a_scored_candidate_is_refused(
    models: dict[str, str], checkpoint: str, tmp_path: Path, monkeypatch
) -> None:
    """Every model must score every example the pass read (scoring.check_complete, from the
    pass's own `examples_read` counter): a lost pair would be counted as not retrieved."""
    split = _examples(tmp_path / "examples", checkpoint, {})
    examples = sum(len(docs) for docs in CANDIDATES.values())
    runs, _ = _score(split, {"candidate": models["tower"]}, str(tmp_path / "all"), {})
    assert sum(len(docs) for docs in runs["candidate"].values()) == examples
    read = scoring.read_scores
    monkeypatch.setattr(scoring, "read_scores", lambda pattern: read(pattern)[1:])
    with pytest.raises(RuntimeError, match=f"'candidate' scored {examples - 1} .* {examples} "):
        _score(split, {"candidate": models["tower"]}, str(tmp_path / "lost"), {})


def test_check_complete_names_the_model_and_the_counts() -> None:
    run = {"q1": {"d1": 0.5, "d2": 0.1}, "q2": {"d1": 0.2}}
    scoring.check_complete({"candidate": run, "baseline": run}, 3)
    with pytest.raises(RuntimeError, match="'baseline' scored 2 candidates of the 3 examples"):
        scoring.check_complete({"candidate": run, "baseline": {"q1": run["q1"]}}, 3)
