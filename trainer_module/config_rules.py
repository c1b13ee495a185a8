"""The checks the Trainer's config sections share: one error form, "trainer config: KEY ..."."""

from __future__ import annotations

from rankcore import config_loader


def require(cond: bool, name: str, msg: str) -> None:
    """ValueError "trainer config: `name` `msg`" unless `cond`."""
    if not cond:
        raise ValueError(f"trainer config: {name} {msg}")


def choice(value: str, name: str, choices: tuple[str, ...]) -> None:
    """`value` must be one of `choices` (with a did-you-mean hint when it is not)."""
    hint = config_loader.did_you_mean(str(value), choices)
    require(value in choices, name, f"must be one of {list(choices)}, got {value!r}{hint}")
