"""Strict loading of typed dataclass configs from YAML, with `--set key=value` overrides.

Every failure is a `ConfigError` whose message names the file (or the `--set`) and the dotted key,
so a typo fails before any component runs; `build` collects every problem it finds, across
sections, into one ConfigError with a line each, so that a new config is fixed in one round
rather than one run per mistake. Written by hand (rather than with pydantic) because the
TFX stack pins an older pydantic major for some of its dependencies and because the rules here are
small: dataclasses of scalars, lists, optionals and nested dataclasses.

A key that moved keeps failing, but with its new place: a dataclass may declare
`MOVED_KEYS: ClassVar[dict[str, str]] = {old key: new dotted key}` (both relative to that
section; each leading `../` of the new key climbs one section, and text after `: ` is the value
to write there), and the loader (`build` for files, `check_key` for `--set`) reports
`trainer.feedback_docs is now trainer.ranking.feedback.docs` (or
`trainer.dual_encoder.frozen_documents is now trainer.recipe.type: frozen_documents`) instead of
an unknown key.

In rankcore because each config lives beside its owner (pipelines/config.py, trainer_module/
config.py, the components' config.py) and every one is built with this same loader.
"""

from __future__ import annotations

import dataclasses
import difflib
import os
import re
import types
import typing
from collections.abc import Iterable
from pathlib import Path
from typing import Any, TypeVar

import yaml

T = TypeVar("T")


class ConfigError(ValueError):
    """Config problems, with the file (or `--set`) and key each concerns in the message.

    One exception type for one problem or several, so that every caller catches one thing:
    `problems` holds one line per problem and str() joins them with newlines (one problem:
    one line, as before).
    """

    def __init__(self, problems: str | Iterable[str]) -> None:
        lines = [problems] if isinstance(problems, str) else list(dict.fromkeys(problems))
        super().__init__("\n".join(lines))
        self.problems: list[str] = lines

    def __reduce__(self) -> tuple[Any, ...]:
        return (ConfigError, (self.problems,))


def suggest(value: str, choices: Iterable[str]) -> list[str]:
    """The choices `value` was probably meant to be: a close spelling (difflib), else those it
    begins or is part of (`beir` -> `beir_corpus`, which difflib's ratio of 0.53 misses)."""
    choices = [str(c) for c in choices]
    close = difflib.get_close_matches(value, choices, n=1)
    if close:
        return close
    low = value.lower()
    if len(low) < 3:
        return []
    starts = [c for c in choices if c.lower().startswith(low) or low.startswith(c.lower())]
    return starts or [c for c in choices if low in c.lower()]


def did_you_mean(value: str, choices: Iterable[str], prefix: str = "") -> str:
    """` (did you mean X?)` for `suggest`'s choices (each after `prefix`), or ""."""
    names = [prefix + c for c in suggest(value, choices)][:3]
    return f" (did you mean {' or '.join(names)}?)" if names else ""


_NUMBER = re.compile(r"[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?")
_ENV_PATTERN = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


def expand_env(value: str, defaults: dict[str, str] | None = None) -> str:
    """Expands ${VAR} and ${VAR:-default}; `defaults` supplies project-level fallbacks."""

    def replace(match: re.Match) -> str:
        name, default = match.group(1), match.group(2)
        if name in os.environ:
            return os.environ[name]
        if default is not None:
            return default
        if defaults and name in defaults:
            return defaults[name]
        raise KeyError(name)

    return _ENV_PATTERN.sub(replace, value)


def parse_override(text: str) -> tuple[str, Any]:
    """Parses `a.b.c=value`; the value is read as YAML so numbers and lists keep their type."""
    if "=" not in text:
        raise ConfigError(f"--set {text!r}: expected KEY=VALUE, e.g. trainer.learning_rate=3e-4")
    key, raw = text.split("=", 1)
    key = key.strip()
    if not key:
        raise ConfigError(f"--set {text!r}: empty key")
    try:
        value = yaml.safe_load(raw) if raw.strip() else ""
    except yaml.YAMLError as e:
        raise ConfigError(f"--set {key}: value {raw!r} is not valid YAML ({e})") from None
    return key, value


