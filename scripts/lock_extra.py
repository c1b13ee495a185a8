"""Writes the part of a hashed lock that another lock does not already pin.

    python scripts/lock_extra.py FULL.lock BASE.lock > EXTRA.lock

`uv pip compile X -c requirements.lock --generate-hashes` pins X's whole closure, most of which
requirements.lock already installs (at the same versions: -c). The image installs the extra lock
on top of the synced environment with `--no-deps --require-hashes` (the GPU variant's nvidia-*
wheels, deploy/Dockerfile), so it must hold exactly what is new. `make lock-gpu` runs this.
"""

from __future__ import annotations

import re
import sys

_REQUIREMENT = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(\[[^\]]*\])?==")


def _name(line: str) -> str | None:
    match = _REQUIREMENT.match(line)
    return re.sub(r"[-_.]+", "-", match.group(1)).lower() if match else None


def blocks(text: str) -> list[tuple[str, str]]:
    """(normalized name, the requirement's lines: hashes and `# via` comments) in file order."""
    found: list[tuple[str, list[str]]] = []
    for line in text.splitlines():
        name = _name(line)
        if name is not None:
            found.append((name, [line]))
        elif found and (line.startswith(" ") or not line.strip()):
            found[-1][1].append(line)
    return [(name, "\n".join(lines).rstrip()) for name, lines in found]


def extra(full: str, base: str) -> str:
    pinned = {name for name, _ in blocks(base)}
    kept = [block for name, block in blocks(full) if name not in pinned]
    return "\n".join(kept) + "\n"


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    with open(argv[0]) as f, open(argv[1]) as g:
        sys.stdout.write(extra(f.read(), g.read()))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
