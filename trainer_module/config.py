"""Typed configuration of the Trainer (the `trainer:` section of the pipeline YAML).

Plain dataclasses only (no framework types) so the pipeline config can embed, serialize
(`dataclasses.asdict`) and rebuild (`TrainerConfig.from_dict`) it.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, ClassVar

from rankcore import config_loader
from trainer_module.config_rules import choice as _choice
from trainer_module.config_rules import require as _require
from trainer_module.config_rules import training_only
from trainer_module.loss_registry import LOSS_NAMES
from trainer_module.models.registry import MODEL_NAMES, PRETRAINED_MODEL_NAMES, offers_towers
from trainer_module.ranking_config import RankingConfig
from trainer_module.recipes.config import RecipeConfig

# Name lists from the registries (never kept twice); both import TensorFlow only to build.
MODELS = MODEL_NAMES
LOSSES = LOSS_NAMES
DECAYS = ("linear", "cosine", "exponential")
MIXED_PRECISION = ("auto", "off", "float16", "bfloat16")
STRATEGIES = ("auto", "cpu", "mirrored", "multi_worker", "tpu")
POINTWISE_TARGETS = ("binary", "graded")


def _check_kernel_model(cfg: Any, section: str, **layers: tuple[bool, str]) -> None:
    """The checks KNRM and Conv-KNRM share (an embedding table, RBF kernels), in field order:
    embedding_dim, then the model's own `layers` ({name: (valid, message)}), then the kernels."""
    _require(cfg.embedding_dim > 0, f"{section}.embedding_dim", "must be > 0")
    for name, (valid, message) in layers.items():
        _require(valid, f"{section}.{name}", message)
    _require(cfg.n_kernels >= 2, f"{section}.n_kernels", "must be >= 2")
    _require(cfg.sigma > 0, f"{section}.sigma", "must be > 0")
    _require(cfg.exact_sigma > 0, f"{section}.exact_sigma", "must be > 0")


@dataclass
class KnrmConfig:
    """KNRM (Xiong et al., 2017): RBF kernel pooling over a cosine translation matrix."""

    # Width of the word-embedding table; embedding_file's vectors of another width are skipped.
    embedding_dim: int = 128
    n_kernels: int = 11  # mu = 1.0 (exact match) plus n_kernels - 1 soft-match kernels
    # Width (standard deviation, in cosine units) of each soft-match RBF kernel; their means
    # evenly cover [-1, 1].
    sigma: float = 0.1
    # Width of the exact-match kernel (mu = 1.0): small, so only cosines of ~1 count.
    exact_sigma: float = 0.001
    # Train the word embeddings with the rest of the model (false: they keep their
    # initialisation, random or embedding_file's vectors).
    trainable_embeddings: bool = True

    def __post_init__(self) -> None:
        _check_kernel_model(self, "knrm")


@dataclass
class ConvKnrmConfig:
    """Conv-KNRM (Dai et al., 2018): KNRM over cross-matched 1..max_ngram n-gram embeddings."""

    # Width of the word-embedding table; embedding_file's vectors of another width are skipped.
    embedding_dim: int = 128
    # Output channels of each n-gram convolution (the width of an n-gram's vector).
    filters: int = 128
    # Longest n-gram: query and document n-grams of every length 1..max_ngram are matched with
    # each other (max_ngram^2 similarity matrices, each pooled by the kernels).
    max_ngram: int = 3
    # RBF kernels per similarity matrix: mu = 1.0 (exact match) plus n_kernels - 1 soft-match.
    n_kernels: int = 11
    # Width (standard deviation, in cosine units) of each soft-match RBF kernel.
    sigma: float = 0.1
    # Width of the exact-match kernel (mu = 1.0).
    exact_sigma: float = 0.001
    # Train the word embeddings with the rest of the model (false: they keep their
    # initialisation, random or embedding_file's vectors).
    trainable_embeddings: bool = True

    def __post_init__(self) -> None:
        _check_kernel_model(
            self,
            "conv_knrm",
            filters=(self.filters > 0, "must be > 0"),
            max_ngram=(self.max_ngram >= 1, "must be >= 1"),
        )