def apply_override(data: dict, key: str, value: Any) -> None:
    """Sets a dotted key in nested dicts, creating intermediate dicts."""
    node = data
    parts = key.split(".")
    for part in parts[:-1]:
        child = node.get(part)
        if child is None:
            child = node[part] = {}
        if not isinstance(child, dict):
            raise ConfigError(f"--set {key}: {part!r} is a value, not a section")
        node = child
    node[parts[-1]] = value


def moved_to(cls: type, key: str) -> str | None:
    """Where `key` of dataclass `cls` moved (its `MOVED_KEYS`, relative to `cls`), or None."""
    return getattr(cls, "MOVED_KEYS", {}).get(key)


def moved_key(prefix: str, new: str) -> str:
    """A MOVED_KEYS target `new` as a full dotted key under `prefix` (the old key's section,
    "trainer.dual_encoder." or ""): each leading `../` climbs one section."""
    sections = prefix.rstrip(".").split(".") if prefix.rstrip(".") else []
    while new.startswith("../"):
        if not sections:
            raise ValueError(f"MOVED_KEYS target {new!r} climbs above the top of the config")
        sections.pop()
        new = new[3:]
    return ".".join([*sections, new])


def check_key(cls: type, key: str) -> None:
    """Raises ConfigError `--set KEY: no such key (did you mean ...?)` when the dotted `key`
    names no field of dataclass `cls` (a `dict` field takes any name at its level), or
    `--set KEY: KEY is now NEW` for a key that moved. Checked before the override is applied,
    so that a typo in `--set` is reported against the --set: the config file does not hold
    it."""
    tp: Any = cls
    parts = key.split(".")
    for i, part in enumerate(parts):
        tp = _optional_inner(tp)
        done = ".".join(parts[:i])
        if dataclasses.is_dataclass(tp):
            names = [f.name for f in dataclasses.fields(tp)]
            if part not in names:
                rest = "".join(f".{p}" for p in parts[i + 1 :])
                at = f"{done}." if done else ""
                if moved_to(tp, part):
                    new = moved_key(at, moved_to(tp, part))
                    raise ConfigError(f"--set {key}: {at}{part} is now {new}")
                close = [at + c + rest for c in suggest(part, names)]
                hint = f" (did you mean {' or '.join(close[:3])}?)" if close else ""
                raise ConfigError(f"--set {key}: no such key{hint}")
            tp = typing.get_type_hints(tp)[part]
        elif typing.get_origin(tp) is dict:
            tp = typing.get_args(tp)[1]
        else:
            raise ConfigError(f"--set {key}: {done} is a value, not a section")


def _optional_inner(tp: Any) -> Any:
    """`X | None` -> X (the one type a section or value can be besides null)."""
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        inner = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(inner) == 1:
            return inner[0]
    return tp


class _Origin:
    """Where a key's value came from, for the start of its problem line: the config file, or
    the `--set` that gave it (a problem in a --set value is not in the file)."""

    def __init__(self, source: str, overrides: Iterable[str]) -> None:
        self.source = source
        self.overrides = list(overrides)

    def _override_of(self, key: str) -> str | None:
        for set_key in self.overrides:
            if key == set_key or key.startswith((f"{set_key}.", f"{set_key}[")):
                return set_key
        return None

    def of(self, key: str) -> str:
        """The file, or `--set <key>` of the --set that gave `key`."""
        set_key = self._override_of(key)
        return self.source if set_key is None else f"--set {set_key}"

    def at(self, key: str) -> str:
        """`<file>: <key>`, or `--set <key>` when a --set gave it."""
        set_key = self._override_of(key)
        if set_key is None:
            return f"{self.source}: {key}"
        return f"--set {key}" if set_key == key else f"--set {set_key}: {key}"

    def section(self, prefix: str, where: str, message: str) -> str:
        """The start of a section's own check (`__post_init__`): the --set of a key of that
        section (or of a section inside it, `fusion.mode` under `trainer.ranking.`) the message
        names, else the file."""
        for set_key in self.overrides:
            if set_key.startswith(prefix):
                if re.search(rf"\b{re.escape(set_key[len(prefix) :])}\b", message):
                    return f"--set {set_key}: {where}"
        return f"{self.source}: {where}"


