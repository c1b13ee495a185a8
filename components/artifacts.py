"""Artifact types rankpipe adds to TFX's standard ones (Examples, TransformGraph, Model...)."""

from tfx.types import artifact


class Qrels(artifact.Artifact):
    """Relevance judgments of the collection, as `qrels.txt` in TREC qrels format."""

    TYPE_NAME = "rankpipe.Qrels"


class TrecRun(artifact.Artifact):
    """A ranking in TREC run format (`run.txt`): a first stage or a reranker's output."""

    TYPE_NAME = "rankpipe.TrecRun"


class Vocabulary(artifact.Artifact):
    """The WordPiece vocabulary (`vocab.txt`, one token per line, id = line number - 1)."""

    TYPE_NAME = "rankpipe.Vocabulary"


class DatagenSummary(artifact.Artifact):
    """Counts from RankingDataGen (`summary.json`, `summary.md`)."""

    TYPE_NAME = "rankpipe.DatagenSummary"


class CorpusVectors(artifact.Artifact):
    """Every document of the collection embedded once per sentence encoder (the CorpusEncoder,
    components/corpus_encoder/): `<encoder key>/vectors-*.tfrecord.gz` shards and
    `corpus_vectors.json`, written last, in rankcore/corpus_vectors.py's format. Custom
    properties `documents` (documents encoded) and `encoders` (how many)."""

    TYPE_NAME = "rankpipe.CorpusVectors"


QRELS_FILE = "qrels.txt"
RUN_FILE = "run.txt"
VOCAB_FILE = "vocab.txt"
