"""Typed configuration of RankingDataGen: the `collection:` and `datagen:` sections of the
pipeline YAML.

Beside its owner (issue 19): pipelines/config.py composes it into PipelineConfig, and the
executor rebuilds it from its exec properties with `from_dict` (rankcore.config_loader, the
loader of the pipeline YAML and of trainer_module/config.py), so the defaults live here only.
The format names come from the READERS registry (readers.py), never kept twice. Each field's
comment is its line in the README's configuration reference (pipelines/config_reference.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from components.ranking_datagen.readers import READERS
from rankcore import config_loader, folds

DOC_FORMATS = tuple(READERS["documents"])
QUERY_FORMATS = tuple(READERS["queries"])
QRELS_FORMATS = tuple(READERS["qrels"])
SAMPLING_MODES = ("pairwise", "listwise", "pointwise", "lists")


@dataclass
class DemoCollectionConfig:
    """A synthetic collection `rankpipe run` generates when its files are missing."""

    enabled: bool = False  # generate the collection files when they are missing
    seed: int = 13  # same seed, same collection
    num_documents: int = 600  # documents in the generated corpus
    num_queries: int = 60  # queries (all judged); at least 10 for train/dev/test

    def __post_init__(self) -> None:
        config_loader.positive("num_documents", self.num_documents)
        if self.num_queries < 10:
            raise ValueError(f"num_queries: need >= 10 for train/dev/test, got {self.num_queries}")


@dataclass
class CollectionConfig:
    """Where the raw collection is and in which formats (see components/ranking_datagen)."""

    name: str = "collection"  # a label for reports and the model card
    documents: str = ""  # path or glob (local or any tf.io.gfile URI); ${VAR} expanded
    documents_format: str = "beir_corpus"  # cranfield, beir_corpus, trec_sgml, msmarco_tsv
    queries: str = ""  # path or glob
    queries_format: str = "beir_queries"  # cranfield, beir_queries, trec_topics, msmarco_tsv
    qrels: str = ""  # path or glob
    qrels_format: str = "trec_qrels"  # cranfield, beir_qrels, trec_qrels
    # Optional first-stage run in TREC run format; without it, RankingDataGen runs BM25.
    first_stage_run: str | None = None
    # Keep documents with no text (they can still be judged; they score from an empty text).
    allow_empty_documents: bool = False
    demo: DemoCollectionConfig = field(default_factory=DemoCollectionConfig)

    def __post_init__(self) -> None:
        config_loader.one_of("documents_format", self.documents_format, DOC_FORMATS)
        config_loader.one_of("queries_format", self.queries_format, QUERY_FORMATS)
        config_loader.one_of("qrels_format", self.qrels_format, QRELS_FORMATS)
        for key in ("documents", "queries", "qrels"):
            if not getattr(self, key):
                raise ValueError(f"{key}: a path is required")

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> CollectionConfig:
        """Rebuilds the config from its exec property (JSON of `dataclasses.asdict`) with the
        loader of the pipeline YAML, as TrainerConfig.from_dict does."""
        return config_loader.build(cls, data, "collection config")


@dataclass
class Bm25Config:
    k1: float = 0.9  # BM25 term-frequency saturation (bm25s, Lucene variant)
    b: float = 0.4  # BM25 length normalization

    def __post_init__(self) -> None:
        if self.k1 < 0 or not 0 <= self.b <= 1:
            raise ValueError(f"k1 must be >= 0 and b in [0, 1], got k1={self.k1} b={self.b}")


@dataclass
class SplitConfig:
    """Query split: deterministic k-fold by qid hash, or explicit qid list files."""

    method: str = "kfold"  # kfold (by a hash of seed and qid) or explicit (qid list files)
    num_folds: int = 5  # kfold: folds; one is dev, one is test, the rest train
    dev_fold: int = 0  # kfold: the dev fold
    test_fold: int = 1  # kfold: the test fold
    seed: int = 0  # kfold: changes the assignment
    train_qids: str | None = None  # explicit: file with one qid per line
    dev_qids: str | None = None  # explicit: file with one qid per line
    test_qids: str | None = None  # explicit: file with one qid per line

    def __post_init__(self) -> None:
        config_loader.one_of("method", self.method, ("kfold", "explicit"))
        if self.method == "kfold":
            if self.num_folds < 3:
                raise ValueError(f"num_folds: need >= 3 (train/dev/test), got {self.num_folds}")
            for name in ("dev_fold", "test_fold"):
                if not 0 <= getattr(self, name) < self.num_folds:
                    raise ValueError(f"{name}: must be in [0, {self.num_folds})")
            if self.dev_fold == self.test_fold:
                raise ValueError("dev_fold and test_fold must differ")
        elif not (self.train_qids and self.dev_qids and self.test_qids):
            raise ValueError("method explicit needs train_qids, dev_qids and test_qids files")


# RankingDataGen's optional exec property turning on k-fold cross-validation splits (0 or
# absent: off); the pipeline sets it from evaluator.cross_validation.folds.
CROSS_VALIDATION_FOLDS = "cross_validation_folds"


def cross_validation_folds(value: int, split_cfg: SplitConfig) -> int:
    """The checked fold count k of the `cross_validation_folds` property (0: off), which is
    `evaluator.cross_validation.folds` (pipelines/config.py checks it with this too). The folds
    are `datagen.split`'s kfold hash, so that split must be kfold with num_folds = k."""
    if not value:
        return 0
    folds.check_folds(value)
    if split_cfg.method != "kfold":
        raise ValueError(
            f"{CROSS_VALIDATION_FOLDS}={value} (evaluator.cross_validation.folds) needs "
            f"datagen.split.method kfold (the folds are its qid hash), got {split_cfg.method!r}"
        )
    if split_cfg.num_folds != value:
        raise ValueError(
            f"{CROSS_VALIDATION_FOLDS}={value} (evaluator.cross_validation.folds) needs "
            f"datagen.split.num_folds={value} (the folds are its qid hash), got "
            f"{split_cfg.num_folds}"
        )
    return value