def build(
    cls: type[T], data: Any, source: str, prefix: str = "", overrides: Iterable[str] = ()
) -> T:
    """Builds dataclass `cls` from plain data, checking keys and types strictly.

    Every problem is collected, not only the first: unknown keys, wrong types and each
    section's own checks (`__post_init__`), across all sections, raised as one ConfigError with
    a line each. A section whose value failed to convert is not built (its checks would judge
    a default the user did not write); one with only unknown keys is, as written without them.
    `overrides`: the dotted keys set by `--set`, whose problems name the --set, not the file.
    """
    return _build(cls, data, _Origin(source, overrides), prefix)


def _build(cls: type[T], data: Any, origin: _Origin, prefix: str) -> T:
    where = prefix.rstrip(".") or "<top level>"
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(f"{origin.at(where)}: expected a mapping, got {_describe(data)}")
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    kwargs = {}
    problems: list[str] = []
    failed = False
    for key, value in data.items():
        if key not in fields and moved_to(cls, str(key)):
            new = moved_key(prefix, moved_to(cls, str(key)))
            problems.append(f"{origin.of(prefix + str(key))}: {prefix}{key} is now {new}")
            continue
        if key not in fields:
            close = suggest(str(key), fields)
            hint = f" (did you mean {prefix + close[0]!r}?)" if close else ""
            # From the file, or a mapping given whole by --set (load_config checks the --set
            # keys themselves first).
            problems.append(
                f"{origin.of(prefix + str(key))}: unknown key {prefix + str(key)!r}{hint}"
            )
            continue
        try:
            kwargs[key] = _convert(hints[key], value, origin, f"{prefix}{key}")
        except ConfigError as e:
            problems.extend(e.problems)
            failed = True
    if not failed:
        try:
            built = cls(**kwargs)
        except ConfigError as e:
            problems.extend(e.problems)
        except (ValueError, TypeError) as e:
            problems.append(_section_problem(str(e), origin, prefix, where, fields))
        else:
            if not problems:
                return built
    raise ConfigError(problems)


def _section_problem(
    message: str, origin: _Origin, prefix: str, where: str, fields: Iterable[str]
) -> str:
    """A section's own check as a problem line. Its message starting with one of the section's
    fields (`mode: 'triplet' is not one of ...`) names that key in full
    (`datagen.sampling.mode: ...`), from the file or its --set; other messages stay under the
    section (`trainer: trainer config: ...`)."""
    field_name, sep, rest = message.partition(": ")
    if sep and field_name in fields:
        return f"{origin.at(prefix + field_name)}: {rest}"
    return f"{origin.section(prefix, where, message)}: {message}"


