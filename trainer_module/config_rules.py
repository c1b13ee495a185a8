"""The checks the Trainer's config sections share: one error form, "trainer config: KEY ..."."""

from __future__ import annotations

import dataclasses
import typing
from typing import TypeVar

from rankcore import config_loader

T = TypeVar("T")
_TRAINING_ONLY = "training_only"


def training_only(default: T) -> T:
    """A config field (with its default) that only shapes training: with `train_steps: 0`
    (zero-shot) it changes nothing, so the Tuner does not vary it there (a space of
    train_steps [0, 600] and learning_rate [5e-5, 1e-4] is three trials, not four with
    zero-shot twice; trainer_module/tuning_config.py). Marked on the field itself, so a new
    training key says so where it is declared. Leaving a mark off is safe: the key is then
    also searched at 0 steps (a wasted trial, never a wrong choice)."""
    return dataclasses.field(default=default, metadata={_TRAINING_ONLY: True})


def training_only_keys(cls: type, prefix: str = "") -> frozenset[str]:
    """The dotted keys of config dataclass `cls` marked training_only, its sections walked."""
    hints = typing.get_type_hints(cls)
    keys: set[str] = set()
    for f in dataclasses.fields(cls):
        if f.metadata.get(_TRAINING_ONLY):
            keys.add(prefix + f.name)
        elif dataclasses.is_dataclass(hints[f.name]):
            keys |= training_only_keys(hints[f.name], f"{prefix}{f.name}.")
    return frozenset(keys)


def require(cond: bool, name: str, msg: str) -> None:
    """ValueError "trainer config: `name` `msg`" unless `cond`."""
    if not cond:
        raise ValueError(f"trainer config: {name} {msg}")


def choice(value: str, name: str, choices: tuple[str, ...]) -> None:
    """`value` must be one of `choices` (with a did-you-mean hint when it is not)."""
    hint = config_loader.did_you_mean(str(value), choices)
    require(value in choices, name, f"must be one of {list(choices)}, got {value!r}{hint}")
