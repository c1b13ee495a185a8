"""Strict loading of typed dataclass configs from YAML, with `--set key=value` overrides.

Every failure is a `ConfigError` whose one-line message names the file and the dotted key, so a
typo fails before any component runs. Written by hand (rather than with pydantic) because the
TFX stack pins an older pydantic major for some of its dependencies and because the rules here are
small: dataclasses of scalars, lists, optionals and nested dataclasses.

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
from pathlib import Path
from typing import Any, TypeVar

import yaml

T = TypeVar("T")


class ConfigError(ValueError):
    """A config problem, with the file and key it concerns in the message."""


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


def build(cls: type[T], data: Any, source: str, prefix: str = "") -> T:
    """Builds dataclass `cls` from plain data, checking keys and types strictly."""
    where = prefix.rstrip(".") or "<top level>"
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(
            f"{source}: {where}: expected a mapping, got {type(data).__name__} {data!r}"
        )
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    kwargs = {}
    for key, value in data.items():
        if key not in fields:
            close = difflib.get_close_matches(str(key), fields, n=1)
            hint = f" (did you mean {prefix + close[0]!r}?)" if close else ""
            raise ConfigError(f"{source}: unknown key {prefix + str(key)!r}{hint}")
        kwargs[key] = _convert(hints[key], value, source, f"{prefix}{key}")
    try:
        return cls(**kwargs)
    except ConfigError:
        raise
    except (ValueError, TypeError) as e:
        raise ConfigError(f"{source}: {where}: {e}") from None


def _convert(tp: Any, value: Any, source: str, key: str) -> Any:
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        inner = [a for a in args if a is not type(None)]
        if len(inner) == 1:
            return _convert(inner[0], value, source, key)
        # `int | Literal["auto"]`: the first alternative that takes the value wins.
        for alternative in inner:
            try:
                return _convert(alternative, value, source, key)
            except ConfigError:
                continue
        expected = " or ".join(_expected(a) for a in inner)
        raise ConfigError(f"{source}: {key}: expected {expected}, got {_describe(value)}")
    if dataclasses.is_dataclass(tp):
        return build(tp, value, source, key + ".")
    if origin is list:
        if not isinstance(value, list):
            raise ConfigError(f"{source}: {key}: expected a list, got {_describe(value)}")
        return [_convert(args[0], v, source, f"{key}[{i}]") for i, v in enumerate(value)]
    if origin is dict:
        if not isinstance(value, dict):
            raise ConfigError(f"{source}: {key}: expected a mapping, got {_describe(value)}")
        return {str(k): _convert(args[1], v, source, f"{key}.{k}") for k, v in value.items()}
    if origin is typing.Literal:
        if value not in args:
            choices = ", ".join(repr(a) for a in args)
            raise ConfigError(f"{source}: {key}: {value!r} is not one of {choices}")
        return value
    if tp is float:
        # YAML 1.1 reads 3e-4 (no dot) as a string; accept what is plainly a number.
        if isinstance(value, str) and _NUMBER.fullmatch(value.strip()):
            return float(value)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"{source}: {key}: expected a number, got {_describe(value)}")
        return float(value)
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{source}: {key}: expected an integer, got {_describe(value)}")
        return value
    if tp is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"{source}: {key}: expected true/false, got {_describe(value)}")
        return value
    if tp is str:
        if not isinstance(value, str):
            raise ConfigError(f"{source}: {key}: expected a string, got {_describe(value)}")
        return value
    if tp is Any:
        return value
    raise ConfigError(f"{source}: {key}: unsupported config type {tp!r}")


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
    """A config check for `__post_init__`: `value` must be one of `choices`."""
    if value not in choices:
        raise ValueError(f"{name}: {value!r} is not one of {', '.join(choices)}")


def positive(name: str, value: float) -> None:
    """A config check for `__post_init__`: `value` must be > 0."""
    if value <= 0:
        raise ValueError(f"{name}: must be > 0, got {value}")