def _convert(tp: Any, value: Any, origin: _Origin, key: str) -> Any:
    origin_type = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin_type in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        inner = [a for a in args if a is not type(None)]
        if len(inner) == 1:
            return _convert(inner[0], value, origin, key)
        # `int | Literal["auto"]`: the first alternative that takes the value wins.
        for alternative in inner:
            try:
                return _convert(alternative, value, origin, key)
            except ConfigError:
                continue
        expected = " or ".join(_expected(a) for a in inner)
        raise ConfigError(f"{origin.at(key)}: expected {expected}, got {_describe(value)}")
    if dataclasses.is_dataclass(tp):
        return _build(tp, value, origin, key + ".")
    if origin_type is list:
        if not isinstance(value, list):
            raise ConfigError(f"{origin.at(key)}: expected a list, got {_describe(value)}")
        return _convert_all([(args[0], v, f"{key}[{i}]") for i, v in enumerate(value)], origin)
    if origin_type is dict:
        if not isinstance(value, dict):
            raise ConfigError(f"{origin.at(key)}: expected a mapping, got {_describe(value)}")
        items = [(args[1], v, f"{key}.{k}") for k, v in value.items()]
        converted = _convert_all(items, origin)
        return dict(zip((str(k) for k in value), converted))
    if origin_type is typing.Literal:
        if value not in args:
            choices = ", ".join(repr(a) for a in args)
            raise ConfigError(f"{origin.at(key)}: {value!r} is not one of {choices}")
        return value
    if tp is float:
        # YAML 1.1 reads 3e-4 (no dot) as a string; accept what is plainly a number.
        if isinstance(value, str) and _NUMBER.fullmatch(value.strip()):
            return float(value)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"{origin.at(key)}: expected a number, got {_describe(value)}")
        return float(value)
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{origin.at(key)}: expected an integer, got {_describe(value)}")
        return value
    if tp is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"{origin.at(key)}: expected true/false, got {_describe(value)}")
        return value
    if tp is str:
        if isinstance(value, bool):  # YAML 1.1, as PyYAML reads it: off/no -> false, on/yes -> true
            raise ConfigError(
                f"{origin.at(key)}: expected a string, got {_describe(value)} (YAML reads an "
                'unquoted off, no, on or yes as true/false: quote it, e.g. "off")'
            )
        if not isinstance(value, str):
            raise ConfigError(f"{origin.at(key)}: expected a string, got {_describe(value)}")
        return value
    if tp is Any:
        return value
    raise ConfigError(f"{origin.at(key)}: unsupported config type {tp!r}")


def _convert_all(items: list[tuple[Any, Any, str]], origin: _Origin) -> list[Any]:
    """The elements of a list or mapping converted, every element's problems collected."""
    out, problems = [], []
    for tp, value, key in items:
        try:
            out.append(_convert(tp, value, origin, key))
        except ConfigError as e:
            problems.extend(e.problems)
    if problems:
        raise ConfigError(problems)
    return out


def _expected(tp: Any) -> str:
    if typing.get_origin(tp) is typing.Literal:
        return " or ".join(repr(a) for a in typing.get_args(tp))
    return {int: "an integer", float: "a number", str: "a string", bool: "true/false"}.get(
        tp, getattr(tp, "__name__", str(tp))
    )


def _describe(value: Any) -> str:
    return f"{type(value).__name__} {value!r}"


def to_dict(obj: Any) -> Any:
    """Dataclass -> plain dict (for JSON/YAML and for component parameters)."""
    return dataclasses.asdict(obj)


def load_yaml(path: Path) -> dict:
    """Reads a YAML mapping, naming the file and line of a syntax error."""
    try:
        text = path.read_text()
    except OSError as e:
        raise ConfigError(f"{path}: cannot read config ({e.strerror})") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        line = f":{mark.line + 1}" if mark else ""
        raise ConfigError(f"{path}{line}: invalid YAML ({getattr(e, 'problem', e)})") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping at the top level")
    return data


def one_of(name: str, value: str, choices: tuple[str, ...]) -> None:
    """A config check for `__post_init__`: `value` must be one of `choices`; the message
    suggests the choice probably meant (`beir` -> beir_corpus)."""
    if value not in choices:
        hint = did_you_mean(str(value), choices)
        raise ValueError(f"{name}: {value!r} is not one of {', '.join(choices)}{hint}")


def positive(name: str, value: float) -> None:
    """A config check for `__post_init__`: `value` must be > 0."""
    if value <= 0:
        raise ValueError(f"{name}: must be > 0, got {value}")
