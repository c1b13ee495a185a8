"""TFX Trainer entry point (GenericExecutor): run_fn='trainer_module.run_fn.run_fn'."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any, NamedTuple

import tensorflow as tf
import tensorflow_transform as tft
import tf_keras as keras

from rankcore import corpus_vectors, feedback, fusion
from rankcore.corpus_vectors import DocumentTower
from rankcore.encoders import hf_checkpoint
from trainer_module import hardware, tuning_config, validation
from trainer_module.checkpointing import (
    CORPUS_VECTORS_URI,
    DEV_SPLITS,
    QRELS_URI,
    QUERY_TOWER_ONLY,
    checkpoint_dir,
    run_fingerprint,
)
from trainer_module.config import TrainerConfig
from trainer_module.export import export_query_tower, export_serving_model
from trainer_module.models.registry import PRETRAINED_MODEL_NAMES, offers_towers
from trainer_module.recipes import Recipe, recipe_for
from trainer_module.recipes.base import DocCache
from trainer_module.task import RankingTask
from trainer_module.train_results import TrainResult, write_results
from trainer_module.training import Controller, worker_dir

VOCAB_ASSET_NAME = "wordpiece"


def read_vocab(transform_graph_path: str) -> list[str]:
    """The WordPiece vocabulary the TransformGraph tokenizes with (its vocab asset)."""
    path = tft.TFTransformOutput(transform_graph_path).vocabulary_file_by_name(VOCAB_ASSET_NAME)
    with tf.io.gfile.GFile(path, "r") as f:
        return [line.rstrip("\n") for line in f]


def _best_setting(
    settings: list[dict],
    rescored: Callable[..., dict],
    first_stage: dict,
    metric: Callable[[dict], float],
) -> tuple[dict, float, dict[float, float]]:
    """(feedback setting, its tuned alpha, dev metric per grid alpha) of the setting whose best
    alpha scores highest; a setting must beat every one before it, so a tie keeps the earlier
    (simpler) one. `rescored(setting, alpha=None)` is the dev run under a setting."""
    best = None
    for setting in settings:
        # Feedback from the fused first pass depends on alpha: rescored at each alpha tried.
        if feedback.from_fused(setting):
            tuned, grid = fusion.tune_alpha(
                lambda a, s=setting: rescored(s, a), first_stage, metric
            )
        else:
            tuned, grid = fusion.tune_alpha(rescored(setting), first_stage, metric)
        if best is None or grid[tuned] > best[2][best[1]]:
            best = (setting, tuned, grid)
    return best


def choose_fusion(
    cfg: TrainerConfig,
    dev: validation.DevScores | None,
    result: TrainResult,
    seconds: dict[str, float] | None = None,
    feedback_settings: list[dict] | None = None,
) -> dict | None:
    """The first-stage fusion the exported model carries, from the exported model's scores of
    the dev split (`dev`, None without dev queries): alpha tuned on the dev queries (or fixed),
    with the dev metric of each grid alpha. With train_steps 0 (zero-shot) this is also where
    the model is first validated. `seconds` gets the time spent tuning alpha ("fusion").
    `feedback_settings`: the rankcore/feedback.py settings to try (None: those
    trainer.ranking.feedback says)."""
    seconds = {} if seconds is None else seconds
    fusion_cfg, feedback_cfg = cfg.ranking.fusion, cfg.ranking.feedback
    if dev is None:
        if fusion_cfg.mode == "tuned":
            raise ValueError(
                "trainer config: ranking.fusion.mode tuned needs dev queries (the dev split)"
            )
        alpha = fusion.fusion_alpha(fusion_cfg.mode, fusion_cfg.alpha, None)
        return None if alpha is None else {"mode": fusion_cfg.mode, "alpha": alpha}
    t0 = time.monotonic()

    def metric(run: dict) -> float:
        return validation.validation_metric(
            dev.qrels, run, cfg.validation_metric, cfg.validation_relevance_level
        )

    reranker_metric = metric(dev.run)
    if result.steps == 0:  # zero-shot: no validation ran during training
        result.final_metric = reranker_metric
    if fusion_cfg.mode == "none":
        seconds["fusion"] = time.monotonic() - t0
        return None
    # With feedback tuned, each feedback setting (off first) is scored with its best alpha;
    # a setting must beat every one before it, so a tie keeps the simpler one (off).
    settings = (
        feedback_settings
        or {
            "tuned": feedback.grid(feedback_cfg.source),
            "fixed": [feedback_cfg.setting()],
            "none": [dict(feedback.OFF)],
        }[feedback_cfg.mode]
    )

    # The dev lists prepared once for every setting tried; with every setting off there is
    # nothing to rescore (and no vectors to prepare).
    def rescored(setting: dict, alpha: float | None = None) -> dict:
        return dev.run

    if any(feedback.is_on(setting) for setting in settings):
        vectors = {key: vector for key, (_, vector) in (dev.vectors or {}).items()}
        rescored = feedback.Lists(dev.run, dev.first_stage, vectors).rescore
    setting, tuned, grid = _best_setting(settings, rescored, dev.first_stage, metric)
    alpha = fusion.fusion_alpha(fusion_cfg.mode, fusion_cfg.alpha, tuned)
    run = rescored(setting, alpha)
    info = {
        "mode": fusion_cfg.mode,
        "alpha": alpha,
        "metric": cfg.validation_metric,
        "dev_fused": metric(fusion.fuse_run(run, dev.first_stage, alpha)),
        "dev_reranker": metric(run),
        "dev_first_stage": metric(dev.first_stage),
        "dev_grid": {f"{a:.2f}": v for a, v in grid.items()},
    }
    if feedback_cfg.mode != "none":
        info["feedback"] = setting
        info["dev_reranker_without_feedback"] = reranker_metric
    seconds["fusion"] = time.monotonic() - t0
    logging.info(
        "fusion %s: alpha=%.2f, feedback %s, dev %s fused %.4f (reranker %.4f, first stage %.4f)",
        fusion_cfg.mode,
        alpha,
        info.get("feedback"),
        cfg.validation_metric,
        info["dev_fused"],
        info["dev_reranker"],
        info["dev_first_stage"],
    )
    return info


def _rescaled(dev: validation.DevScores, rescale: Callable) -> validation.DevScores:
    """`dev` with every vector mapped by `rescale` and each pair scored again (their dot
    product, as score_dev_embedded scores)."""
    vectors = {key: (ids, rescale(vector)) for key, (ids, vector) in dev.vectors.items()}
    pairs = [(qid, docid) for qid, docs in dev.run.items() for docid in docs]
    run = validation.dot_run({key: vector for key, (_, vector) in vectors.items()}, pairs)
    return dev._replace(run=run, vectors=vectors)


def choose_companion_weight(
    cfg: TrainerConfig,
    recipe: Recipe,
    model: keras.Model,
    dev: validation.DevScores | None,
    result: TrainResult,
    seconds: dict[str, float],
) -> tuple[Recipe, list[str]]:
    """(the recipe at the companion weight the dev queries choose, what was chosen in model
    card lines): `recipe` and no lines when it offers no weights. The trained model's dev
    vectors are rescaled to each weight (no encoder runs again) and scored with alpha tuned at
    the feedback chosen at the weight they were scored at (result.fusion); the fusion and
    feedback are then chosen again in full at the best weight (result.fusion). A tie keeps the
    earlier weight. The Tuner's trials run this too, so their scores are the Trainer's."""
    weights = recipe.companion_weights()
    if not weights:
        return recipe, []
    if dev is None or not dev.vectors:
        raise ValueError(
            "trainer config: recipe.frozen_documents.companion_weights are chosen on the dev "
            "queries: the dev split has none"
        )
    t0 = time.monotonic()
    own_dims = model.arch.hidden_size
    chosen_first = [(result.fusion or {}).get("feedback") or dict(feedback.OFF)]
    grid: dict[float, float] = {}
    for weight in weights:
        scored = _rescaled(dev, recipe.at_companion_weight(weight, own_dims)[1])
        fusion_info = choose_fusion(cfg, scored, replace(result), None, chosen_first)
        if fusion_info is None:  # fusion off: the model's own ranking
            grid[weight] = validation.validation_metric(
                scored.qrels, scored.run, cfg.validation_metric, cfg.validation_relevance_level
            )
        else:
            grid[weight] = fusion_info["dev_fused"]
    best = max(weights, key=lambda w: (grid[w], -weights.index(w)))
    chosen, rescale = recipe.at_companion_weight(best, own_dims)
    if chosen.cfg != recipe.cfg:  # the dev vectors were scored at another weight
        result.fusion = choose_fusion(cfg, _rescaled(dev, rescale), result)
    seconds["companion_weight"] = time.monotonic() - t0
    values = ", ".join(f"{w:g}: {v:.4f}" for w, v in grid.items())
    line = (
        f"companion weight {best:g} chosen on the dev queries (dev {cfg.validation_metric}, "
        f"fused at the feedback chosen first, per weight: {values})"
    )
    logging.info(line)
    return chosen, [line]


def corpus_documents(
    recipe: Recipe, tower: DocumentTower | None, uri: str | None
) -> tuple[DocumentTower | None, DocCache | None]:
    """(tower, cache): the recipe's cache of frozen document vectors (None when its document
    tower trains), prefilled from the corpus-vectors artifact at `uri` (None: the pipeline has
    no CorpusEncoder) when it holds the tower's encoders, at this Trainer's precision or another
    (DocumentTower.as_encoded: the tower returned is the one the vectors are, which the export
    names); a document missing there is embedded by the model as it is used."""
    cache = recipe.document_cache()
    if cache is None or tower is None or not uri:
        return tower, cache
    meta = corpus_vectors.read_meta(uri)
    encoded = tower.as_encoded(meta)
    for (ours, _), (theirs, _) in zip(tower.parts, encoded.parts):
        if theirs != ours:
            logging.info(
                "frozen documents: the corpus vectors hold %s at precision %s, this Trainer "
                "runs %s: it trains against those vectors (not embedded again)",
                theirs.checkpoint_dir,
                theirs.precision,
                ours.precision,
            )
    known = meta.by_key()
    missing = [key for key in encoded.keys() if key not in known]
    if missing:
        logging.warning(
            "corpus vectors %s hold no vectors of encoder(s) %s of this recipe's document "
            "tower (another checkpoint or cut): every document is embedded here",
            uri,
            missing,
        )
        return tower, cache
    t0 = time.monotonic()
    cache.update(
        corpus_vectors.vectors_by_ids(uri, zip(encoded.keys(), (s for _, s in encoded.parts)))
    )
    logging.info(
        "frozen documents: %d document vectors from the corpus vectors %s in %.1fs",
        len(cache),
        uri,
        time.monotonic() - t0,
    )
    return encoded, cache


class Fitted(NamedTuple):
    """A trained (or zero-shot) model with its dev scores and fusion chosen: what the Trainer
    exports and what a Tuner trial (trainer_module/tuning.py) scores and drops."""

    controller: Controller
    recipe: Recipe
    tower: DocumentTower | None
    result: TrainResult


def fit(
    cfg: TrainerConfig,
    steps: int,
    fn_args: Any,
    custom: dict[str, Any],
    model_run_dir: str,
    strategy: tf.distribute.Strategy,
    vocab: list[str],
    seconds: dict[str, float],
) -> Fitted:
    """Trains `cfg` for `steps` on fn_args' train files (resuming from the checkpoints of a
    killed attempt with the same fingerprint), restores the best checkpoint, scores the dev
    files and chooses the fusion: the Trainer and every Tuner trial run exactly this, so the
    Tuner's dev score is the one the Trainer would get with the same values."""
    max_q, max_d = int(custom["max_query_length"]), int(custom["max_doc_length"])
    start = time.monotonic()
    recipe = recipe_for(cfg, steps)  # the one place the recipe is chosen
    tower, doc_cache = corpus_documents(
        recipe,
        recipe.document_tower(max_d, keras.mixed_precision.global_policy().name),
        custom.get(CORPUS_VECTORS_URI),
    )
    task = RankingTask(cfg, len(vocab), max_q, max_d, vocab, recipe)
    fingerprint = run_fingerprint(
        list(fn_args.train_files), fn_args.transform_graph_path, custom, steps
    )
    controller = Controller(
        task,
        strategy,
        list(fn_args.train_files),
        list(fn_args.eval_files or []),
        checkpoint_dir(model_run_dir, fingerprint),
        model_run_dir,
        steps,
        doc_cache,
        validation.split_judgments(custom.get(QRELS_URI), custom.get(DEV_SPLITS)),
    )
    seconds["setup"] = seconds.get("setup", 0.0) + time.monotonic() - start
    t0 = time.monotonic()
    result = controller.train()
    restored_best = controller.restore_best()
    if restored_best:
        logging.info("best model: step %d", result.best_step)
    seconds["train"] = time.monotonic() - t0
    dev = None
    if fn_args.eval_files:  # the exported (best) weights' scores of every dev candidate
        t0 = time.monotonic()
        dev = controller.exported_dev_scores(restored_best)
        seconds["dev_scoring"] = time.monotonic() - t0
    result.fusion = choose_fusion(cfg, dev, result, seconds)
    recipe, chose = choose_companion_weight(cfg, recipe, controller.model, dev, result, seconds)
    policy = keras.mixed_precision.global_policy().name
    if tower is not None:  # the encoded parts, at the chosen recipe's scales
        scales = (s for _, s in recipe.document_tower(max_d, policy).parts)
        tower = DocumentTower(tuple((spec, s) for (spec, _), s in zip(tower.parts, scales)))
    result.recipe = [
        *recipe.describe(),
        *chose,
        f"precision `{policy}` (trainer.mixed_precision `{cfg.mixed_precision}`)",
    ]
    return Fitted(controller, recipe, tower, result)