@dataclass
class TransformerConfig:
    """Small cross-encoder trained from scratch: [CLS] q [SEP] d [SEP] -> score."""

    hidden_size: int = 256  # width of the token vectors (embeddings and every layer)
    num_layers: int = 4  # encoder layers (self-attention + feed-forward)
    num_heads: int = 4  # attention heads per layer; hidden_size must be divisible by it
    intermediate_size: int = 1024  # inner width of each layer's GELU feed-forward block
    # Dropout rate on the embeddings and on each attention and feed-forward output (training
    # only).
    dropout: float = 0.1
    # Rows of the learned position table: must cover [CLS] q [SEP] d [SEP], i.e.
    # max_query_length + max_doc_length + 3 (checked when the model is built).
    max_position: int = 512

    def __post_init__(self) -> None:
        _require(self.hidden_size > 0, "transformer.hidden_size", "must be > 0")
        _require(self.num_layers >= 1, "transformer.num_layers", "must be >= 1")
        _require(self.num_heads >= 1, "transformer.num_heads", "must be >= 1")
        _require(
            self.hidden_size % self.num_heads == 0,
            "transformer.hidden_size",
            f"must be divisible by num_heads={self.num_heads}",
        )
        _require(self.intermediate_size > 0, "transformer.intermediate_size", "must be > 0")
        _require(0.0 <= self.dropout < 1.0, "transformer.dropout", "must be in [0, 1)")
        _require(self.max_position >= 8, "transformer.max_position", "must be >= 8")


@dataclass
class BertConfig:
    """BERT-family cross-encoder initialised from a local Hugging Face checkpoint directory
    (config.json, model.safetensors, vocab.txt): [CLS] q [SEP] d [SEP] -> [CLS] head -> score.

    The architecture (layers, sizes, activation, LayerNorm eps) comes from config.json.
    """

    # Directory (local or any tf.io.gfile filesystem) with config.json, model.safetensors and
    # vocab.txt. Required for model=bert; set datagen.vocab.vocab_file to its vocab.txt.
    checkpoint_dir: str | None = None
    head_dropout: float = 0.1  # dropout on the [CLS] vector before the score layer
    # Encoder hidden-state dropout; None keeps config.json's hidden_dropout_prob.
    hidden_dropout: float | None = None
    # Attention-probability dropout; None keeps config.json's attention_probs_dropout_prob.
    attention_dropout: float | None = None
    # Tanh pooler (dense) on [CLS] before the score layer, loaded from the checkpoint's
    # pooler.dense when present (then trained at encoder_learning_rate), else newly initialised.
    pooler: bool = True

    def __post_init__(self) -> None:
        _require(0.0 <= self.head_dropout < 1.0, "bert.head_dropout", "must be in [0, 1)")
        for name in ("hidden_dropout", "attention_dropout"):
            value = getattr(self, name)
            _require(value is None or 0.0 <= value < 1.0, f"bert.{name}", "must be in [0, 1)")


@dataclass
class DualEncoderConfig:
    """Dual encoder (bi-encoder) from a local Hugging Face checkpoint directory (config.json,
    model.safetensors, vocab.txt), used as sentence-transformers uses all-MiniLM-L6-v2: query and
    document encoded separately (shared weights), mean pooling, L2 norm, score = cosine.
    """

    # The frozen-documents recipe's keys, now in its own section (trainer.recipe).
    MOVED_KEYS: ClassVar[dict[str, str]] = {
        "frozen_documents": "../recipe.type: frozen_documents",
        "companion_checkpoint_dir": "../recipe.frozen_documents.companion_checkpoint_dir",
        "companion_weight": "../recipe.frozen_documents.companion_weight",
    }

    # Directory with config.json, model.safetensors and vocab.txt. Required for
    # model=dual_encoder; set datagen.vocab.vocab_file to its vocab.txt.
    checkpoint_dir: str | None = None
    # Encoder hidden-state dropout; None keeps config.json's hidden_dropout_prob.
    hidden_dropout: float | None = None
    # Attention-probability dropout; None keeps config.json's attention_probs_dropout_prob.
    attention_dropout: float | None = None

    def __post_init__(self) -> None:
        for name in ("hidden_dropout", "attention_dropout"):
            value = getattr(self, name)
            _require(
                value is None or 0.0 <= value < 1.0, f"dual_encoder.{name}", "must be in [0, 1)"
            )


