"""Custom training loop: steps, checkpoints, validation, best model, guards, summaries.

A small controller in the spirit of orbit: the RankingTask says what one step is; this module
decides when to step, checkpoint, validate, log and stop.
"""

from __future__ import annotations

import logging
import math
import os
import time
from typing import Any

import tensorflow as tf
import tf_keras as keras

from trainer_module import towers, validation
from trainer_module.recipes.base import DocCache
from trainer_module.task import RankingTask
from trainer_module.train_results import TrainResult, peak_device_memory_mb, peak_host_rss_mb

BEST_DIR = "best"
LOSS_SCALE_GROWTH_INTERVAL = 2000


class DivergenceError(RuntimeError):
    """Training diverged (loss above max_loss or NaN/Inf loss or gradients)."""


def is_chief(strategy: tf.distribute.Strategy) -> bool:
    """Whether this process writes the shared outputs (checkpoints, summaries, export)."""
    if not isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy):
        return True
    resolver = strategy.cluster_resolver
    if not resolver.task_type or resolver.task_type == "chief":
        return True
    has_chief = "chief" in resolver.cluster_spec().as_dict()
    return resolver.task_type == "worker" and resolver.task_id == 0 and not has_chief


def worker_dir(path: str, strategy: tf.distribute.Strategy) -> str:
    """`path` on the chief; a per-worker scratch dir elsewhere (multi-worker saves are collective:
    every worker must write, but only the chief's copy is kept)."""
    if is_chief(strategy):
        return path
    resolver = strategy.cluster_resolver
    return f"{path.rstrip('/')}.worker-{resolver.task_type}-{resolver.task_id}"


class _Progress:
    """The loop's log points: every log_every steps (and at the session's last step) the log
    line, the train summaries and a loss-curve point, over the window of steps since the
    previous point; and this session's throughput, which excludes its first step (tracing /
    compilation)."""

    def __init__(self, start: int, total_steps: int, writer: Any):
        self.start, self.total_steps, self.writer = start, total_steps, writer
        self.t0 = self.window_t0 = time.time()
        self.window_examples = 0
        self.window_loss, self.window_steps = 0.0, 0
        self.steady_t0: float | None = None
        self.steady_examples = 0
        # [step, mean loss of the window] at every log point (TrainResult.loss_history).
        self.loss_history: list[list[float]] = []

    def add(self, out: dict[str, tf.Tensor]) -> None:
        """Counts a step's examples and loss."""
        n = int(out["examples"])
        self.window_examples += n
        self.window_loss += float(out["loss"])
        self.window_steps += 1
        if self.steady_t0 is None:
            self.steady_t0 = time.time()
        else:
            self.steady_examples += n

    def log(self, step: int, out: dict[str, tf.Tensor], learning_rates: dict) -> None:
        """Logs step `step` (its `out`, the optimizers' learning rates now) and opens a new
        window."""
        now = time.time()
        rate = self.window_examples / max(now - self.window_t0, 1e-9)
        eta = (self.total_steps - step) * (now - self.t0) / max(step - self.start, 1)
        lrs = {k: float(v) for k, v in learning_rates.items()}
        with self.writer.as_default(step=step):
            tf.summary.scalar("loss", out["loss"])
            tf.summary.scalar("grad_norm", out["grad_norm"])
            tf.summary.scalar("examples_per_sec", rate)
            for name, lr in lrs.items():
                tf.summary.scalar(name, lr)
        self.loss_history.append([step, self.window_loss / self.window_steps])
        logging.info(
            "step %d/%d loss=%.4f grad_norm=%.3f %s %.1f ex/s eta %.0fs",
            step,
            self.total_steps,
            float(out["loss"]),
            float(out["grad_norm"]),
            " ".join(f"{k}={v:.3g}" for k, v in lrs.items()),
            rate,
            eta,
            # Structured copy for the console's progress line (pipelines/console/).
            extra={
                "rankpipe_progress": {
                    "step": step,
                    "total": self.total_steps,
                    "loss": float(out["loss"]),
                    "examples_per_sec": rate,
                    "eta_seconds": eta,
                }
            },
        )
        self.window_t0, self.window_examples = now, 0
        self.window_loss, self.window_steps = 0.0, 0

    def examples_per_sec(self, end: float) -> float:
        """Examples per second from the end of the session's first step to `end`."""
        if self.steady_t0 and end > self.steady_t0:
            return self.steady_examples / (end - self.steady_t0)
        return 0.0