def export(
    cfg: TrainerConfig,
    fitted: Fitted,
    transform_graph_path: str,
    lengths: tuple[int, int],
    export_dir: str,
    custom: dict[str, Any],
) -> None:
    """The SavedModel of the fitted model: whole (every signature, export_serving_model), or
    for a fold branch's Trainer (custom_config QUERY_TOWER_ONLY) of a recipe with frozen
    documents its trained query tower only (export_query_tower): a fold model is evaluated,
    never served, and its frozen parts are the served model's."""
    model, result = fitted.controller.model, fitted.result
    fitted.recipe.prepare_export(model)
    query_tower = None
    if fitted.tower is not None:  # a dual encoder with frozen documents
        policy = keras.mixed_precision.global_policy().name
        query_tower = fitted.recipe.query_tower(model.arch.hidden_size, lengths[0], policy)
    if custom.get(QUERY_TOWER_ONLY) and query_tower is not None:
        export_query_tower(
            model,
            lengths[0],
            export_dir,
            replace(query_tower, complete=False),
            fitted.tower,
            fusion=result.fusion,
            description=result.recipe,
        )
        return
    export_serving_model(
        model,
        transform_graph_path,
        *lengths,
        export_dir,
        fusion=result.fusion,
        towers=offers_towers(cfg.model),
        document_tower=fitted.tower,
        description=result.recipe,
        query_tower=query_tower,
    )


