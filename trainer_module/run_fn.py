"""TFX Trainer entry point (GenericExecutor): run_fn='trainer_module.run_fn.run_fn'."""

from __future__ import annotations

import logging
from typing import Any

import tensorflow as tf
import tensorflow_transform as tft

from trainer_module import hardware
from trainer_module.checkpointing import checkpoint_dir, run_fingerprint
from trainer_module.config import TrainerConfig
from trainer_module.export import export_serving_model
from trainer_module.models import hf_checkpoint
from trainer_module.task import RankingTask
from trainer_module.training import Controller, TrainResult, worker_dir, write_results

VOCAB_ASSET_NAME = "wordpiece"


def read_vocab(transform_graph_path: str) -> list[str]:
    """The WordPiece vocabulary the TransformGraph tokenizes with (its vocab asset)."""
    path = tft.TFTransformOutput(transform_graph_path).vocabulary_file_by_name(VOCAB_ASSET_NAME)
    with tf.io.gfile.GFile(path, "r") as f:
        return [line.rstrip("\n") for line in f]


def run_fn(fn_args: Any) -> TrainResult:
    """Trains (resuming if a previous attempt was killed), validates and exports the best model.

    fn_args.custom_config = {"trainer": TrainerConfig dict, "max_query_length": int,
    "max_doc_length": int}. fn_args.train_steps (TrainArgs.num_steps), when set, overrides
    trainer.train_steps.
    """
    custom = dict(fn_args.custom_config or {})
    cfg = TrainerConfig.from_dict(custom.get("trainer"))
    max_q, max_d = int(custom["max_query_length"]), int(custom["max_doc_length"])
    if max_q < 1 or max_d < 1:
        raise ValueError("custom_config: max_query_length and max_doc_length must be >= 1")
    steps = int(fn_args.train_steps) if fn_args.train_steps else cfg.train_steps
    if fn_args.train_steps and fn_args.train_steps != cfg.train_steps:
        logging.warning("TrainArgs.num_steps=%d overrides trainer.train_steps", steps)

    strategy = hardware.make_strategy(cfg)  # first: multi-worker must precede TF runtime use
    vocab = read_vocab(fn_args.transform_graph_path)
    if cfg.model == "bert":  # before any training work: ids must mean the checkpoint's tokens
        ckpt = cfg.bert.checkpoint_dir
        hf_checkpoint.check_vocab(ckpt, hf_checkpoint.read_vocab_file(ckpt), len(vocab), vocab)
    hardware.set_precision_policy(hardware.precision_policy(cfg, strategy))
    task = RankingTask(cfg, len(vocab), max_q, max_d, vocab)
    fingerprint = run_fingerprint(
        list(fn_args.train_files), fn_args.transform_graph_path, custom, steps
    )
    controller = Controller(
        task,
        strategy,
        list(fn_args.train_files),
        list(fn_args.eval_files or []),
        checkpoint_dir(fn_args.model_run_dir, fingerprint),
        fn_args.model_run_dir,
        steps,
    )
    result = controller.train()
    if controller.chief:
        write_results(result, fn_args.model_run_dir)
    if controller.restore_best():
        logging.info("exporting best model (step %d)", result.best_step)
    # Every multi-worker process must save (collective); only the chief's copy is kept.
    export_dir = worker_dir(fn_args.serving_model_dir, strategy)
    export_serving_model(controller.model, fn_args.transform_graph_path, max_q, max_d, export_dir)
    if not controller.chief:
        tf.io.gfile.rmtree(export_dir)
    return result
