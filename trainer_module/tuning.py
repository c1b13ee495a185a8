"""The TFX Tuner's `tuner_fn`: a KerasTuner search whose trial is a whole Trainer run.

KerasTuner's `Tuner` fits a Keras model built per trial and reads its Keras metrics; our
Trainer is a custom loop (trainer_module/training.py) that chooses fusion and feedback on the
dev queries after training, so a trial here is `run_fn.fit` itself (train on the train split,
restore the best checkpoint, score the dev split, choose fusion) and its score is the dev
metric the Trainer chooses by (fused when the model fuses). KerasTuner still does the search's
bookkeeping (oracle, grid/random order, the trials and their scores),
which is why this subclasses its BaseTuner rather than looping by hand.

The search reads only the splits its fn_args name (TrainArgs/EvalArgs of the Tuner
component: the same train and dev splits as its Trainer, pipelines/component_table.py), so it
never reads the evaluated queries' judgments. A trial's model is not kept: the Trainer trains
the chosen values again (same data and seed), and a trial's directory is removed once scored.
"""

from __future__ import annotations

import logging
import os
import time
from typing import Any

import keras_tuner
import tensorflow as tf
import tf_keras as keras
from keras_tuner.engine import base_tuner
from tfx.components.tuner.component import TunerFnResult

from trainer_module import run_fn
from trainer_module.config import TrainerConfig
from trainer_module.tuning_config import (
    OBJECTIVE_KEY,
    TRIALS_KEY,
    TunerConfig,
    apply_values,
    conditional_keys,
    decode,
    encode,
    trained_values,
)

# fn_args.custom_config key of the `tuner` section (the Trainer's keys sit beside it).
TUNER_KEY = "tuner"


def objective_value(result: Any) -> float:
    """The dev score the Trainer chooses by: the fused dev metric when the model fuses with
    the first stage, else the reranker's best validation (or, zero-shot, its dev metric)."""
    fused = (result.fusion or {}).get("dev_fused")
    if fused is not None:
        return float(fused)
    value = result.best_metric if result.best_metric is not None else result.final_metric
    if value is None:
        raise ValueError("a Tuner trial needs dev queries: the Tuner's eval split is empty")
    return float(value)


