"""What the RankingEvaluator's executor hands its library (evaluation.evaluate): the input
artifacts' paths, the exec properties and the output directories, as plain values, so that
the work (inputs.py, passes.py, measuring.py, outputs.py) never touches a TFX artifact."""

from __future__ import annotations

from dataclasses import dataclass, field

from components.ranking_evaluator.config import EvaluatorConfig


@dataclass(frozen=True)
class EvaluationRequest:
    """One evaluation: the config, the inputs and where the outputs go.

    `split_uris` maps every split of the examples artifact to its directory; `fold_models`
    maps each wired fold branch i < cross_validation.folds to its SavedModel directory and
    its Trainer's model_run directory (None when not wired). `examples_lineage` is the examples
    artifact's lineage record as stored (rankcore/lineage.py; "" when it has none)."""

    config: EvaluatorConfig
    examples_uri: str
    split_uris: dict[str, str]
    examples_lineage: str
    model_uri: str
    model_id: int
    model_dir: str  # the candidate's SavedModel (the Model artifact's serving model path)
    model_run: str | None  # the Trainer's model_run directory, if wired
    qrels_uri: str
    first_stage_run_uri: str
    push_destination: str  # the Pusher's base directory ("": no baseline)
    evaluation_dir: str
    blessing_dir: str
    candidate_run_dir: str
    ui_metrics_dir: str | None = None  # the system.Metrics artifact's directory, if wired
    fold_models: dict[int, tuple[str, str | None]] = field(default_factory=dict)
    # The CorpusEncoder's artifact (rankcore/corpus_vectors.py), if wired: the document
    # vectors of models with a frozen document tower (corpus_documents.py).
    corpus_vectors_uri: str | None = None

    def split_uri(self, split: str) -> str:
        """The directory of `split`; the error tfx's artifact_utils.get_split_uri gives when
        the examples have no such split."""
        if split not in self.split_uris:
            raise ValueError(
                f"Expected exactly one artifact with split {split!r}, but found matching "
                "artifacts []."
            )
        return self.split_uris[split]

    @property
    def split_label(self) -> str:
        """The evaluated split as metrics.json and the logs name it: with cross-validation
        every judged query is evaluated, each by its fold's model."""
        k = self.config.cross_validation.folds
        return self.config.split if not k else f"all ({k}-fold cross-validation)"
