"""Generates docs/config-reference.md from the config dataclasses themselves.

Each key's description is the comment on or just above its field, so the reference cannot drift
from the code: tests/pipelines/test_config_reference.py fails when docs/config-reference.md is out
of date. Regenerate with `.venv/bin/python -m pipelines.config_reference --write`; without
`--write` the table is printed.
"""

from __future__ import annotations

import dataclasses
import inspect
import re
import sys
import typing
from pathlib import Path

from pipelines.config import PipelineConfig

REFERENCE = Path(__file__).resolve().parent.parent / "docs" / "config-reference.md"
BEGIN, END = "<!-- config-reference:begin -->", "<!-- config-reference:end -->"
_FIELD = re.compile(r"^\s+(\w+):")


def _field_comments(cls: type) -> dict[str, str]:
    """Comment text per field: the trailing comment, or the comment lines right above it."""
    comments: dict[str, str] = {}
    pending: list[str] = []
    for line in inspect.getsource(cls).splitlines():
        stripped = line.strip()
        if stripped.startswith("#"):
            pending.append(stripped.lstrip("# ").strip())
            continue
        match = _FIELD.match(line)
        if match and not stripped.startswith(("def ", "return", "@")):
            trailing = line.split("  # ", 1)[1].strip() if "  # " in line else ""
            comments[match.group(1)] = " ".join(pending + ([trailing] if trailing else []))
        pending = []
    return comments


def _type_name(tp) -> str:
    if typing.get_origin(tp) is typing.Union:
        return " or ".join(_type_name(a) for a in typing.get_args(tp))
    if typing.get_origin(tp) is typing.Literal:
        return " or ".join(repr(a) for a in typing.get_args(tp))
    text = str(tp) if typing.get_origin(tp) else getattr(tp, "__name__", str(tp))
    text = re.sub(r"\b(?:\w+\.)+(\w+)", r"\1", text)  # pipelines.config.X -> X
    return text.replace("NoneType", "None").replace(" | ", " or ")


def _default(field: dataclasses.Field) -> str:
    if field.default is not dataclasses.MISSING:
        return repr(field.default)
    if field.default_factory is not dataclasses.MISSING:
        value = field.default_factory()
        if not dataclasses.is_dataclass(value):
            return repr(value)
    return ""


def rows(cls: type = PipelineConfig, prefix: str = "") -> list[tuple[str, str, str, str]]:
    hints = typing.get_type_hints(cls)
    comments = _field_comments(cls)
    out = []
    for field in dataclasses.fields(cls):
        if field.name == "source":
            continue
        tp = hints[field.name]
        key = prefix + field.name
        if dataclasses.is_dataclass(tp):
            out.extend(rows(tp, key + "."))
            continue
        desc = comments.get(field.name, "")
        out.append((key, _type_name(tp), _default(field), desc))
        value_type = typing.get_args(tp)[-1] if typing.get_origin(tp) is dict else None
        if dataclasses.is_dataclass(value_type):
            # A mapping of sections (e.g. one per component): document the section's keys once.
            out.extend(rows(value_type, f"{key}.<{field.name.rstrip('s')}>."))
    return out


def markdown() -> str:
    lines = ["| key | type | default | meaning |", "|---|---|---|---|"]
    for key, tp, default, desc in rows():
        cell = default.replace("|", "\\|")
        lines.append(
            f"| `{key}` | {tp} | `{cell}` | {desc} |"
            if default
            else f"| `{key}` | {tp} | | {desc} |"
        )
    return "\n".join(lines)


def render(text: str) -> str:
    """The text with the table between the begin and end markers regenerated."""
    start, end = text.index(BEGIN) + len(BEGIN), text.index(END)
    return text[:start] + "\n" + markdown() + "\n" + text[end:]


if __name__ == "__main__":
    if "--write" in sys.argv:
        REFERENCE.write_text(render(REFERENCE.read_text()))
    else:
        print(markdown())
