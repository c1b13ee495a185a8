"""The `trainer.ranking` section: how the exported model ranks a query's candidate list.

One section for first-stage fusion and pseudo-relevance feedback, which rankcore/ranking.py
implements once for the Trainer's choice (run_fn.choose_fusion), the RankingEvaluator and the
served `rank_candidates` signature.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from rankcore import feedback as feedback_lib
from trainer_module.config_rules import choice as _choice
from trainer_module.config_rules import require as _require

FUSION_MODES = ("none", "tuned", "fixed")
FEEDBACK_MODES = ("none", "tuned", "fixed")


@dataclass
class FusionConfig:
    """First-stage score fusion (rankcore/fusion.py): per query, min-max normalise the
    reranker's and the first stage's scores and rank by alpha * reranker + (1 - alpha) * first
    stage (capreolus's interpolate_runs)."""

    # tuned: alpha chosen on the dev queries after training (grid 0, 0.05, .., 1, ties to the
    # larger alpha); fixed: `alpha`; none: the reranker's scores alone.
    mode: str = "tuned"
    alpha: float = 0.5  # the reranker's weight, in [0, 1]; used with mode fixed

    def __post_init__(self) -> None:
        _choice(self.mode, "ranking.fusion.mode", FUSION_MODES)
        _require(0.0 <= self.alpha <= 1.0, "ranking.fusion.alpha", "must be in [0, 1]")


@dataclass
class FeedbackConfig:
    """Pseudo-relevance feedback (rankcore/feedback.py; dual_encoder only): before scoring a
    query's candidates, each candidate's vector moves towards its nearest other candidates and
    the query's towards the top candidates."""

    # tuned: the query's top 3, 5 or 10 at weight 0.5, 1 or 2, with 0 or 5 neighbours at 0.3 or
    # 0.6, or none of it, chosen on the dev queries together with alpha (needs fusion mode
    # tuned); fixed: the values below; none: off.
    mode: str = "none"
    # tuned and fixed: the query's feedback documents are the first stage's top (first_stage),
    # or the top of a first pass ranked by the model's own score fused with the first stage's
    # at the model's alpha (fused: feedback from the better ranking; alpha is tuned with it).
    source: str = "first_stage"
    docs: int = 3  # fixed: the query moves towards the mean of this many top documents
    weight: float = 0.5  # fixed: by this weight (0: the query does not move)
    neighbours: int = 0  # fixed: each candidate towards the mean of this many nearest candidates
    neighbour_weight: float = 0.3  # fixed: by this weight

    def __post_init__(self) -> None:
        _choice(self.mode, "ranking.feedback.mode", FEEDBACK_MODES)
        _choice(self.source, "ranking.feedback.source", feedback_lib.SOURCES)
        for name in ("docs", "weight", "neighbours", "neighbour_weight"):
            _require(getattr(self, name) >= 0, f"ranking.feedback.{name}", "must be >= 0")
        _require(
            self.mode != "fixed" or feedback_lib.is_on(self.setting()),
            "ranking.feedback.mode",
            "fixed changes nothing: set docs and weight, or neighbours and neighbour_weight, "
            "above 0",
        )

    def setting(self) -> dict:
        """The rankcore/feedback.py setting of mode fixed."""
        return feedback_lib.setting(
            self.docs, self.weight, self.neighbours, self.neighbour_weight, self.source
        )


@dataclass
class RankingConfig:
    """How the exported model ranks a query's candidate list (the rank_candidates signature,
    the RankingEvaluator): fused with the first stage, with or without feedback."""

    fusion: FusionConfig = field(default_factory=FusionConfig)
    feedback: FeedbackConfig = field(default_factory=FeedbackConfig)

    def __post_init__(self) -> None:
        _require(
            self.feedback.mode != "tuned" or self.fusion.mode == "tuned",
            "ranking.feedback.mode",
            "tuned needs ranking.fusion.mode tuned (it is chosen on the dev queries with alpha)",
        )
        _require(
            self.feedback.mode != "fixed" or self.fusion.mode != "none",
            "ranking.feedback.mode",
            "fixed needs ranking.fusion.mode tuned or fixed (the model carries it with its fusion)",
        )
