"""The `tuner` section and the values it hands the Trainer, without TensorFlow.

The Tuner (trainer_module/tuning.py, the TFX Tuner component in the DAG) tries combinations of
trainer keys, each a whole Trainer run on the train split scored on the dev split, and writes
the best one as `best_hyperparameters`; the Trainer sets those keys over its config
(`apply_values`). A value travels as JSON text (KerasTuner's `Choice` takes one type of
int/float/str/bool per dimension; a space mixes null, numbers and paths), and each key is a
trainer key as the YAML spells it below `trainer.` (`train_steps`,
`recipe.frozen_documents.companion_checkpoint_dir`), so what the Tuner chose reads as config.

Plain Python (pipelines/config.py loads and checks the section without TensorFlow).
"""

from __future__ import annotations

import copy
import itertools
import json
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from rankcore import config_loader
from trainer_module.config import TrainerConfig
from trainer_module.config_rules import training_only_keys

ALGORITHMS = ("grid", "random")
# Keys of best_hyperparameters.txt beside KerasTuner's own ("space", "values"): every trial's
# values and dev score, and the objective's name, for the model card (why this was chosen).
TRIALS_KEY = "rankpipe_trials"
OBJECTIVE_KEY = "rankpipe_objective"


@dataclass
class TunerConfig:
    """The Tuner (docs/trainer.md "Tuner"): which trainer keys it searches, and how long."""

    # Trials the Tuner runs, each a whole Trainer run (train split) scored on the dev split
    # (the choice queries: never the evaluated ones; with cross-validation one Tuner per fold
    # branch, on that branch's own train and dev folds). 0: no Tuner in the DAG, the Trainer
    # takes the trainer section as it is.
    max_trials: int = 0
    # grid: the combinations of `space` in order (the first value of each key first), up to
    # max_trials; random: max_trials combinations drawn with `seed`.
    algorithm: str = "grid"
    seed: int = 0
    # Trainer key (dotted, below `trainer.`) -> the values to try, e.g. {train_steps: [0, 120],
    # learning_rate: [2.0e-5, 5.0e-5]}. A key missing here keeps the trainer section's value.
    # A tie keeps the earlier combination.
    space: dict[str, list[Any]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # "<field>: <problem>": the config loader names the key in full (tuner.max_trials).
        if self.max_trials < 0:
            raise ValueError("max_trials: must be >= 0 (0: no Tuner)")
        if self.algorithm not in ALGORITHMS:
            hint = config_loader.did_you_mean(self.algorithm, ALGORITHMS)
            raise ValueError(f"algorithm: must be one of {list(ALGORITHMS)}{hint}")
        if self.max_trials and not self.space:
            raise ValueError(
                "space: is empty: name the trainer keys to search, or set tuner.max_trials to 0"
            )
        for key, values in self.space.items():
            encoded = [encode(v) for v in values]
            if not encoded or len(set(encoded)) != len(encoded):
                raise ValueError(f"space: {key} must list distinct values to try, got {values}")

    @property
    def enabled(self) -> bool:
        return self.max_trials > 0


def encode(value: Any) -> str:
    """A space value as the Tuner's hyperparameter holds it (JSON text)."""
    return json.dumps(value, sort_keys=True)


def decode(text: str) -> Any:
    return json.loads(text)


# Trainer keys that only shape training, as their fields are marked (config_rules.py
# training_only): the search varies them only where it trains.
TRAINING_ONLY_KEYS = training_only_keys(TrainerConfig)


def trained_values(space: dict[str, list[Any]]) -> list[Any] | None:
    """The space's `train_steps` values above 0 when it also tries 0 steps (zero-shot): the
    condition under which TRAINING_ONLY_KEYS are searched; None when there is no such split."""
    steps = space.get("train_steps") or []
    trained = [v for v in steps if v != 0]
    return trained if trained and len(trained) < len(steps) else None


def conditional_keys(space: dict[str, list[Any]]) -> list[str]:
    """The space's keys searched only with training (trained_values)."""
    if trained_values(space) is None:
        return []
    return [key for key in space if key in TRAINING_ONLY_KEYS]


def combinations(space: dict[str, list[Any]]) -> list[dict[str, Any]]:
    """The combinations the grid tries, the first value of each key first (grid order): every
    combination of the space's values, except that a zero-shot one (`train_steps: 0`) leaves
    out the training-only keys (conditional_keys), as KerasTuner's conditional scope does in the
    search (trainer_module/tuning.py), so it is tried once."""
    keys = list(space)
    skipped = set(conditional_keys(space))
    out: list[dict[str, Any]] = []
    for values in itertools.product(*space.values()):
        combo = dict(zip(keys, values))
        if skipped and combo["train_steps"] == 0:
            combo = {k: v for k, v in combo.items() if k not in skipped}
        if combo not in out:
            out.append(combo)
    return out


def apply_values(trainer: dict[str, Any], values: dict[str, Any]) -> dict[str, Any]:
    """A copy of the trainer section (a dict, as the YAML or dataclasses.asdict gives it) with
    each dotted key of `values` set; a section that is null (`recipe: null`) or absent is
    created."""
    out = copy.deepcopy(trainer)
    for key, value in values.items():
        node = out
        *parents, leaf = key.split(".")
        for part in parents:
            if not isinstance(node.get(part), dict):
                node[part] = {}
            node = node[part]
        node[leaf] = value
    return out


class Chosen(NamedTuple):
    """What the Tuner chose (fn_args.hyperparameters, decoded): trainer key -> value, and every
    trial's values and dev score for the record."""

    values: dict[str, Any]
    trials: list[dict[str, Any]]
    objective: str

    def describe(self) -> list[str]:
        """Model-card lines (Markdown bullets without the "- "): the values and why."""
        values = ", ".join(f"`{k}: {json.dumps(v)}`" for k, v in self.values.items())
        lines = [f"Chosen by the Tuner on the dev queries ({self.objective}): {values}"]
        for trial in self.trials:
            score = trial.get("score")
            shown = "failed" if score is None else f"{score:.4f}"
            tried = ", ".join(f"{k}: {json.dumps(v)}" for k, v in trial["values"].items())
            lines.append(f"Tuner trial {trial['trial_id']}: {tried} -> {shown}")
        return lines


def chosen(hyperparameters: dict[str, Any] | None) -> Chosen | None:
    """fn_args.hyperparameters (best_hyperparameters.txt as the TFX Trainer reads it) decoded;
    None without a Tuner."""
    if not hyperparameters:
        return None
    values = {key: decode(text) for key, text in (hyperparameters.get("values") or {}).items()}
    return Chosen(
        values,
        list(hyperparameters.get(TRIALS_KEY) or []),
        str(hyperparameters.get(OBJECTIVE_KEY) or "dev"),
    )
