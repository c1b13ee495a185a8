"""The mutation table (tests/mutations.py, `make mutations`) still matches the code: every
snippet is in its file exactly once and every test it names exists, so a refactor that moves
the code breaks this test rather than silently turning a mutation into a no-op."""

from __future__ import annotations

from pathlib import Path

import pytest
from mutations import MUTATIONS, Mutation, apply

REPO = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("mutation", MUTATIONS, ids=lambda m: m.name)
def test_mutation_applies_once_and_names_real_tests(mutation: Mutation) -> None:
    text = (REPO / mutation.file).read_text()
    assert apply(mutation, text) != text
    for test in mutation.tests:
        path, _, name = test.partition("::")
        assert (REPO / path).is_file(), f"{mutation.name}: no test file {path}"
        if name:
            assert f"def {name.split('[')[0]}(" in (REPO / path).read_text(), (
                f"{mutation.name}: no test {name} in {path}"
            )


def test_names_are_unique() -> None:
    names = [m.name for m in MUTATIONS]
    assert len(names) == len(set(names))