@dataclass
class SamplingConfig:
    """How training examples are drawn from the train queries' candidates."""

    # pairwise (pos, neg), listwise (pos + n negs), pointwise, or lists (every candidate of each
    # train query, unsampled: for trainer.dual_encoder.frozen_documents)
    mode: str = "pairwise"
    samples_per_query: int = 64  # training groups drawn per train query
    negatives_per_positive: int = 1  # listwise: negatives per group
    # Judgments with relevance >= this count as positives; auto: the lowest grade above 0 found
    # in the train queries' judgments.
    positive_threshold: int | Literal["auto"] = "auto"
    seed: int = 0  # sampling seed (per query generators: adding queries does not reshuffle)

    def __post_init__(self) -> None:
        config_loader.one_of("mode", self.mode, SAMPLING_MODES)
        config_loader.positive("samples_per_query", self.samples_per_query)
        config_loader.positive("negatives_per_positive", self.negatives_per_positive)
        if self.positive_threshold != "auto":
            config_loader.positive("positive_threshold", self.positive_threshold)


@dataclass
class VocabConfig:
    # Size of the learned WordPiece vocabulary; ignored when `vocab_file` is given.
    size: int = 8000
    # A pretrained checkpoint's vocab.txt: skips learning.
    vocab_file: str | None = None
    lowercase: bool = True  # case-fold and strip accents before WordPiece (uncased models)

    def __post_init__(self) -> None:
        if self.size < 100:
            raise ValueError(f"size: must be >= 100, got {self.size}")


@dataclass
class HybridConfig:
    """Hybrid candidates (components/ranking_datagen/dense.py): a sentence encoder's dense top-k
    over the whole corpus joins the first stage's candidates; fusion runs over the union."""

    # A Hugging Face sentence-encoder checkpoint directory (all-MiniLM-L6-v2: ${RANKPIPE_MINILM}),
    # run as it is over every document; unset (the default): first-stage candidates only.
    checkpoint_dir: str | None = None
    depth: int = 100  # dense candidates per query, added to the first stage's
    lowercase: bool = True  # case-fold before the checkpoint's WordPiece (uncased checkpoints)
    batch_size: int = 64  # texts per encoder call

    def __post_init__(self) -> None:
        config_loader.positive("depth", self.depth)
        config_loader.positive("batch_size", self.batch_size)


@dataclass
class DatagenConfig:
    candidates_depth: int = 100  # first-stage candidates kept per query (top k)
    bm25: Bm25Config = field(default_factory=Bm25Config)
    split: SplitConfig = field(default_factory=SplitConfig)
    sampling: SamplingConfig = field(default_factory=SamplingConfig)
    vocab: VocabConfig = field(default_factory=VocabConfig)
    hybrid: HybridConfig = field(default_factory=HybridConfig)
    max_query_length: int = 32  # query token ids kept (truncated beyond)
    max_doc_length: int = 256  # document token ids kept (truncated beyond)
    # 0 = derive from the number of examples (about 20k examples a shard).
    num_shards: int = 0
    on_bad_record: str = "fail"  # fail: stop naming file and line; skip: count and report
    shuffle_seed: int = 0  # order and sharding of the written examples

    def __post_init__(self) -> None:
        for name in ("candidates_depth", "max_query_length", "max_doc_length"):
            config_loader.positive(name, getattr(self, name))
        if self.num_shards < 0:
            raise ValueError(f"num_shards: must be >= 0, got {self.num_shards}")
        config_loader.one_of("on_bad_record", self.on_bad_record, ("fail", "skip"))

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> DatagenConfig:
        """Rebuilds the config from its exec property (JSON of `dataclasses.asdict`) with the
        loader of the pipeline YAML, as TrainerConfig.from_dict does."""
        return config_loader.build(cls, data, "datagen config")
