"""docs/config-reference.md lists every config key and is up to date."""

from __future__ import annotations

import dataclasses
import typing

from pipelines import config_reference
from pipelines.config import PipelineConfig


def _leaf_keys(cls: type, prefix: str = "") -> set[str]:
    hints = typing.get_type_hints(cls)
    keys = set()
    for field in dataclasses.fields(cls):
        tp = hints[field.name]
        if dataclasses.is_dataclass(tp):
            keys |= _leaf_keys(tp, prefix + field.name + ".")
        elif field.name != "source":
            keys.add(prefix + field.name)
            if typing.get_origin(tp) is dict and dataclasses.is_dataclass(typing.get_args(tp)[1]):
                item = f"{prefix}{field.name}.<{field.name.rstrip('s')}>."
                keys |= _leaf_keys(typing.get_args(tp)[1], item)
    return keys


def test_reference_doc_is_current() -> None:
    text = config_reference.REFERENCE.read_text()
    assert config_reference.render(text) == text, (
        "docs/config-reference.md is out of date: "
        "run .venv/bin/python -m pipelines.config_reference --write"
    )


def test_reference_covers_every_key() -> None:
    listed = [row[0] for row in config_reference.rows()]
    assert set(listed) == _leaf_keys(PipelineConfig)
    assert len(listed) == len(set(listed))
    assert {"collection.documents", "trainer.learning_rate", "datagen.sampling.mode"} <= set(listed)
    # Mappings of sections document the section's keys once.
    assert "runner.kubeflow.components.<component>.memory_limit" in listed