def remove_checkpoints(ckpt_dir: str, strategy: tf.distribute.Strategy) -> None:
    """This process's checkpoints (the chief's directory, a worker's scratch copy), once the
    model they trained is exported: what the Trainer hands on is the SavedModel, and a finished
    execution is not retried (trainer.keep_finished_checkpoints keeps them)."""
    path = worker_dir(ckpt_dir, strategy)
    if tf.io.gfile.exists(path):
        tf.io.gfile.rmtree(path)
        logging.info("removed the finished run's checkpoints (%s)", path)


def prepare(cfg: TrainerConfig, fn_args: Any) -> tuple[tf.distribute.Strategy, list[str]]:
    """(strategy, vocabulary) after the checks every run makes before training: the strategy
    first (multi-worker must precede any TF runtime use), the checkpoint's vocabulary against
    the TransformGraph's (ids must mean its tokens), then the precision policy."""
    strategy = hardware.make_strategy(cfg)
    vocab = read_vocab(fn_args.transform_graph_path)
    if cfg.model in PRETRAINED_MODEL_NAMES:
        ckpt = getattr(cfg, cfg.model).checkpoint_dir
        hf_checkpoint.check_vocab(ckpt, hf_checkpoint.read_wordpiece_vocab(ckpt), len(vocab), vocab)
    hardware.set_precision_policy(hardware.precision_policy(cfg, strategy))
    return strategy, vocab