class RecipeSearch(base_tuner.BaseTuner):
    """KerasTuner BaseTuner whose trial trains the trainer config with the trial's values set
    (module docstring)."""

    def __init__(
        self,
        oracle: keras_tuner.Oracle,
        fn_args: Any,
        custom: dict[str, Any],
        directory: str,
    ):
        super().__init__(oracle, directory=directory, project_name="search")
        self.fn_args = fn_args
        self.custom = custom
        self.keys = [hp.name for hp in oracle.hyperparameters.space]

    def trial_values(self, trial: Any) -> dict[str, Any]:
        """The trial's values of the keys active in it (a zero-shot trial has no training-only
        key: the trainer section's value stands)."""
        hp = trial.hyperparameters
        return {key: decode(hp.get(key)) for key in self.keys if hp.is_active(key)}

    def run_trial(self, trial: Any, *args: Any, **kwargs: Any) -> dict[str, float]:
        values = self.trial_values(trial)
        logging.info("Tuner trial %s: %s", trial.trial_id, values)
        custom = {**self.custom, "trainer": apply_values(self.custom["trainer"], values)}
        trial_dir = os.path.join(self.project_dir, "trials", trial.trial_id)
        t0 = time.monotonic()
        try:
            cfg = TrainerConfig.from_dict(custom["trainer"])
            strategy, vocab = run_fn.prepare(cfg, self.fn_args)
            fitted = run_fn.fit(
                cfg,
                cfg.train_steps,
                self.fn_args,
                custom,
                os.path.join(trial_dir, "model_run", "0"),
                strategy,
                vocab,
                {},
            )
            score = objective_value(fitted.result)
        except Exception as e:  # KerasTuner would record it and go on: stop, naming the trial
            raise keras_tuner.errors.FatalError(
                f"Tuner trial {trial.trial_id} ({values}) failed: {type(e).__name__}: {e}"
            ) from e
        finally:
            keras.backend.clear_session()
        if tf.io.gfile.exists(trial_dir):
            tf.io.gfile.rmtree(trial_dir)  # its checkpoints: the Trainer retrains the choice
        logging.info(
            "Tuner trial %s: %s = %.4f in %.0fs",
            trial.trial_id,
            self.oracle.objective.name,
            score,
            time.monotonic() - t0,
        )
        return {self.oracle.objective.name: score}

    def save_model(self, trial_id: str, model: Any, step: int = 0) -> None:
        """No model is kept per trial (module docstring)."""

    def load_model(self, trial: Any) -> None:
        raise NotImplementedError("the Tuner keeps no trial's model: the Trainer retrains")

    def trials(self) -> list[dict[str, Any]]:
        """Every finished trial, best first (a tie: the earlier), as the model card shows it."""
        out = []
        for trial in self.oracle.get_best_trials(len(self.oracle.trials)):
            out.append(
                {
                    "trial_id": trial.trial_id,
                    "values": self.trial_values(trial),
                    "score": trial.score,
                    "status": trial.status,
                }
            )
        return out

    def best_config(self) -> dict[str, Any]:
        """best_hyperparameters.txt: KerasTuner's config of the best trial's values (what TFX's
        Trainer hands run_fn as fn_args.hyperparameters), with every trial and the objective
        beside it (trainer_module/tuning_config.py)."""
        best = self.get_best_hyperparameters(1)
        if not best:
            raise ValueError("the Tuner finished no trial: nothing to choose")
        return {
            **best[0].get_config(),
            TRIALS_KEY: self.trials(),
            OBJECTIVE_KEY: self.oracle.objective.name,
        }


def make_oracle(tuner: TunerConfig, objective: str) -> keras_tuner.Oracle:
    """The grid or random oracle over the space, each key a Choice of its values as JSON."""
    hp = keras_tuner.HyperParameters()
    conditional = conditional_keys(tuner.space)
    for key, values in tuner.space.items():
        if key not in conditional:
            hp.Choice(key, [encode(v) for v in values], ordered=False)
    trained = trained_values(tuner.space)
    if trained is not None:  # some keys are searched only where training happens
        for key in conditional:  # (tuning_config.py)
            with hp.conditional_scope("train_steps", [encode(v) for v in trained]):
                hp.Choice(key, [encode(v) for v in tuner.space[key]], ordered=False)
    cls = {
        "grid": keras_tuner.oracles.GridSearchOracle,
        "random": keras_tuner.oracles.RandomSearchOracle,
    }[tuner.algorithm]
    return cls(
        objective=keras_tuner.Objective(objective, "max"),
        max_trials=tuner.max_trials,
        seed=tuner.seed,
        hyperparameters=hp,
        tune_new_entries=False,
        allow_new_entries=False,
    )


def tuner_fn(fn_args: Any) -> TunerFnResult:
    """TFX Tuner entry point (tuner_fn='trainer_module.tuning.tuner_fn').

    fn_args.custom_config = the Trainer's ({"trainer", "max_query_length",
    "max_doc_length", "corpus_vectors_uri"}) plus {"tuner": TunerConfig dict}."""
    custom = dict(fn_args.custom_config or {})
    tuner = TunerConfig(**(custom.pop(TUNER_KEY, None) or {}))
    base = TrainerConfig.from_dict(custom.get("trainer"))
    if not fn_args.eval_files:
        raise ValueError("the Tuner scores trials on the dev split: its EvalArgs name none")
    oracle = make_oracle(tuner, f"dev_{base.validation_metric}")
    search = RecipeSearch(oracle, fn_args, custom, fn_args.working_dir)
    return TunerFnResult(tuner=search, fit_kwargs={})
