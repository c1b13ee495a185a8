"""Breaks each documented promise on purpose and checks that its tests go red (`make mutations`).

A test that still passes when the promise it claims to check is broken proves nothing
(issue 20). The table of mutations is `tests/mutations.py`: each one replaces one exact
snippet of production code with a broken version, runs the tests named for that promise,
and restores the file. A mutation is *killed* when pytest fails, *survived* when it passes.

The mutation is applied in the working tree itself, not in a copy, because several tests
start other processes (Beam workers, a SIGKILLed Trainer, LocalDagRunner child runs) that
import this checkout through the editable install: a copy would leave them running the
unbroken code. So the script refuses to start on a file with uncommitted changes, and puts
the original bytes back in a `finally` (also on Ctrl-C) before it moves on.

Written by hand rather than with mutmut: mutmut mutates every operator it finds and reruns the
whole suite per mutant (hours here), while this checks the handful of behaviours the docs
promise, each against the tests that claim them, in minutes per mutation.

    .venv/bin/python scripts/run_mutations.py               # every mutation
    .venv/bin/python scripts/run_mutations.py fusion resume # some, by name
    .venv/bin/python scripts/run_mutations.py --list
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))

from mutations import MUTATIONS, Mutation, apply  # noqa: E402

_FAILURE_LINE = re.compile(r"^(E\s+.+|FAILED .+|ERROR .+)$", re.M)


def _dirty(path: Path) -> bool:
    out = subprocess.run(
        ["git", "status", "--porcelain", "--", str(path)],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return bool(out.strip())


def run_one(mutation: Mutation, timeout: int) -> tuple[str, str, float]:
    """(verdict, first failure line, seconds): verdict is killed, SURVIVED or error."""
    path = REPO / mutation.file
    original = path.read_bytes()
    mutated = apply(mutation, original.decode())
    t0 = time.time()
    try:
        path.write_text(mutated)
        proc = subprocess.run(
            [
                str(REPO / ".venv/bin/pytest"),
                "-q",
                "-x",
                "-p",
                "no:cacheprovider",
                "-o",
                "addopts=",
                *mutation.tests,
            ],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=timeout,
            env=dict(os.environ, PYTHONDONTWRITEBYTECODE="1"),
        )
    except subprocess.TimeoutExpired:
        return "error", f"timed out after {timeout} s", time.time() - t0
    finally:
        path.write_bytes(original)
    seconds = time.time() - t0
    output = proc.stdout + proc.stderr
    if proc.returncode == 0:
        return "SURVIVED", "", seconds
    if proc.returncode in (1,):
        found = _FAILURE_LINE.findall(output)
        return "killed", (found[0] if found else output.strip().splitlines()[-1])[:200], seconds
    # 2: interrupted/collection error, 4: usage, 5: no tests collected: not a verdict.
    tail = output.strip().splitlines()[-1] if output.strip() else ""
    return "error", f"pytest exit {proc.returncode}: {tail}"[:200], seconds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("names", nargs="*", help="mutations to run (default: all)")
    parser.add_argument("--list", action="store_true", help="list the mutations and exit")
    parser.add_argument("--timeout", type=int, default=1800, help="seconds per mutation")
    args = parser.parse_args(argv)

    by_name = {m.name: m for m in MUTATIONS}
    if args.list:
        for m in MUTATIONS:
            print(f"{m.name:28} {m.file}  ({m.promise})")
        return 0
    unknown = [n for n in args.names if n not in by_name]
    if unknown:
        parser.error(f"no mutation named {', '.join(unknown)}; --list shows them")
    chosen = [by_name[n] for n in args.names] or list(MUTATIONS)
    dirty = sorted({m.file for m in chosen if _dirty(REPO / m.file)})
    if dirty:
        print(f"uncommitted changes in {', '.join(dirty)}: commit or stash them first")
        return 2

    rows = []
    for i, mutation in enumerate(chosen, 1):
        print(f"[{i}/{len(chosen)}] {mutation.name}: {mutation.file} ...", flush=True)
        verdict, line, seconds = run_one(mutation, args.timeout)
        print(f"    {verdict} in {seconds:.0f} s  {line}", flush=True)
        rows.append((mutation, verdict, line, seconds))

    print("\n| mutation | file | verdict | s | first failure |\n|---|---|---|---:|---|")
    for mutation, verdict, line, seconds in rows:
        cell = line.replace("|", "\\|")
        print(f"| {mutation.name} | `{mutation.file}` | {verdict} | {seconds:.0f} | `{cell}` |")
    survived = [m.name for m, v, _, _ in rows if v != "killed"]
    print(f"\n{len(rows) - len(survived)} of {len(rows)} killed", end="")
    print(f"; not killed: {', '.join(survived)}" if survived else "")
    return 1 if survived else 0


if __name__ == "__main__":
    sys.exit(main())
