"""The rankpipe DAG.

RankingDataGen -> StatisticsGen -> ImportSchemaGen -> ExampleValidator -> ExampleGate ->
Trainer -> RankingEvaluator (baseline: the model served under pusher.destination) -> Pusher

The baseline is found by the evaluator itself (components/ranking_evaluator/baseline.py), not
by a TFX Resolver: the open-source KFP backend cannot run resolver nodes, so one mechanism
serves LocalDagRunner, Kubeflow and Vertex alike.
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


def create_components(config: PipelineConfig, schema_file: str | None = None) -> list:
    """The pipeline's components, wired; `create_pipeline` adds the runner-level settings.

    `schema_file`: where the components will read the examples' schema (default: this
    checkout's; the Kubeflow compiler passes the path inside the image)."""
    datagen = RankingDataGen(
        collection=dataclasses.asdict(config.collection),
        datagen=dataclasses.asdict(config.datagen),
    )
    statistics_gen = tfx.components.StatisticsGen(examples=datagen.outputs["examples"])
    schema_gen = tfx.components.ImportSchemaGen(schema_file=schema_file or str(SCHEMA_FILE))
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
    evaluator = RankingEvaluator(
        examples=datagen.outputs["examples"],
        model=trainer.outputs["model"],
        qrels=datagen.outputs["qrels"],
        first_stage_run=datagen.outputs["first_stage_run"],
        model_run=trainer.outputs["model_run"],  # training curves for the report
        evaluator=dataclasses.asdict(config.evaluator),
        push_destination=config.pusher.destination,
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
        # Without `source` (the config file's path on the machine that built the pipeline).
        model_card_config={k: v for k, v in dataclasses.asdict(config).items() if k != "source"},
    ).with_id("Pusher")
    return [
        datagen,
        statistics_gen,
        schema_gen,
        example_validator,
        example_gate,
        trainer,
        evaluator,
        pusher,
    ]


def create_pipeline(
    config: PipelineConfig,
    metadata_connection_config=None,
    schema_file: str | None = None,
    beam_pipeline_args: list[str] | None = None,
) -> tfx.dsl.Pipeline:
    """Builds the TFX pipeline for a loaded config (see pipelines/config.py).

    `schema_file` and `beam_pipeline_args` override what suits a run on this machine (the
    Kubeflow compiler passes in-image paths and unresolved worker counts)."""
    return tfx.dsl.Pipeline(
        pipeline_name=config.runner.pipeline_name,
        pipeline_root=config.runner.pipeline_root,
        components=create_components(config, schema_file),
        enable_cache=config.runner.enable_cache,
        metadata_connection_config=metadata_connection_config,
        beam_pipeline_args=(
            config.runner.beam.pipeline_args() if beam_pipeline_args is None else beam_pipeline_args
        ),
    )