class Controller:
    """Trains `task` for `total_steps` under `strategy`, resuming from `checkpoint_dir`."""

    def __init__(
        self,
        task: RankingTask,
        strategy: tf.distribute.Strategy,
        train_files: list[str],
        eval_files: list[str] | None,
        checkpoint_dir: str,
        model_run_dir: str,
        total_steps: int,
        doc_cache: DocCache | None = None,
        dev_qrels: dict[str, dict[str, int]] | None = None,
    ):
        self.task = task
        self.dev_qrels = dev_qrels  # validation.split_judgments (None: the examples' judged)
        self.cfg = task.cfg
        self.strategy = strategy
        self.eval_files = eval_files
        self.checkpoint_dir = checkpoint_dir
        self.model_run_dir = model_run_dir
        self.total_steps = total_steps
        self.chief = is_chief(strategy)
        self.best_path = os.path.join(checkpoint_dir, BEST_DIR, "model")
        self._best_write_path = os.path.join(
            worker_dir(checkpoint_dir, strategy), BEST_DIR, "model"
        )
        with strategy.scope():
            self.model = task.build_model()
            self.optimizer = task.build_optimizer(self.model, total_steps)
            self._create_loop_variables()
        # A dual encoder's towers, for dev scoring (each text once) and frozen documents.
        self._embed_fns = towers.embed_fns(self.model, self.cfg.model)
        # The frozen document vectors of a recipe that trains against them (prefilled from the
        # corpus-vectors artifact by run_fn; filled as used), for the training lists and every
        # dev scoring alike; None when the document tower trains.
        self.doc_cache = doc_cache if doc_cache is not None else task.recipe.document_cache()
        self.dataset = task.build_inputs(
            strategy,
            train_files,
            self._embed_fns["d"] if self._embed_fns else None,
            self.doc_cache,
            self._embed_fns["q"] if self._embed_fns else None,
        )
        self.iterator = iter(self.dataset)
        # A plain tf.data iterator (default strategy) is checkpointed with its buffers; a
        # multi-replica DistributedIterator is not trackable, so resume fast-forwards it
        # instead (the pipeline is deterministic, so the position is the same).
        self._iterator_in_checkpoint = isinstance(self.iterator, tf.__internal__.tracking.Trackable)
        # What of the model a checkpoint holds: a model with frozen parts (a dual encoder's
        # document tower and companion: the checkpoints' weights again at every build) names
        # the rest, so each save does not write them again (MiniLM + MPNet: 530 MB).
        model_state = (
            self.model.training_state() if hasattr(self.model, "training_state") else self.model
        )
        self.checkpoint = tf.train.Checkpoint(**self._checkpoint_items(model_state))
        self.manager = tf.train.CheckpointManager(
            self.checkpoint,
            worker_dir(checkpoint_dir, strategy),
            max_to_keep=self.cfg.keep_checkpoints,
        )
        self.best_checkpoint = tf.train.Checkpoint(model=model_state)
        # (step, loss, pre-clip gradient norm) of the steps this object ran.
        self.history: list[tuple[int, float, float]] = []
        self.resumed_from: dict | None = None
        # (step, dev scores) of the last validation (exported_dev_scores reuses them).
        self._last_dev: tuple[int, validation.DevScores] | None = None
        # No autograph here either, as in towers.embed_fns (the step's Python loops are over
        # static counts, its branches tf.where / the optimizers' own conds): converting the
        # models', losses' and optimizers' source was most of the first step. With MiniLM on
        # Cranfield the first 5 steps took 25.5 s with it and 9.1 s without, in each of the 6
        # Trainers.
        self._train_fn = tf.function(self._train_once, autograph=False)
        # Inference is traced without autograph: the models' code has no tensor-dependent
        # Python control flow, and converting every layer's source is most of a BERT-size
        # model's trace time (MiniLM: 1.3 s without, 3.8 to 10.7 s with; export.py too).
        ids = tf.TensorSpec([None, None], tf.int64)
        self._score_fn = tf.function(
            lambda q, d: tf.cast(self.model((q, d), training=False), tf.float32),
            input_signature=[ids, ids],
            autograph=False,
        )

    def _create_loop_variables(self) -> None:
        """The step and the validation and loss-scale state (under the strategy's scope)."""
        self.step = tf.Variable(0, dtype=tf.int64, trainable=False, name="global_step")
        # Validation state lives in the checkpoint so a resumed run keeps the best model
        # and the early-stopping count.
        self.best_metric = tf.Variable(-math.inf, dtype=tf.float64, trainable=False)
        self.best_step = tf.Variable(-1, dtype=tf.int64, trainable=False)
        self.bad_validations = tf.Variable(0, dtype=tf.int64, trainable=False)
        self.stopped_early = tf.Variable(False, trainable=False)
        self.loss_scale = None
        if keras.mixed_precision.global_policy().name == "mixed_float16":
            self.loss_scale = tf.Variable(2.0**15, trainable=False, name="loss_scale")
            self.good_steps = tf.Variable(0, dtype=tf.int64, trainable=False)

    def _checkpoint_items(self, model_state: tf.Module) -> dict[str, Any]:
        """What a training checkpoint holds: the model's state, the step, the input position
        (when the iterator is trackable), the validation state, the optimizers and the fp16
        loss scale."""
        iterator_item = {"iterator": self.iterator} if self._iterator_in_checkpoint else {}
        items = dict(
            model=model_state,
            step=self.step,
            **iterator_item,
            best_metric=self.best_metric,
            best_step=self.best_step,
            bad_validations=self.bad_validations,
            stopped_early=self.stopped_early,
            **self.optimizer.checkpoint_items(),
        )
        if self.loss_scale is not None:
            items.update(loss_scale=self.loss_scale, good_steps=self.good_steps)
        return items

    # -- steps ----------------------------------------------------------------------------
    def _train_once(self, iterator) -> dict[str, tf.Tensor]:
        batch = next(iterator)
        out = self.strategy.run(
            self.task.train_step, args=(self.model, self.optimizer, batch, self.loss_scale)
        )
        s = self.strategy
        result = {
            "loss": s.reduce(tf.distribute.ReduceOp.SUM, out["loss"], axis=None),
            "grad_norm": s.reduce(tf.distribute.ReduceOp.MEAN, out["grad_norm"], axis=None),
            "examples": s.reduce(tf.distribute.ReduceOp.SUM, out["examples"], axis=None),
        }
        if self.loss_scale is not None:
            overflows = s.reduce(
                tf.distribute.ReduceOp.SUM, 1 - tf.cast(out["finite"], tf.int32), axis=None
            )
            self._update_loss_scale(overflows == 0)
            result["finite"] = overflows == 0
        self.step.assign_add(1)
        return result

    def _update_loss_scale(self, finite: tf.Tensor) -> None:
        grow = tf.logical_and(finite, self.good_steps + 1 >= LOSS_SCALE_GROWTH_INTERVAL)
        self.loss_scale.assign(
            tf.where(
                finite,
                tf.where(grow, self.loss_scale * 2.0, self.loss_scale),
                tf.maximum(self.loss_scale / 2.0, 1.0),
            )
        )
        self.good_steps.assign(tf.where(tf.logical_and(finite, ~grow), self.good_steps + 1, 0))

    def score(self, query: tf.Tensor, doc: tf.Tensor) -> tf.Tensor:
        """Training-time scores of padded (query [B, Lq], doc [B, Ld]) pairs."""
        return self._score_fn(query, doc)

    def score_dev(self) -> validation.DevScores:
        """The model's scores of every dev candidate (with the qrels and first-stage scores)."""
        dev = self._score_dev()
        return dev if self.dev_qrels is None else dev._replace(qrels=self.dev_qrels)

    def _score_dev(self) -> validation.DevScores:
        if self._embed_fns is not None:  # dual encoder: embed each distinct text once
            return validation.score_dev_embedded(
                self._embed_fns,
                self.eval_files,
                self.cfg.eval_batch_size,
                self.task.max_query_length,
                self.task.max_doc_length,
                self.doc_cache,
            )
        return validation.score_dev(
            self._score_fn,
            self.eval_files,
            self.cfg.eval_batch_size,
            self.task.max_query_length,
            self.task.max_doc_length,
        )

    def validate(self) -> float:
        dev = self.score_dev()
        self._last_dev = (int(self.step.numpy()), dev)
        return validation.validation_metric(
            dev.qrels, dev.run, self.cfg.validation_metric, self.cfg.validation_relevance_level
        )

    def _check(self, step: int, out: dict) -> None:
        loss, norm = float(out["loss"]), float(out["grad_norm"])
        overflow = "finite" in out and not bool(out["finite"])  # fp16: scale shrinks, no abort
        if not math.isfinite(loss):
            raise DivergenceError(f"training diverged at step {step}: loss is {loss}")
        if loss > self.cfg.max_loss:
            raise DivergenceError(
                f"training diverged at step {step}: loss {loss:.6g} > max_loss {self.cfg.max_loss}"
            )
        if not overflow and not math.isfinite(norm):
            raise DivergenceError(f"training diverged at step {step}: gradient norm is {norm}")

    # -- loop -----------------------------------------------------------------------------
    def restore(self) -> int:
        latest = tf.train.latest_checkpoint(self.checkpoint_dir)  # the chief's, on every worker
        if latest:
            self.checkpoint.restore(latest).assert_existing_objects_matched()
            self.resumed_from = {
                "checkpoint": os.path.basename(latest),
                "step": int(self.step.numpy()),
                "optimizer_iterations": {
                    name: int(opt.iterations.numpy())
                    for name, opt in self.optimizer.checkpoint_items().items()
                },
            }
            logging.info("resumed from %s at step %d", latest, int(self.step.numpy()))
            if not self._iterator_in_checkpoint:
                skip = tf.function(lambda it: next(it))
                for _ in range(int(self.step.numpy())):  # one batch per step
                    skip(self.iterator)
        return int(self.step.numpy())

    def _validate_and_track(self, step: int, writer) -> float:
        """Validates, keeps the best weights and counts validations without improvement (an
        early stop once they reach early_stopping_patience)."""
        metric = self.validate()
        with writer.as_default(step=step):
            tf.summary.scalar(self.cfg.validation_metric, metric)
        if metric > float(self.best_metric.numpy()):
            self.best_metric.assign(metric)
            self.best_step.assign(step)
            self.bad_validations.assign(0)
            self.best_checkpoint.write(self._best_write_path)
        else:
            self.bad_validations.assign_add(1)
        logging.info(
            "step %d: %s=%.4f (best %.4f at step %d)",
            step,
            self.cfg.validation_metric,
            metric,
            float(self.best_metric.numpy()),
            int(self.best_step.numpy()),
        )
        patience = self.cfg.early_stopping_patience
        if patience and int(self.bad_validations.numpy()) >= patience:
            logging.info("early stopping at step %d", step)
            self.stopped_early.assign(True)
        return metric

    def _summary_writers(self) -> tuple[Any, Any]:
        """(train, validation) summary writers: the chief's under model_run_dir, else no-ops."""
        if not self.chief:
            noop = tf.summary.create_noop_writer()
            return noop, noop
        return (
            tf.summary.create_file_writer(os.path.join(self.model_run_dir, "train")),
            tf.summary.create_file_writer(os.path.join(self.model_run_dir, "validation")),
        )

    def train(self, stop_at: int | None = None) -> TrainResult:
        """Runs (or resumes) training. `stop_at` ends early after that step (tests, preemption
        drills); the run can then be resumed by a new Controller over the same checkpoint_dir."""
        cfg = self.cfg
        start = self.restore()
        train_writer, val_writer = self._summary_writers()
        last = min(self.total_steps, stop_at) if stop_at is not None else self.total_steps
        progress = _Progress(start, self.total_steps, train_writer)
        final_metric: float | None = None
        validation_history: list[list[float]] = []
        step = start
        while step < last and not bool(self.stopped_early.numpy()):
            out = self._train_fn(self.iterator)
            step = int(self.step.numpy())
            self._check(step, out)
            self.history.append((step, float(out["loss"]), float(out["grad_norm"])))
            progress.add(out)
            if step % cfg.log_every == 0 or step == last:
                progress.log(step, out, self.optimizer.learning_rates())
            validate_now = bool(self.eval_files) and (
                (cfg.validate_every and step % cfg.validate_every == 0) or step == self.total_steps
            )
            if validate_now:
                final_metric = self._validate_and_track(step, val_writer)
                validation_history.append([step, final_metric])
            # Validate before saving: the checkpoint then holds the up-to-date best state.
            if (
                step % cfg.checkpoint_every == 0
                or step == self.total_steps
                or bool(self.stopped_early.numpy())
            ):
                self.manager.save(checkpoint_number=step)
        end = time.time()
        train_writer.flush()
        val_writer.flush()
        if self.eval_files and final_metric is None and step >= 1:
            final_metric = self.validate()  # resumed an already finished run
        best = float(self.best_metric.numpy())
        return TrainResult(
            steps=step,
            best_step=int(self.best_step.numpy()),
            best_metric=best if math.isfinite(best) else None,
            final_metric=final_metric,
            validation_metric=cfg.validation_metric,
            examples_per_sec=progress.examples_per_sec(end),
            stopped_early=bool(self.stopped_early.numpy()),
            peak_host_rss_mb=peak_host_rss_mb(),
            peak_device_memory_mb=peak_device_memory_mb(),
            wall_seconds=end - progress.t0,
            loss_history=progress.loss_history,
            validation_history=validation_history,
            resumed_from=self.resumed_from,
        )

    def restore_best(self) -> bool:
        """Loads the best validated weights into the model (False if none were kept)."""
        if int(self.best_step.numpy()) < 0:
            return False
        self.best_checkpoint.read(self.best_path).assert_existing_objects_matched()
        return True

    def exported_dev_scores(self, restored_best: bool) -> validation.DevScores:
        """score_dev of the weights the model holds now (the best step's after restore_best,
        else the last step's): the last validation's scores when it scored those very weights
        (the final step is also the best one when only the end is validated, as the shipped
        recipes do), else scored now. Scoring Cranfield's dev split again took 2 to 4 s in each
        of the 6 Trainers."""
        held = int(self.best_step.numpy()) if restored_best else int(self.step.numpy())
        if self._last_dev is not None and self._last_dev[0] == held:
            return self._last_dev[1]
        return self.score_dev()
