"""Which supported format a collection file looks like, from its first lines.

Why: a file read in the wrong format fails on its first record with a column count or a JSON
error that does not say the cause, and ``on_bad_record: skip`` would then drop every record.
The readers' error path (``base.Reader.read_with_lines``: a file whose first record fails;
``no_records_message``: a file with no record at all) asks ``guess_format`` what the file looks
like, to say "looks like BEIR qrels (3 tab-separated fields), not trec_qrels (...): set
collection.qrels_format: beir_qrels"; ``rankpipe init`` asks it to fill in a new config's
formats. Cheap: it reads at most ``MAX_LINES`` non-blank lines (and ``MAX_BYTES``), gunzipping
``*.gz`` as the readers do; local paths with plain ``open`` (no TensorFlow import), other URIs
through ``tf.io.gfile``.

The tests are on the first lines only, each a format's plain signature (``<DOC>``, ``<top>``,
``.I``, a JSON object with ``_id``, the column layout), so a guess is a hint for a message, not
a parse: a file is judged by its reader.
"""

from __future__ import annotations

import gzip
import io
import json
import re
from collections.abc import Callable, Sequence
from typing import NamedTuple

from components.ranking_datagen.readers import base

MAX_LINES = 5
MAX_BYTES = 1 << 16
GZIP_MAGIC = b"\x1f\x8b"

# (kind, format) -> what the format looks like, for messages.
DESCRIPTIONS: dict[tuple[str, str], str] = {
    (base.DOCUMENTS, "trec_sgml"): "TREC SGML (<DOC> blocks)",
    (base.DOCUMENTS, "cranfield"): "Cranfield SMART (.I blocks)",
    (base.DOCUMENTS, "beir_corpus"): "BEIR corpus (JSON lines)",
    (base.DOCUMENTS, "msmarco_tsv"): "MS MARCO TSV (id<TAB>text)",
    (base.QUERIES, "trec_topics"): "TREC topics (<top> blocks)",
    (base.QUERIES, "cranfield"): "Cranfield SMART (.I blocks)",
    (base.QUERIES, "beir_queries"): "BEIR queries (JSON lines)",
    (base.QUERIES, "msmarco_tsv"): "MS MARCO TSV (id<TAB>text)",
    (base.QRELS, "beir_qrels"): "BEIR qrels (3 tab-separated fields)",
    (base.QRELS, "trec_qrels"): "TREC qrels (4 columns: qid iter docid rel)",
    (base.QRELS, "cranfield"): "Cranfield cranqrel (3 columns: qid docid code)",
    (base.RUN, "trec_run"): "a TREC run (6 columns: qid Q0 docid rank score runid)",
}

# The config key naming each kind's format (a run has one format; its key is its path's).
FORMAT_KEYS: dict[str, str] = {
    base.DOCUMENTS: "collection.documents_format",
    base.QUERIES: "collection.queries_format",
    base.QRELS: "collection.qrels_format",
    base.RUN: "collection.first_stage_run",
}
# The config key naming each kind's file, and what the kind's records are called.
PATH_KEYS: dict[str, str] = {
    base.DOCUMENTS: "collection.documents",
    base.QUERIES: "collection.queries",
    base.QRELS: "collection.qrels",
    base.RUN: "collection.first_stage_run",
}
FILE_NAMES: dict[str, str] = {
    base.DOCUMENTS: "documents",
    base.QUERIES: "queries",
    base.QRELS: "qrels",
    base.RUN: "first-stage run",
}

_SGML_DOC = re.compile(r"<DOC(?:NO)?(?:\s[^>]*)?>", re.IGNORECASE)
_TOPIC = re.compile(r"<(?:top|num)(?:\s[^>]*)?>", re.IGNORECASE)
_SMART_I = re.compile(r"^\.I(?:\s|$)")
_INTEGER = re.compile(r"[-+]?\d+$")
_NUMBER = re.compile(r"[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$")


def _json_object_with_id(line: str) -> bool:
    text = line.strip()
    if not text.startswith("{"):
        return False
    try:
        return isinstance(json.loads(text), dict) and '"_id"' in text
    except json.JSONDecodeError:
        # A first line longer than MAX_BYTES is cut: judge its start.
        return '"_id"' in text


def _id_tab_text(line: str) -> bool:
    cols = line.split("\t")
    return len(cols) == 2 and bool(cols[0].strip()) and " " not in cols[0].strip()


