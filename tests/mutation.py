"""One entry of the mutation table (tests/mutations.py) and how it is applied."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Mutation:
    name: str
    promise: str
    file: str
    find: str
    replace: str
    tests: tuple[str, ...]


def apply(mutation: Mutation, text: str) -> str:
    """`text` with the mutation applied; ValueError when its snippet is not there exactly once."""
    count = text.count(mutation.find)
    if count != 1:
        raise ValueError(
            f"mutation {mutation.name}: {mutation.file} holds its snippet {count} times "
            f"(must be once): {mutation.find!r}"
        )
    return text.replace(mutation.find, mutation.replace)
