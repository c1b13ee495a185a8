"""The rankpipe DAG.

RankingDataGen -> StatisticsGen -> ImportSchemaGen -> ExampleValidator -> ExampleGate ->
Trainer -> RankingEvaluator (baseline: latest blessed model) -> Pusher
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from tfx import v1 as tfx

from components.example_gate import ExampleGate
from components.ranking_datagen.component import RankingDataGen
from components.ranking_evaluator.component import RankingEvaluator
from components.ranking_pusher.component import RankingPusher
from pipelines.config import PipelineConfig

SCHEMA_FILE = (
    Path(__file__).resolve().parent.parent / "schemas" / "ranking_examples" / "schema.pbtxt"
)
RUN_FN = "trainer_module.run_fn.run_fn"


def create_components(config: PipelineConfig) -> list:
    """The pipeline's components, wired; `create_pipeline` adds the runner-level settings."""
    datagen = RankingDataGen(
        collection=dataclasses.asdict(config.collection),
        datagen=dataclasses.asdict(config.datagen),
    )
    statistics_gen = tfx.components.StatisticsGen(examples=datagen.outputs["examples"])
    schema_gen = tfx.components.ImportSchemaGen(schema_file=str(SCHEMA_FILE))
    example_validator = tfx.components.ExampleValidator(
        statistics=statistics_gen.outputs["statistics"], schema=schema_gen.outputs["schema"]
    )
    # ExampleValidator only records anomalies; the gate turns them into a stop.
    example_gate = ExampleGate(anomalies=example_validator.outputs["anomalies"])
    trainer = tfx.components.Trainer(
        run_fn=RUN_FN,
        examples=datagen.outputs["examples"],
        transform_graph=datagen.outputs["transform_graph"],
        schema=schema_gen.outputs["schema"],
        train_args=tfx.proto.TrainArgs(splits=["train"], num_steps=config.trainer.train_steps),
        eval_args=tfx.proto.EvalArgs(splits=["dev"]),
        custom_config={
            "trainer": dataclasses.asdict(config.trainer),
            "max_query_length": config.datagen.max_query_length,
            "max_doc_length": config.datagen.max_doc_length,
        },
    )
    trainer.add_upstream_node(example_gate)
    baseline_resolver = tfx.dsl.Resolver(
        strategy_class=tfx.dsl.experimental.LatestBlessedModelStrategy,
        model=tfx.dsl.Channel(type=tfx.types.standard_artifacts.Model),
        model_blessing=tfx.dsl.Channel(type=tfx.types.standard_artifacts.ModelBlessing),
    ).with_id("latest_blessed_model_resolver")
    evaluator = RankingEvaluator(
        examples=datagen.outputs["examples"],
        model=trainer.outputs["model"],
        qrels=datagen.outputs["qrels"],
        first_stage_run=datagen.outputs["first_stage_run"],
        baseline_model=baseline_resolver.outputs["model"],
        evaluator=dataclasses.asdict(config.evaluator),
    )
    pusher = RankingPusher(
        model=trainer.outputs["model"],
        model_blessing=evaluator.outputs["blessing"],
        push_destination=tfx.proto.PushDestination(
            filesystem=tfx.proto.PushDestination.Filesystem(
                base_directory=config.pusher.destination
            )
        ),
        evaluation=evaluator.outputs["evaluation"],
        datagen_summary=datagen.outputs["summary"],
        model_card_config=dataclasses.asdict(config),
    ).with_id("Pusher")
    return [
        datagen,
        statistics_gen,
        schema_gen,
        example_validator,
        example_gate,
        trainer,
        baseline_resolver,
        evaluator,
        pusher,
    ]


def create_pipeline(config: PipelineConfig, metadata_connection_config=None) -> tfx.dsl.Pipeline:
    """Builds the TFX pipeline for a loaded config (see pipelines/config.py)."""
    return tfx.dsl.Pipeline(
        pipeline_name=config.runner.pipeline_name,
        pipeline_root=config.runner.pipeline_root,
        components=create_components(config),
        enable_cache=config.runner.enable_cache,
        metadata_connection_config=metadata_connection_config,
        beam_pipeline_args=config.runner.beam.pipeline_args(),
    )
