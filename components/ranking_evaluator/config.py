"""Typed configuration of RankingEvaluator: the `evaluator:` section of the pipeline YAML.

Beside its owner (issue 19): pipelines/config.py composes it into PipelineConfig, and the
executor rebuilds it from its exec property with `from_dict` (rankcore.config_loader, the loader
of the pipeline YAML and of trainer_module/config.py), so the defaults live here only. Each
field's comment is its line in docs/config-reference.md.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rankcore import config_loader, folds


@dataclass
class CrossValidationConfig:
    # k-fold cross-validation (rankcore/folds.py, docs/evaluator.md): k Trainers, each ranks the
    # fold no query of which it saw; every judged query is evaluated and blessed on. 0: off
    # (one held-out split). k must equal datagen.split.num_folds (its kfold hash and seed).
    folds: int = 0

    def __post_init__(self) -> None:
        if self.folds:
            folds.check_folds(self.folds)


@dataclass
class EvaluatorConfig:
    # trec_eval measure names; mrr_cut_10 is MRR@10.
    measures: list[str] = field(
        default_factory=lambda: [
            "map",
            "ndcg",
            "ndcg_cut_5",
            "ndcg_cut_10",
            "ndcg_cut_20",
            "P_5",
            "P_10",
            "P_20",
            "recall_100",
            "recall_1000",
            "recip_rank",
            "Rprec",
            "bpref",
            "mrr_cut_10",
        ]
    )
    relevance_level: int = 1  # trec_eval -l: minimum grade counted relevant
    # The metric the blessing and the report lead with.
    main_metric: str = "ndcg_cut_10"
    split: str = "test"  # the held-out split evaluated (dev or test)
    # Absolute floors, e.g. {ndcg_cut_10: 0.2}.
    min_values: dict[str, float] = field(default_factory=dict)
    # Minimum change of main_metric vs the first stage: by default a model that ranks worse than
    # its own first stage is NOT BLESSED (null switches the rule off).
    min_delta_vs_first_stage: float | None = 0.0
    # Minimum change of main_metric vs the baseline (the model being served), when there is
    # one: by default a model worse than what users get today is NOT BLESSED (null: off).
    min_delta_vs_baseline: float | None = 0.0
    require_significance: bool = False  # the required gains must also be significant
    significance_level: float = 0.05  # p below which a change counts as significant
    randomization_trials: int = 10000  # paired randomization test permutations
    seed: int = 0  # randomization test seed
    batch_size: int = 256  # inference batch size
    cross_validation: CrossValidationConfig = field(default_factory=CrossValidationConfig)

    def __post_init__(self) -> None:
        if self.main_metric not in self.measures:
            raise ValueError(f"main_metric: {self.main_metric!r} is not in measures")
        if not 0 < self.significance_level < 1:
            raise ValueError("significance_level: must be in (0, 1)")
        config_loader.one_of("split", self.split, ("dev", "test"))
        config_loader.positive("batch_size", self.batch_size)

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> EvaluatorConfig:
        """Rebuilds the config from its exec property (JSON of `dataclasses.asdict`) with the
        loader of the pipeline YAML, as TrainerConfig.from_dict does."""
        return config_loader.build(cls, data, "evaluator config")
