"""rankcore/config_loader.py's MOVED_KEYS: a key that moved fails naming its new place, also
when it moved out of its section (`../`) and when the new place takes a value (`: value`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

import pytest

from rankcore import config_loader
from rankcore.config_loader import ConfigError


@dataclass
class _Inner:
    MOVED_KEYS: ClassVar[dict[str, str]] = {
        "flag": "../recipe.type: flagged",
        "width": "../recipe.flagged.width",
        "depth": "size.depth",
    }
    name: str = "x"


@dataclass
class _Top:
    inner: _Inner = field(default_factory=_Inner)


def test_moved_key_climbs_one_section_per_dots():
    assert config_loader.moved_key("trainer.inner.", "../recipe.type") == "trainer.recipe.type"
    assert config_loader.moved_key("inner.", "../recipe.type: x") == "recipe.type: x"
    assert config_loader.moved_key("a.b.", "../../c") == "c"
    assert config_loader.moved_key("a.", "b.c") == "a.b.c"
    with pytest.raises(ValueError, match="climbs above the top"):
        config_loader.moved_key("a.", "../../c")


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("flag", "trainer.recipe.type: flagged"),
        ("width", "trainer.recipe.flagged.width"),
        ("depth", "trainer.inner.size.depth"),
    ],
)
def test_a_moved_key_in_a_file_and_a_set_names_its_new_place(old, new):
    with pytest.raises(ConfigError, match=f"p.yaml: trainer.inner.{old} is now {new}$"):
        config_loader.build(_Top, {"inner": {old: 1}}, "p.yaml", "trainer.")
    top = new.removeprefix("trainer.")
    with pytest.raises(ConfigError, match=f"--set inner.{old}: inner.{old} is now {top}$"):
        config_loader.check_key(_Top, f"inner.{old}")


def test_an_unquoted_yaml_off_for_a_string_says_to_quote_it(tmp_path):
    """YAML 1.1 (PyYAML) reads `name: off` as false: the error names the key, the cause and
    the fix, and the quoted value loads."""
    path = tmp_path / "p.yaml"
    path.write_text("inner:\n  name: off\n")
    with pytest.raises(ConfigError, match=r'inner.name: expected a string, got bool False .*"off"'):
        config_loader.build(_Top, config_loader.load_yaml(path), str(path), "")
    path.write_text('inner:\n  name: "off"\n')
    assert (
        config_loader.build(_Top, config_loader.load_yaml(path), str(path), "").inner.name == "off"
    )