def _tab_fields(line: str) -> list[str]:
    return [c.strip() for c in line.split("\t")]


def _layout(
    split: Callable[[str], list[str]],
    n: int,
    typed: Callable[[list[str]], object],
    more: bool = False,
) -> Callable[[Sequence[str]], bool]:
    """Every line has ``n`` columns (or more, with ``more``) and at least one has them typed
    (a bad value in one line, the reader's to report, leaves the layout recognised)."""

    def test(lines: Sequence[str]) -> bool:
        cols = [split(line) for line in lines]
        fits = all(len(c) == n or (more and len(c) > n) for c in cols)
        return fits and any(typed(c) for c in cols)

    return test


def _beir_qrels(lines: Sequence[str]) -> bool:
    header = lines[0].lower().startswith("query-id\t")
    body = lines[1:] if header else lines
    if not body:
        return header
    return _layout(_tab_fields, 3, lambda c: _INTEGER.match(c[2]))(body)


_trec_qrels = _layout(str.split, 4, lambda c: _INTEGER.match(c[3]))
_cranqrel = _layout(str.split, 3, lambda c: all(_INTEGER.match(x) for x in c))
_trec_run = _layout(str.split, 6, lambda c: _INTEGER.match(c[3]) and _NUMBER.match(c[4]), more=True)


def _any(test: Callable[[str], object]) -> Callable[[Sequence[str]], bool]:
    return lambda lines: any(test(line) for line in lines)


def _all(test: Callable[[str], object]) -> Callable[[Sequence[str]], bool]:
    return lambda lines: all(test(line) for line in lines)


def _not_comment(test: Callable[[Sequence[str]], bool]) -> Callable[[Sequence[str]], bool]:
    return lambda lines: test([x for x in lines if not x.lstrip().startswith("#")] or ["#"])


# Per kind, (format, test of the first non-blank lines), most specific first: a block format's
# tag on any of the first lines decides; a line format needs every line to fit.
_DETECTORS: dict[str, list[tuple[str, Callable[[Sequence[str]], bool]]]] = {
    base.DOCUMENTS: [
        ("trec_sgml", _any(_SGML_DOC.search)),
        ("cranfield", _any(_SMART_I.match)),
        ("beir_corpus", lambda lines: _json_object_with_id(lines[0])),
        ("msmarco_tsv", _all(_id_tab_text)),
    ],
    base.QUERIES: [
        ("trec_topics", _any(_TOPIC.search)),
        ("cranfield", _any(_SMART_I.match)),
        ("beir_queries", lambda lines: _json_object_with_id(lines[0])),
        ("msmarco_tsv", _all(_id_tab_text)),
    ],
    base.QRELS: [
        ("beir_qrels", _beir_qrels),
        ("trec_qrels", _not_comment(_trec_qrels)),
        ("cranfield", _cranqrel),
    ],
    base.RUN: [("trec_run", _not_comment(_trec_run))],
}


def _read_head(path: str, max_bytes: int) -> bytes:
    """The first ``max_bytes`` bytes of the file, gunzipped when its name ends in .gz."""
    if "://" in path:
        with base.open_binary(path) as f:
            return f.read(max_bytes)
    with open(path, "rb") as raw:
        if path.endswith(".gz"):
            with gzip.GzipFile(fileobj=raw) as f:
                return f.read(max_bytes)
        return raw.read(max_bytes)


def head(path: str, max_lines: int = MAX_LINES, max_bytes: int = MAX_BYTES) -> list[str]:
    """The first ``max_lines`` non-blank lines of the file (CR and a byte order mark dropped,
    undecodable bytes replaced), read from at most ``max_bytes`` bytes: an empty list for an
    empty or blank file."""
    data = _read_head(path, max_bytes)
    text = data.decode("utf-8", errors="replace").lstrip("\ufeff")
    lines = [line for line in io.StringIO(text, newline="\n")]
    if len(data) == max_bytes and len(lines) > 1 and not lines[-1].endswith("\n"):
        lines.pop()  # cut short by max_bytes: its columns would mislead
    return [line.rstrip("\r\n") for line in lines if line.strip()][:max_lines]


def is_gzip(path: str) -> bool:
    """Whether the file starts with gzip's magic bytes (read raw, whatever its name)."""
    if "://" in path:
        return False  # the readers' gfile path: not worth a second open
    with open(path, "rb") as f:
        return f.read(2) == GZIP_MAGIC