@dataclass
class BucketingConfig:
    """Length-bucketed batching with a token budget (tensor2tensor scheme).

    An element's length is max_query_length + its longest doc (after truncation). Buckets have
    geometric boundaries from max_query_length + min_length by factor length_factor up to the
    longest possible length; a bucket holding lengths up to L gets micro-batches of
    max(1, budget // (L * group_size)) groups, budget = token_budget / replicas, so a padded
    micro-batch never exceeds the budget (unless one group alone does).
    """

    # Batch the train groups by length under token_budget instead of batch_size groups (not
    # with static_shapes).
    enabled: bool = False
    # Padded tokens (query + longest doc, times the group size, summed over the groups) one
    # micro-batch may hold over all replicas.
    token_budget: int = 16384
    # Tokens above max_query_length where the first bucket ends.
    min_length: int = 8
    length_factor: float = 1.1  # each bucket boundary is the previous one times this (> 1)

    def __post_init__(self) -> None:
        _require(self.token_budget > 0, "bucketing.token_budget", "must be > 0")
        _require(self.min_length >= 1, "bucketing.min_length", "must be >= 1")
        _require(self.length_factor > 1.0, "bucketing.length_factor", "must be > 1.0")


@dataclass
class TrainerConfig:
    # The flat keys of earlier versions, each now in a section (the loader names the new key).
    MOVED_KEYS: ClassVar[dict[str, str]] = {
        "fusion": "ranking.fusion.mode",
        "fusion_alpha": "ranking.fusion.alpha",
        "feedback": "ranking.feedback.mode",
        "feedback_from": "ranking.feedback.source",
        "feedback_docs": "ranking.feedback.docs",
        "feedback_weight": "ranking.feedback.weight",
        "feedback_neighbours": "ranking.feedback.neighbours",
        "feedback_neighbour_weight": "ranking.feedback.neighbour_weight",
    }

    # How the Trainer trains (trainer_module/recipes/, docs/trainer.md "Recipes"): a one-of
    # section, `type` and that recipe's own subsection.
    recipe: RecipeConfig = field(default_factory=RecipeConfig)

    # Model.

    model: str = "knrm"  # the reranker: knrm, conv_knrm, transformer, bert or dual_encoder
    knrm: KnrmConfig = field(default_factory=KnrmConfig)
    conv_knrm: ConvKnrmConfig = field(default_factory=ConvKnrmConfig)
    transformer: TransformerConfig = field(default_factory=TransformerConfig)
    bert: BertConfig = field(default_factory=BertConfig)
    dual_encoder: DualEncoderConfig = field(default_factory=DualEncoderConfig)
    # Optional word-embedding text file ("token v1 ... vd" per line, GloVe/word2vec text
    # format) to initialise the (Conv-)KNRM embedding table; tokens missing keep random init.
    embedding_file: str | None = None

    # Loss.

    # The training loss over each group's scores (recipe.type sampled_groups and
    # frozen_documents): pairwise_hinge, pairwise_logistic, pointwise_sigmoid or
    # listwise_softmax (softmax cross-entropy over the group).
    loss: str = training_only("pairwise_hinge")
    # pairwise_hinge: each (more relevant, less relevant) pair of a group costs
    # max(0, hinge_margin - (score difference)).
    hinge_margin: float = 1.0
    pointwise_target: str = "binary"  # binary: label > 0; graded: label / max_label
    # pointwise_target graded: the label that maps to target 1 (higher labels are clipped).
    max_label: float = 3.0
    # The scale of a dual encoder's cosine in its training softmax (recipe.type in_batch and
    # frozen_documents; sentence-transformers' MultipleNegativesRankingLoss uses 20).
    in_batch_scale: float = training_only(20.0)

    # How the exported model ranks a candidate list (`fusion` with the first stage, dense
    # pseudo-relevance `feedback`), chosen on the dev queries after training.
    ranking: RankingConfig = field(default_factory=RankingConfig)

    # Steps and batches. batch_size is the GLOBAL micro-batch (groups per forward pass over
    # all replicas); one optimizer step sees batch_size * grad_accumulation_steps groups.
    # Used when the Trainer's TrainArgs give no num_steps. 0 (pretrained models only) exports
    # the checkpoint as it is (zero-shot); fusion is still tuned.
    train_steps: int = 1000
    # Training groups (a query with its candidates) per micro-batch over all replicas;
    # divisible by the number of replicas.
    batch_size: int = training_only(32)
    # Candidates per batch when scoring or embedding the dev split (validation, fusion).
    eval_batch_size: int = 256
    # Micro-batches whose gradients are summed into one optimizer step.
    grad_accumulation_steps: int = training_only(1)
    shuffle_buffer: int = training_only(10000)  # training groups held by the shuffle buffer
    # Seeds the initial weights, dropout and the training data order (the same run twice
    # trains the same model).
    seed: int = 42
    bucketing: BucketingConfig = field(default_factory=BucketingConfig)
    static_shapes: bool = False  # pad every batch to max lengths (required on TPU)

    # Optimization.

    # Peak learning rate of the non-encoder variables (kernels, heads, ...).
    learning_rate: float = training_only(1e-3)
    # Peak learning rate of the variables matching encoder_patterns.
    encoder_learning_rate: float = training_only(1e-4)
    # Regexes (re.search) over variable names: the matching variables are the encoder,
    # trained at encoder_learning_rate.
    encoder_patterns: list[str] = field(default_factory=lambda: ["embedding", "encoder"])
    # Optimizer steps of linear warmup from 0 to the peak rates.
    warmup_steps: int = training_only(0)
    # Learning-rate decay from the end of warmup to the last step: linear or cosine (to
    # end_learning_rate_fraction of the peak) or exponential (to exponential_decay_rate).
    decay: str = training_only("linear")
    # linear/cosine floor, as a fraction of peak
    end_learning_rate_fraction: float = training_only(0.0)
    # exponential: lr factor reached at the last step
    exponential_decay_rate: float = training_only(0.01)
    weight_decay: float = training_only(0.01)  # AdamW's decoupled weight decay (0: plain Adam)
    # Regexes (re.search) over variable names exempt from weight decay.
    weight_decay_exclude: list[str] = field(
        default_factory=lambda: ["layer_norm", "LayerNorm", "bias"]
    )
    # Adam's epsilon (added to the root of the second moment)
    adam_epsilon: float = training_only(1e-6)
    clip_norm: float = training_only(1.0)  # 0 disables clipping
    # Regexes (re.search) over variable names: the matching variables are not trained.
    freeze_patterns: list[str] = field(default_factory=list)

    # Hardware.

    # auto: bfloat16 on TPU, on GPUs with native bf16 (compute capability >= 8) and, for the
    # pretrained transformers (bert, dual_encoder), on CPUs with native bf16 (AVX512_BF16 or
    # AMX in /proc/cpuinfo); else off (float32; quote it in YAML, "off"). float16 (explicit
    # only) uses dynamic loss scaling. Vectors and scores are served in float32 whatever the
    # policy.
    mixed_precision: str = "auto"
    # auto: TPU if tpu_name, MultiWorkerMirrored if TF_CONFIG names several tasks (the Trainer
    # run as replicas, runner.kubeflow.trainer_replicas), Mirrored if > 1 GPU, else default.
    strategy: str = "auto"
    # Cloud TPU name or grpc:// address (TPUClusterResolver); required for strategy tpu, and
    # with strategy auto it selects the TPU.
    tpu_name: str | None = None
    tpu_zone: str | None = None  # the TPU's zone (None: the resolver finds it)
    tpu_project: str | None = None  # the TPU's GCP project (None: the resolver finds it)

    # Checkpoints, validation, logging.

    checkpoint_every: int = 500  # steps between checkpoints (and at the last step)
    # Recent checkpoints kept for resuming (the best model is kept apart, whatever this is).
    keep_checkpoints: int = 3
    # Keep them once the model is exported. false: a finished Trainer keeps its SavedModel and
    # results only (checkpoints: 380 MB per Trainer on Cranfield); a Trainer that fails
    # or is killed before its export keeps them, and its retry resumes from them.
    keep_finished_checkpoints: bool = False
    validate_every: int = 500  # 0: validate once, at the end
    # trec_eval measure (e.g. ndcg_cut_10, map, P_5, recall_100) over the dev queries: picks
    # the best checkpoint, early stopping and the fusion and feedback.
    validation_metric: str = "ndcg_cut_10"
    # The smallest label that counts as relevant for binary measures (trec_eval -l).
    validation_relevance_level: int = 1
    early_stopping_patience: int = 0  # validations without improvement; 0 disables
    # Steps between log lines, TensorBoard train summaries and loss-curve points.
    log_every: int = 100
    max_loss: float = 1e4  # divergence guard: loss above this (or NaN/Inf) aborts

    def __post_init__(self) -> None:
        from trainer_module.recipes import check_config, check_moved

        check_moved(self)  # a value that moved into a recipe names its new place first
        _choice(self.model, "model", MODELS)
        _choice(self.loss, "loss", LOSSES)
        _choice(self.pointwise_target, "pointwise_target", POINTWISE_TARGETS)
        _choice(self.decay, "decay", DECAYS)
        _choice(self.mixed_precision, "mixed_precision", MIXED_PRECISION)
        _choice(self.strategy, "strategy", STRATEGIES)
        feedback = self.ranking.feedback.mode
        _require(
            feedback == "none" or offers_towers(self.model),
            "ranking.feedback.mode",
            f"{feedback} needs model=dual_encoder (it moves the query's and the documents' "
            "vectors)",
        )
        _require(self.in_batch_scale > 0, "in_batch_scale", "must be > 0")
        _require(self.hinge_margin > 0, "hinge_margin", "must be > 0")
        _require(self.max_label > 0, "max_label", "must be > 0")
        _require(
            self.train_steps >= 0,
            "train_steps",
            f"must be >= 1 (0 = zero-shot: only pretrained models {list(PRETRAINED_MODEL_NAMES)})",
        )
        _require(self.batch_size >= 1, "batch_size", "must be >= 1")
        _require(self.eval_batch_size >= 1, "eval_batch_size", "must be >= 1")
        _require(self.grad_accumulation_steps >= 1, "grad_accumulation_steps", "must be >= 1")
        _require(self.shuffle_buffer >= 1, "shuffle_buffer", "must be >= 1")
        _require(self.learning_rate > 0, "learning_rate", "must be > 0")
        _require(self.encoder_learning_rate > 0, "encoder_learning_rate", "must be > 0")
        _require(self.warmup_steps >= 0, "warmup_steps", "must be >= 0")
        _require(
            0.0 <= self.end_learning_rate_fraction <= 1.0,
            "end_learning_rate_fraction",
            "must be in [0, 1]",
        )
        _require(
            0.0 < self.exponential_decay_rate <= 1.0, "exponential_decay_rate", "must be in (0, 1]"
        )
        _require(self.weight_decay >= 0, "weight_decay", "must be >= 0")
        _require(self.adam_epsilon > 0, "adam_epsilon", "must be > 0")
        _require(self.clip_norm >= 0, "clip_norm", "must be >= 0 (0 disables)")
        _require(self.checkpoint_every >= 1, "checkpoint_every", "must be >= 1")
        _require(self.keep_checkpoints >= 1, "keep_checkpoints", "must be >= 1")
        _require(self.validate_every >= 0, "validate_every", "must be >= 0")
        _require(bool(self.validation_metric), "validation_metric", "must be non-empty")
        _require(self.early_stopping_patience >= 0, "early_stopping_patience", "must be >= 0")
        _require(self.log_every >= 1, "log_every", "must be >= 1")
        _require(self.max_loss > 0, "max_loss", "must be > 0")
        _require(self.strategy != "tpu" or bool(self.tpu_name), "tpu_name", "is required for tpu")
        _require(
            self.model != "bert" or bool(self.bert.checkpoint_dir),
            "bert.checkpoint_dir",
            "is required for model=bert",
        )
        _require(
            self.model != "dual_encoder" or bool(self.dual_encoder.checkpoint_dir),
            "dual_encoder.checkpoint_dir",
            "is required for model=dual_encoder",
        )
        check_config(self)  # the recipes' own rules (trainer_module/recipes/)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> TrainerConfig:
        """Strict build (unknown keys, wrong types and impossible values name the key), with
        the same loader as the pipeline YAML."""
        return config_loader.build(cls, data, "trainer config")
