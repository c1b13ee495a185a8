"""The README stays a short page that works as written, and the reference docs describe the
system as it is.

- README.md is at most 200 lines.
- Every `rankpipe ...` (or `.venv/bin/rankpipe ...`) line in its code blocks names a command
  that exists: `rankpipe COMMAND --help` exits 0 (`rankpipe --version` for the version).
- Every make target it names is a Makefile target; every relative link resolves to a file.
- docs/*.md, but docs/results.md (figures with the run that produced them), and the shipped
  configs' comments hold no dates, commit hashes or issue numbers: that history goes to
  CHANGELOG.md.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
MAX_LINES = 200
# Commands with subcommands of their own: `rankpipe config show --help`, not `config --help`.
NESTED = {"config", "data"}

_FENCE = re.compile(r"^```[^\n]*\n(.*?)^```", re.S | re.M)
_COMMAND = re.compile(r"^(?:\.venv/bin/)?rankpipe\s+(.*)$")
_MAKE = re.compile(r"(?<![\w/.-])make ([a-z][\w-]*)")
_LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
_CODE_SPAN = re.compile(r"`([^`\n]+)`")

# History markers a reference doc must not hold.
ISSUE = re.compile(r"\b[Ii]ssues? #?\d+|(?<![\w/.-])#\d+\b")
DATE = re.compile(r"\b20\d\d-[01]\d-[0-3]\d\b")
COMMIT = re.compile(r"\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*\d)[0-9a-f]{7,40}\b")
HISTORY_DOCS_EXEMPT = {"results.md"}


def _readme() -> str:
    return README.read_text()


def _code_blocks(text: str) -> list[str]:
    return _FENCE.findall(text)


def _command_lines(text: str) -> list[str]:
    """The rankpipe command lines of the code blocks, continuations joined, comments cut."""
    lines = []
    for block in _code_blocks(text):
        joined = re.sub(r"\\\n\s*", " ", block)
        for line in joined.splitlines():
            line = re.sub(r"\s+#.*$", "", line.strip())
            if _COMMAND.match(line):
                lines.append(line)
    return lines


def _help_argv(line: str) -> list[str]:
    """`rankpipe run cranfield --set ...` -> [run, --help]; `rankpipe --version` -> [--version]."""
    words = _COMMAND.match(line).group(1).split()
    if words[0].startswith("-"):
        return [words[0]]
    argv = words[:2] if words[0] in NESTED and len(words) > 1 else words[:1]
    return [*argv, "--help"]


def _rankpipe() -> list[str]:
    script = Path(sys.executable).parent / "rankpipe"
    return [str(script)] if script.exists() else [sys.executable, "-m", "pipelines.cli"]


def test_readme_is_at_most_200_lines() -> None:
    n = len(_readme().splitlines())
    assert n <= MAX_LINES, f"README.md has {n} lines; at most {MAX_LINES} (move detail to docs/)"


def test_readme_names_the_commands_it_promises() -> None:
    argvs = {tuple(_help_argv(line)) for line in _command_lines(_readme())}
    for expected in (("run", "--help"), ("init", "--help"), ("--version",)):
        assert expected in argvs, f"README shows no `rankpipe {' '.join(expected[:1])}` line"


@pytest.mark.parametrize(
    "argv",
    sorted({tuple(_help_argv(line)) for line in _command_lines(README.read_text())}),
    ids=lambda argv: " ".join(argv),
)
def test_every_readme_command_exists(argv: tuple[str, ...]) -> None:
    proc = subprocess.run(
        [*_rankpipe(), *argv], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, (
        f"`rankpipe {' '.join(argv)}` exited {proc.returncode} "
        f"(README.md shows `rankpipe {argv[0]}`):\n{proc.stdout[-2000:]}{proc.stderr[-2000:]}"
    )


def test_every_make_target_in_the_readme_exists() -> None:
    text = _readme()
    code = "\n".join(_code_blocks(text) + _CODE_SPAN.findall(text))
    named = set(_MAKE.findall(code))
    assert {"demo", "test", "pretrained"} <= named
    makefile = (ROOT / "Makefile").read_text()
    targets = set(re.findall(r"^([\w-]+):", makefile, re.M))
    assert named <= targets, (
        f"make targets named in README.md but not in the Makefile: {named - targets}"
    )


def test_every_relative_link_in_the_readme_resolves() -> None:
    links = [link for link in _LINK.findall(_readme()) if not re.match(r"^[a-z]+:|^#", link)]
    assert links, "README.md links no docs"
    missing = [link for link in links if not (ROOT / link.split("#")[0]).exists()]
    assert not missing, f"README.md links files that do not exist: {missing}"


def _reference_docs() -> list[Path]:
    """docs/*.md but the figures' record, and the shipped configs, whose comments a user reads
    as the recipe's documentation."""
    docs = [p for p in (ROOT / "docs").glob("*.md") if p.name not in HISTORY_DOCS_EXEMPT]
    return sorted(docs + list((ROOT / "pipelines" / "configs").glob("*.yaml")))


def _history_markers(text: str) -> list[str]:
    """Issue numbers and commit hashes anywhere; dates outside code blocks (sample console
    output, e.g. `rankpipe runs`, shows when a run started)."""
    prose = _FENCE.sub("", text)
    found = []
    for pattern, where in ((ISSUE, text), (COMMIT, text), (DATE, prose)):
        for match in pattern.finditer(where):
            line = where[: match.start()].count("\n") + 1
            found.append(
                f"{match.group(0)!r} ({'line ' + str(line) if where is text else 'prose'})"
            )
    return found


@pytest.mark.parametrize("path", _reference_docs(), ids=lambda p: p.name)
def test_reference_docs_hold_no_history(path: Path) -> None:
    found = _history_markers(path.read_text())
    assert not found, (
        f"{path.relative_to(ROOT)} holds history: {found}. Describe the system as it is and "
        "move dates, commits and issue numbers to CHANGELOG.md (figures: docs/results.md)."
    )


def test_the_history_check_catches_what_it_names() -> None:
    assert _history_markers("Since issue 16 the evaluator ...")
    assert _history_markers("as in (issue 17) and (#12)")
    assert _history_markers("from a fresh clone of fd8534e")
    assert _history_markers("measured on 2026-11-25")
    assert not _history_markers("kubeflow/pipelines#11938; 1,127 s; 0.4521; version 1795566827")
    assert not _history_markers("```\n2026-11-23 09:45:29  demo  knrm\n```\n")