def guess_from_lines(lines: Sequence[str], kind: str) -> str | None:
    """The format name (a key of ``READERS[kind]``) these first non-blank lines of a file look
    like, or None when none fits (or there are no lines)."""
    if not lines:
        return None
    for fmt, test in _DETECTORS.get(kind, ()):
        if test(lines):
            return fmt
    return None


def looks_like(lines: Sequence[str], kind: str, fmt: str) -> bool:
    """Whether these first lines fit ``fmt`` (whichever other format would fit first)."""
    return bool(lines) and any(f == fmt and test(lines) for f, test in _DETECTORS.get(kind, ()))


def guess_format(path: str, kind: str) -> str | None:
    """The format name the file at ``path`` looks like for ``kind`` ("documents", "queries",
    "qrels" or "run"): a key of ``READERS[kind]``, or None (an empty file, one in no supported
    format, one that cannot be read). Reads only the first lines (``head``)."""
    try:
        return guess_from_lines(head(path), kind)
    except (OSError, ValueError, EOFError):
        return None


def describe(kind: str, fmt: str) -> str:
    """``fmt`` in words, e.g. "BEIR qrels (3 tab-separated fields)"."""
    return DESCRIPTIONS.get((kind, fmt), fmt)


def format_name(reader: base.Reader) -> str:
    """The registry name of ``reader``'s class (its class name when unregistered)."""
    from components.ranking_datagen.readers import READERS  # the registry imports this module

    names = [n for n, cls in READERS.get(reader.kind, {}).items() if cls is type(reader)]
    return names[0] if names else type(reader).__name__


def _set_format(kind: str, fmt: str) -> str:
    return f"set {FORMAT_KEYS[kind]}: {fmt}"


class Diagnosis(NamedTuple):
    """What a failing first record says about the whole file."""

    problem: str  # the record's problem, with the cause and the fix
    certain: bool  # the file is in another format: every record of it would be bad


def diagnose_first_record(path: str, kind: str, configured: str, problem: str) -> Diagnosis | None:
    """Why the first record of ``path``, read as format ``configured``, failed with ``problem``.

    None when the file looks like ``configured`` (a bad record in a file of the right format).
    Otherwise the problem names the cause: the format the file looks like ("looks like BEIR
    corpus (JSON lines), not msmarco_tsv (<problem>): set collection.documents_format:
    beir_corpus"; certain), a gzipped file without its .gz name (certain), or, when it looks
    like nothing known, that the file may not be ``configured`` at all (not certain).
    """
    try:
        lines = head(path)
        gzipped = not path.endswith(".gz") and is_gzip(path)
    except (OSError, ValueError, EOFError):
        return None
    if gzipped:
        return Diagnosis(
            f"{problem}; the file is gzip-compressed but its name does not end in .gz (the "
            "readers gunzip *.gz files only): rename it",
            True,
        )
    if looks_like(lines, kind, configured):
        return None
    guess = guess_from_lines(lines, kind)
    if guess is not None:
        return Diagnosis(
            f"looks like {describe(kind, guess)}, not {configured} ({problem}): "
            f"{_set_format(kind, guess)}",
            True,
        )
    return Diagnosis(
        f"{problem}; as this is the file's first record, the file may not be {configured} at "
        f"all: check {FORMAT_KEYS[kind]}",
        False,
    )


def no_records_message(paths: Sequence[str], kind: str, configured: str) -> str:
    """Why files matching a collection key gave no record at all (not even a bad one): empty
    ("<file>: the queries file is empty (collection.queries)"), or read as a block format
    (TREC SGML or topics) that finds none of its blocks, then naming the format they look
    like."""
    name, key = FILE_NAMES[kind], PATH_KEYS[kind]
    try:
        heads = {path: head(path) for path in paths}
    except (OSError, ValueError, EOFError):
        heads = {}
    filled = [path for path, lines in heads.items() if lines]
    if heads and not filled:
        where = paths[0] if len(paths) == 1 else f"{paths[0]} (and the {len(paths) - 1} more)"
        files = "file is" if len(paths) == 1 else f"{len(paths)} files are"
        return f"{where}: the {name} {files} empty ({key})"
    path = filled[0] if filled else paths[0]
    message = f"{path}: no {name} record found in it as {configured} ({FORMAT_KEYS[kind]})"
    guess = guess_from_lines(heads.get(path, []), kind)
    if guess is not None and guess != configured:
        message += f"; it looks like {describe(kind, guess)}: {_set_format(kind, guess)}"
    return message
