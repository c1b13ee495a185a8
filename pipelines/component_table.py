"""The pipeline's components, one row each: what every part of the pipelines layer reads.

A row holds the component's id (the DAG node id: the keys of runner.kubeflow.components, the
KFP task names, the names in the console), its class (by import path), how it is wired
(constructor arguments from the config and the components before it), the name the KFP UI shows
with runner.kubeflow.display_names, the key figure on its console line, and the artifact types
it introduces (schema title -> class path, for the KFP entrypoint). Before this table the same
list lived in five places (create_pipeline, pipelines/config.py COMPONENT_IDS,
kubeflow_runner.DISPLAY_NAMES, console.key_figure, kfp_entrypoint.ARTIFACT_TYPES); adding a
component is now its package and a row here.

Light on purpose: pipelines/kfp_entrypoint.py imports this module in every task's container
before TFX is imported, and pipelines/config.py imports it too. So component classes are import
paths (imported by pipelines/pipeline.py create_components) and the wiring functions import
TFX's protos when they are called.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pipelines.console import figures
from rankcore import folds

if TYPE_CHECKING:
    from pipelines.config import PipelineConfig

RUN_FN = "trainer_module.run_fn.run_fn"
TUNER_FN = "trainer_module.tuning.tuner_fn"


@dataclass(frozen=True)
class Wiring:
    """What a row's `args` builds its component's constructor arguments from."""

    config: PipelineConfig
    built: dict[str, Any]  # the components built so far, by id
    schema_file: str  # where the components read the examples' schema
    fold: int | None = None  # the fold branch a `per_fold` row's copy is built for

    @property
    def num_folds(self) -> int:
        """evaluator.cross_validation.folds (0: no cross-validation)."""
        return self.config.evaluator.cross_validation.folds

    def output(self, component_id: str, key: str) -> Any:
        return self.built[component_id].outputs[key]

    def outputs_if_built(self, component_id: str, key: str) -> dict[str, Any]:
        """{key: that output} when the component is in the DAG (its row's `include` held),
        else {}: the constructor argument of an optional input."""
        return {key: self.output(component_id, key)} if component_id in self.built else {}


@dataclass(frozen=True)
class ComponentRow:
    """One component of the pipeline (see the module docstring)."""

    id: str
    component_class: str  # import path, e.g. "components.example_gate.ExampleGate"
    args: Callable[[Wiring], dict[str, Any]]  # constructor arguments
    display_name: str  # the KFP UI's name (runner.kubeflow.display_names)
    after: tuple[str, ...] = ()  # ids it runs after without consuming their outputs
    key_figure: figures.KeyFigure | None = None  # on its console line when it finishes
    artifact_types: dict[str, str] = field(default_factory=dict)  # title -> class path
    # A Beam executor class (import path) replacing the component's own, same inputs/outputs.
    executor_class: str | None = None
    # With cross-validation the row is also built once per fold branch i, as node
    # rankcore.folds.node_id(id, i), with Wiring.fold = i (runs in parallel on Kubeflow).
    per_fold: bool = False
    # Whether the component is in the DAG for a config (None: always). A row left out builds
    # no node; the rows after it wire its outputs with Wiring.outputs_if_built.
    include: Callable[[PipelineConfig], bool] | None = None

    def included(self, config: PipelineConfig) -> bool:
        return self.include is None or self.include(config)

    def nodes(self, num_folds: int) -> list[tuple[int | None, str]]:
        """(fold branch, DAG node id) of each node this row builds: (None, its id), then its
        fold copies."""
        copies = range(num_folds) if self.per_fold else ()
        return [(None, self.id), *((i, folds.node_id(self.id, i)) for i in copies)]


def corpus_encoders(config: PipelineConfig) -> list[Any]:
    """The EncoderSpecs the CorpusEncoder embeds the corpus with: dense hybrid retrieval's
    checkpoint at datagen.max_doc_length (datagen.hybrid.checkpoint_dir), then the parts of
    the Trainer recipe's frozen document tower, each once. Empty: the component is left out."""
    from components.ranking_datagen.dense import corpus_encoder_spec
    from trainer_module.recipes import corpus_tower

    specs = []
    if config.datagen.hybrid.checkpoint_dir:
        specs.append(
            corpus_encoder_spec(config.datagen.hybrid.checkpoint_dir, config.datagen.max_doc_length)
        )
    for trainer in trainer_configs(config):
        tower = corpus_tower(trainer, config.datagen.max_doc_length)
        specs += [spec for spec, _ in tower.parts] if tower is not None else []
    return list(dict.fromkeys(specs))


def trainer_configs(config: PipelineConfig) -> list[Any]:
    """The trainer section, then with a Tuner each combination of its space it may train
    (trainer_module/tuning_config.py): every encoder any of them reads is embedded once."""
    if not config.tuner.enabled:
        return [config.trainer]
    from trainer_module.config import TrainerConfig
    from trainer_module.tuning_config import apply_values, combinations

    base = dataclasses.asdict(config.trainer)
    return [config.trainer] + [
        TrainerConfig.from_dict(apply_values(base, values))
        for values in combinations(config.tuner.space)
    ]


def _corpus_encoder(w: Wiring) -> dict[str, Any]:
    from components.corpus_encoder.config import DocumentsConfig

    coll, datagen = w.config.collection, w.config.datagen
    documents = DocumentsConfig(
        documents=coll.documents,
        documents_format=coll.documents_format,
        allow_empty_documents=coll.allow_empty_documents,
        on_bad_record=datagen.on_bad_record,
        # Hybrid retrieval's case folding, else the examples' (pipelines/config_checks.py
        # check_corpus_case: the two agree when both read the vectors).
        lowercase=datagen.hybrid.lowercase
        if datagen.hybrid.checkpoint_dir
        else datagen.vocab.lowercase,
        batch_size=datagen.hybrid.batch_size,
    )
    return {"documents": documents, "encoders": corpus_encoders(w.config)}


def _corpus_vectors(w: Wiring) -> dict[str, Any]:
    """The optional `corpus_vectors` input of RankingDataGen, the Trainers and the evaluator."""
    return w.outputs_if_built("CorpusEncoder", "corpus_vectors")


def _datagen(w: Wiring) -> dict[str, Any]:
    return {
        "collection": dataclasses.asdict(w.config.collection),
        "datagen": dataclasses.asdict(w.config.datagen),
        "cross_validation_folds": w.num_folds,
        # Only hybrid retrieval reads them there: otherwise RankingDataGen need not wait for them.
        **(_corpus_vectors(w) if w.config.datagen.hybrid.checkpoint_dir else {}),
    }


def trainer_splits(w: Wiring) -> tuple[list[str], list[str]]:
    """(train splits, dev splits) of the Trainer being built: train/dev without
    cross-validation; with it, fold branch w.fold's folds, or for the final (pushed) model
    every fold but datagen.split.dev_fold, which is its dev fold (rankcore/folds.py)."""
    if not w.num_folds:
        return ["train"], ["dev"]
    if w.fold is None:
        branch = folds.final_branch(w.config.datagen.split.dev_fold, w.num_folds)
    else:
        branch = folds.branch(w.fold, w.num_folds)
    return branch.train_splits, [branch.dev_split]


def _training_inputs(w: Wiring) -> dict[str, Any]:
    """What the Trainer and the Tuner of one branch both read: the examples of its train and
    dev splits only (never the evaluated split), the TransformGraph, the schema, the trainer
    section, the corpus vectors and the qrels artifact, of which run_fn reads its dev splits'
    judgments only (`dev_splits`: the dev metric counts every judgment, as the evaluator)."""
    from tfx import v1 as tfx

    config = w.config
    train, dev = trainer_splits(w)
    return {
        "examples": w.output("RankingDataGen", "examples"),
        "transform_graph": w.output("RankingDataGen", "transform_graph"),
        "schema": w.output("ImportSchemaGen", "schema"),
        "train_args": tfx.proto.TrainArgs(splits=train, num_steps=config.trainer.train_steps),
        "eval_args": tfx.proto.EvalArgs(splits=dev),
        "custom_config": {
            "trainer": dataclasses.asdict(config.trainer),
            "max_query_length": config.datagen.max_query_length,
            "max_doc_length": config.datagen.max_doc_length,
            "dev_splits": dev,
        },
        "qrels": w.output("RankingDataGen", "qrels"),
        **_corpus_vectors(w),
    }


def _branch_node(w: Wiring, component_id: str) -> str:
    """The node id of `component_id`'s copy on the branch being built."""
    return component_id if w.fold is None else folds.node_id(component_id, w.fold)


def _tuner(w: Wiring) -> dict[str, Any]:
    inputs = _training_inputs(w)
    inputs["custom_config"]["tuner"] = dataclasses.asdict(w.config.tuner)
    return {"tuner_fn": TUNER_FN, **inputs}


# Trainer keys (below `trainer.`) that decide the frozen parts of a dual encoder's vectors.
_FROZEN_PART_KEYS = ("recipe.", "model", "dual_encoder.checkpoint_dir")


def query_tower_only(w: Wiring) -> bool:
    """Whether the Trainer being built exports its trained query tower only: a fold branch's
    (its model is evaluated, never served; the evaluator takes the frozen parts of its vectors
    from the served model, trainer_module/export.py export_query_tower), unless a Tuner may
    choose other frozen parts on a branch than on the final one (tuner.space with a key of
    _FROZEN_PART_KEYS), where the fold models are exported whole."""
    if w.fold is None:
        return False
    tuned = w.config.tuner.space if _branch_node(w, "Tuner") in w.built else {}
    return not any(key.startswith(_FROZEN_PART_KEYS) for key in tuned)


def _trainer(w: Wiring) -> dict[str, Any]:
    tuner = _branch_node(w, "Tuner")
    chosen = (
        {"hyperparameters": w.output(tuner, "best_hyperparameters")} if tuner in w.built else {}
    )
    training = _training_inputs(w)
    if query_tower_only(w):
        training["custom_config"]["query_tower_only"] = True  # trainer_module QUERY_TOWER_ONLY
    return {"run_fn": RUN_FN, **training, **chosen}


def _evaluator(w: Wiring) -> dict[str, Any]:
    from components.ranking_evaluator.constants import FOLD_MODEL, FOLD_MODEL_RUN

    # With cross-validation each fold's eval split is ranked by its fold branch's model.
    fold_models = {
        key.format(fold=i): w.output(folds.node_id("Trainer", i), output)
        for i in range(w.num_folds)
        for key, output in ((FOLD_MODEL, "model"), (FOLD_MODEL_RUN, "model_run"))
    }
    return {
        **fold_models,
        "examples": w.output("RankingDataGen", "examples"),
        "model": w.output("Trainer", "model"),
        "qrels": w.output("RankingDataGen", "qrels"),
        "first_stage_run": w.output("RankingDataGen", "first_stage_run"),
        "model_run": w.output("Trainer", "model_run"),  # training curves for the report
        "evaluator": dataclasses.asdict(w.config.evaluator),
        "push_destination": w.config.pusher.destination,
        **_corpus_vectors(w),
    }


def _pusher(w: Wiring) -> dict[str, Any]:
    from tfx import v1 as tfx

    config = w.config
    return {
        "model": w.output("Trainer", "model"),
        "model_blessing": w.output("RankingEvaluator", "blessing"),
        "push_destination": tfx.proto.PushDestination(
            filesystem=tfx.proto.PushDestination.Filesystem(
                base_directory=config.pusher.destination
            )
        ),
        "evaluation": w.output("RankingEvaluator", "evaluation"),
        "datagen_summary": w.output("RankingDataGen", "summary"),
        # Without `source` (the config file's path on the machine that built the pipeline).
        "model_card_config": {k: v for k, v in dataclasses.asdict(config).items() if k != "source"},
    }


# In pipeline order (each row's inputs come from rows above it).
COMPONENTS: tuple[ComponentRow, ...] = (
    # Only when something reads corpus vectors (corpus_encoders): not for KNRM or the demo.
    ComponentRow(
        "CorpusEncoder",
        "components.corpus_encoder.component.CorpusEncoder",
        _corpus_encoder,
        "Encode corpus",
        key_figure=figures.CORPUS_ENCODER,
        artifact_types={"rankpipe.CorpusVectors": "components.artifacts.CorpusVectors"},
        include=lambda config: bool(corpus_encoders(config)),
    ),
    ComponentRow(
        "RankingDataGen",
        "components.ranking_datagen.component.RankingDataGen",
        _datagen,
        "Generate ranking data",
        key_figure=figures.DATAGEN,
        artifact_types={
            "rankpipe.Qrels": "components.artifacts.Qrels",
            "rankpipe.TrecRun": "components.artifacts.TrecRun",
            "rankpipe.Vocabulary": "components.artifacts.Vocabulary",
            "rankpipe.DatagenSummary": "components.artifacts.DatagenSummary",
        },
    ),
    ComponentRow(
        "StatisticsGen",
        "tfx.v1.components.StatisticsGen",
        lambda w: {"examples": w.output("RankingDataGen", "examples")},
        "Compute statistics",
        # TFX's executor, with small inputs in process (docs/speed.md).
        executor_class="components.statistics_gen.Executor",
    ),
    ComponentRow(
        "ImportSchemaGen",
        "tfx.v1.components.ImportSchemaGen",
        lambda w: {"schema_file": w.schema_file},
        "Import schema",
    ),
    ComponentRow(
        "ExampleValidator",
        "tfx.v1.components.ExampleValidator",
        lambda w: {
            "statistics": w.output("StatisticsGen", "statistics"),
            "schema": w.output("ImportSchemaGen", "schema"),
        },
        "Validate examples",
    ),
    # ExampleValidator only records anomalies; the gate turns them into a stop.
    ComponentRow(
        "ExampleGate",
        "components.example_gate.ExampleGate",
        lambda w: {"anomalies": w.output("ExampleValidator", "anomalies")},
        "Stop on anomalies",
    ),
    # Only with tuner.max_trials > 0: one per branch, on that branch's train and dev splits.
    ComponentRow(
        "Tuner",
        # TFX's Tuner with the optional corpus_vectors input; a trial is a whole Trainer run.
        "components.ranking_tuner.component.RankingTuner",
        _tuner,
        "Tune recipe",
        after=("ExampleGate",),
        key_figure=figures.TUNER,
        per_fold=True,
        include=lambda config: config.tuner.enabled,
    ),
    ComponentRow(
        "Trainer",
        # TFX's Trainer with the optional corpus_vectors input (its URI reaches the run_fn).
        "components.ranking_trainer.component.RankingTrainer",
        _trainer,
        "Train reranker",
        after=("ExampleGate",),
        key_figure=figures.TRAINER,
        per_fold=True,
    ),
    ComponentRow(
        "RankingEvaluator",
        "components.ranking_evaluator.component.RankingEvaluator",
        _evaluator,
        "Evaluate and bless",
        key_figure=figures.EVALUATOR,
        artifact_types={
            "system.HTML": "components.ranking_evaluator.component.HtmlReport",
            "system.Markdown": "components.ranking_evaluator.component.MarkdownReport",
            "system.Metrics": "components.ranking_evaluator.component.ScalarMetrics",
        },
    ),
    ComponentRow(
        "Pusher",
        "components.ranking_pusher.component.RankingPusher",
        _pusher,
        "Push model",
        key_figure=figures.PUSHER,
    ),
)

BY_ID: dict[str, ComponentRow] = {row.id: row for row in COMPONENTS}


def row_of(node_id: str) -> ComponentRow | None:
    """The row a DAG node id was built from (a fold copy's too), None for none."""
    return BY_ID.get(folds.parse_node_id(node_id)[0])


def display_name(node_id: str, name: str | None = None) -> str:
    """What the KFP UI calls a node: `name` (default: its row's display name), with the fold
    of a fold copy."""
    component_id, fold = folds.parse_node_id(node_id)
    row = BY_ID.get(component_id)
    name = name or (row.display_name if row else node_id)
    return name if fold is None else f"{name} (fold {fold})"


COMPONENT_IDS: tuple[str, ...] = tuple(BY_ID)
# Schema title -> class path of rankpipe's artifact types, all rows together.
ARTIFACT_TYPES: dict[str, str] = {t: p for row in COMPONENTS for t, p in row.artifact_types.items()}
DISPLAY_NAMES: dict[str, str] = {row.id: row.display_name for row in COMPONENTS}