def run_fn(fn_args: Any) -> TrainResult:
    """Trains (resuming if a previous attempt was killed), validates and exports the best model.

    fn_args.custom_config = {"trainer": TrainerConfig dict, "max_query_length": int,
    "max_doc_length": int, "corpus_vectors_uri": the CorpusEncoder's artifact or None,
    "qrels_uri": RankingDataGen's qrels or None, "dev_splits": the dev splits' names}.
    fn_args.hyperparameters (the Tuner's best_hyperparameters, when the pipeline has a Tuner)
    set trainer keys over the config's (trainer_module/tuning.py); else fn_args.train_steps
    (TrainArgs.num_steps), when set, overrides trainer.train_steps.
    """
    start = time.monotonic()
    seconds: dict[str, float] = {}
    custom = dict(fn_args.custom_config or {})
    chosen = tuning_config.chosen(getattr(fn_args, "hyperparameters", None))
    if chosen is not None:
        custom["trainer"] = tuning_config.apply_values(custom.get("trainer") or {}, chosen.values)
    cfg = TrainerConfig.from_dict(custom.get("trainer"))
    max_q, max_d = int(custom["max_query_length"]), int(custom["max_doc_length"])
    if max_q < 1 or max_d < 1:
        raise ValueError("custom_config: max_query_length and max_doc_length must be >= 1")
    steps = int(fn_args.train_steps) if fn_args.train_steps else cfg.train_steps
    if chosen is not None and "train_steps" in chosen.values:
        steps = cfg.train_steps  # the Tuner's choice, not TrainArgs' configured count
    elif fn_args.train_steps and fn_args.train_steps != cfg.train_steps:
        logging.warning("TrainArgs.num_steps=%d overrides trainer.train_steps", steps)

    strategy, vocab = prepare(cfg, fn_args)
    fitted = fit(cfg, steps, fn_args, custom, fn_args.model_run_dir, strategy, vocab, seconds)
    controller, result = fitted.controller, fitted.result
    if chosen is not None:
        result.recipe = [*result.recipe, *chosen.describe()]
    result.seconds = seconds
    if controller.chief:
        write_results(result, fn_args.model_run_dir)
    # Every multi-worker process must save (collective); only the chief's copy is kept.
    export_dir = worker_dir(fn_args.serving_model_dir, strategy)
    t0 = time.monotonic()
    export(cfg, fitted, fn_args.transform_graph_path, (max_q, max_d), export_dir, custom)
    seconds["export"] = time.monotonic() - t0
    if not controller.chief:
        tf.io.gfile.rmtree(export_dir)
    if not cfg.keep_finished_checkpoints:
        remove_checkpoints(controller.checkpoint_dir, strategy)
    seconds["total"] = time.monotonic() - start
    logging.info("Trainer seconds: %s", ", ".join(f"{k} {v:.1f}" for k, v in seconds.items()))
    return result
