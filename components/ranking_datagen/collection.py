"""Reading a whole collection for RankingDataGen, on top of the per-file readers.

Queries, qrels, runs and explicit split lists are read in the driver into dicts that remember
where each entry came from (file, line), so collection-level checks (a qrels qid with no query, a
judged docid missing from the corpus) can name the offending line. Documents are read in Beam,
one file per task; their bad records go to a side output that the executor summarizes.

Every bad record goes through one `BadRecordReport`: under `on_bad_record: fail` the first one
raises `BadRecordError` ("<file>:<line>: <problem>"); under `skip` it is dropped and counted per
kind, with a few examples kept for summary.json.
"""

from __future__ import annotations

import contextlib
import re
from collections import Counter
from collections.abc import Iterable, Iterator
from typing import Any, NamedTuple

import apache_beam as beam
import tensorflow as tf

from components.ranking_datagen import readers
from components.ranking_datagen.readers import BadRecord, BadRecordError, sniff

# Kinds of bad records in the summary: the four reader kinds plus the query split lists/result.
SPLITS_KIND = "splits"
KINDS = (*readers.KINDS, SPLITS_KIND)
MAX_EXAMPLES = 5


class Location(NamedTuple):
    path: str
    line: int


class BadRecordReport:
    """Applies the bad-record policy and keeps counts and a few examples per kind."""

    def __init__(self, policy: str, max_examples: int = MAX_EXAMPLES):
        if policy not in readers.POLICIES:
            raise ValueError(f"on_bad_record must be one of {readers.POLICIES}, got {policy!r}")
        self.policy = policy
        self.max_examples = max_examples
        self._counts: Counter[str] = Counter()
        self._examples: dict[str, list[str]] = {}

    def add(self, kind: str, bad: BadRecord) -> None:
        """Raises under "fail"; under "skip" counts the record (the caller drops it)."""
        if self.policy == "fail":
            raise BadRecordError(bad)
        self.add_counted(kind, 1, [bad])

    def add_counted(self, kind: str, count: int, examples: Iterable[BadRecord]) -> None:
        """Merges records already counted elsewhere (the documents, counted in Beam)."""
        if count <= 0:
            return
        self._counts[kind] += count
        kept = self._examples.setdefault(kind, [])
        for bad in examples:
            if len(kept) >= self.max_examples:
                break
            kept.append(str(bad))

    def count(self, kind: str | None = None) -> int:
        return sum(self._counts.values()) if kind is None else self._counts[kind]

    def first_example(self, kind: str) -> str | None:
        """The first bad record of `kind` counted (its text), for messages."""
        return next(iter(self._examples.get(kind, [])), None)

    def to_dict(self) -> dict[str, Any]:
        """The summary.json entry: {"total", "by_kind", "examples"} (kinds in KINDS order)."""
        kinds = [k for k in KINDS if self._counts[k]]
        kinds += sorted(k for k in self._counts if k not in KINDS and self._counts[k])
        return {
            "total": self.count(),
            "by_kind": {k: self._counts[k] for k in kinds},
            "examples": {k: list(self._examples.get(k, [])) for k in kinds},
        }


def expand_paths(pattern: str) -> list[str]:
    """Sorted files matching a path or glob (sorted: file order decides which duplicate wins)."""
    paths = sorted(tf.io.gfile.glob(pattern))
    if not paths:
        raise FileNotFoundError(f"no file matches {pattern}")
    return paths


def _read_first_copies(
    kind: str, fmt: str, pattern: str, report: BadRecordReport, where: dict[Any, Location]
) -> Iterator[Any]:
    """The good records of the files matching ``pattern``, in file order, each located in
    ``where`` under its reader key (qid, or the (qid, docid) pair). A key already located in an
    earlier file is a duplicate naming the first copy, which is kept (the reader checks one
    file)."""
    reader = readers.get_reader(kind, fmt)
    paths = expand_paths(pattern)
    items = good = 0
    for path in paths:
        for item in reader.read_with_lines(path):
            items += 1
            if isinstance(item, BadRecord):
                report.add(kind, item)
                continue
            line, record = item
            key = reader.key(record)
            first = where.get(key)
            if first is not None:
                problem = (
                    f"duplicate {reader.describe_key(record)} (first seen at "
                    f"{first.path}:{first.line})"
                )
                report.add(kind, BadRecord(path, line, problem))
                continue
            where[key] = Location(path, line)
            good += 1
            yield record
    # No record at all (an empty file, or the wrong block format), or only bad ones (skipped):
    # said here, as it is, rather than later as every judgment lacking its query.
    if not items:
        raise readers.EmptyInputError(sniff.no_records_message(paths, kind, fmt))
    if not good:
        raise readers.EmptyInputError(
            f"{pattern}: every one of its {items} {sniff.FILE_NAMES[kind]} records is bad "
            f"(skipped under datagen.on_bad_record: skip; the first: {report.first_example(kind)})"
            f" ({sniff.PATH_KEYS[kind]}, read as {fmt})"
        )


def check_first_record(pattern: str, kind: str, fmt: str, policy: str, **options: Any) -> None:
    """The config-time check of a local collection key: its files are not all empty, and the
    first record of the first non-empty one is read as ``fmt`` (reading only that far).

    Raises EmptyInputError for empty files; BadRecordError when that record is bad under
    policy "fail", or, whatever the policy, when the file is in another format (the reader's
    own error path, ``sniff.diagnose_first_record``). A block format (TREC SGML, topics,
    Cranfield) on a file whose first lines hold none of its blocks is not read further (its
    reader would scan the whole file for one): that is only refused when the file looks like
    another format; RankingDataGen finds the rest."""
    reader = readers.get_reader(kind, fmt, **options)
    paths = expand_paths(pattern)
    for path in paths:
        lines = sniff.head(path)
        if not lines:
            continue
        if kind in BLOCK_FORMATS.get(fmt, ()) and not sniff.looks_like(lines, kind, fmt):
            guess = sniff.guess_from_lines(lines, kind)
            if guess is not None:
                raise readers.EmptyInputError(sniff.no_records_message([path], kind, fmt))
            return
        with contextlib.closing(reader.read_with_lines(path)) as items:
            for item in items:
                if isinstance(item, BadRecord) and policy == "fail":
                    raise BadRecordError(item)
                return
    raise readers.EmptyInputError(sniff.no_records_message(paths, kind, fmt))


# Formats whose records are blocks found anywhere in a file (by kind): a file in another
# format gives no record at all rather than a bad one.
BLOCK_FORMATS: dict[str, tuple[str, ...]] = {
    "trec_sgml": (readers.DOCUMENTS,),
    "trec_topics": (readers.QUERIES,),
    "cranfield": (readers.DOCUMENTS, readers.QUERIES),
}


def read_queries(pattern: str, fmt: str, report: BadRecordReport) -> dict[str, str]:
    """qid -> text. A qid repeated in another file is a duplicate (the reader checks one file)."""
    where: dict[str, Location] = {}
    return {q.qid: q.text for q in _read_first_copies(readers.QUERIES, fmt, pattern, report, where)}


class Judgments(NamedTuple):
    """Qrels as qid -> {docid: relevance}, plus where each judgment was read."""

    qrels: dict[str, dict[str, int]]
    where: dict[tuple[str, str], Location]


def read_qrels(pattern: str, fmt: str, report: BadRecordReport) -> Judgments:
    qrels: dict[str, dict[str, int]] = {}
    where: dict[tuple[str, str], Location] = {}
    for j in _read_first_copies(readers.QRELS, fmt, pattern, report, where):
        qrels.setdefault(j.qid, {})[j.docid] = j.relevance
    return Judgments(qrels, where)


class Run(NamedTuple):
    """A TREC run as qid -> {docid: score}, plus where each entry was read."""

    scores: dict[str, dict[str, float]]
    where: dict[tuple[str, str], Location]


def read_run(pattern: str, report: BadRecordReport) -> Run:
    scores: dict[str, dict[str, float]] = {}
    where: dict[tuple[str, str], Location] = {}
    for entry in _read_first_copies(readers.RUN, "trec_run", pattern, report, where):
        scores.setdefault(entry.qid, {})[entry.docid] = entry.score
    return Run(scores, where)


def check_qrels(
    judgments: Judgments,
    queries: dict[str, str],
    docids: set[str] | None,
    report: BadRecordReport,
) -> None:
    """Drops (under skip) judgments whose qid has no query or whose docid is not a document.

    Checked in file order, so under fail the error names the first offending qrels line.
    `docids=None` checks the queries only (done before the documents are read, to fail fast).
    """
    located = sorted(
        ((loc, qid, docid) for (qid, docid), loc in judgments.where.items()),
        key=lambda t: t[0],
    )
    for loc, qid, docid in located:
        problems = []
        if qid not in queries:
            problems.append(f"qrels qid {qid!r} has no query")
        if docids is not None and docid not in docids:
            problems.append(f"judged docid {docid!r} (qid {qid!r}) is not in the corpus")
        if problems:
            report.add(readers.QRELS, BadRecord(loc.path, loc.line, "; ".join(problems)))
            del judgments.qrels[qid][docid]
            del judgments.where[(qid, docid)]
    for qid in [q for q, docs in judgments.qrels.items() if not docs]:
        del judgments.qrels[qid]


def check_run(run: Run, docids: set[str], report: BadRecordReport) -> None:
    """Drops (under skip) run entries whose docid is not a document: no text to encode."""
    located = sorted(
        ((loc, qid, docid) for (qid, docid), loc in run.where.items() if docid not in docids),
        key=lambda t: t[0],
    )
    for loc, qid, docid in located:
        report.add(
            readers.RUN,
            BadRecord(
                loc.path, loc.line, f"run docid {docid!r} (qid {qid!r}) is not in the corpus"
            ),
        )
        del run.scores[qid][docid]
        del run.where[(qid, docid)]


# Documents per element out of the reader: Beam's per-element cost (and pickling between
# workers) is paid per batch, and the word counting downstream wants batches anyway.
DOCUMENT_BATCH = 1024


class _ReadDocumentFile(beam.DoFn):
    """(file index, path) -> batches of (docid, text, file index, start line); bad records one
    by one to a tagged output.

    Under "fail" the first bad record raises BadRecordError; either way each one is counted in
    `rankpipe/bad_records_documents`, and every good one in `rankpipe/documents`.
    """

    def __init__(self, reader: readers.Reader, policy: str, batch_size: int):
        self._reader = reader
        self._policy = policy
        self._batch_size = batch_size

    def setup(self) -> None:
        self._bad = readers.bad_records_counter(readers.DOCUMENTS)
        self._docs = beam.metrics.Metrics.counter(readers.METRICS_NAMESPACE, "documents")

    def process(self, element: tuple[int, str]):
        index, path = element
        batch: list[tuple[str, str, int, int]] = []
        for item in self._reader.read_with_lines(path):
            if isinstance(item, BadRecord):
                self._bad.inc()
                if self._policy == "fail":
                    raise BadRecordError(item)
                yield beam.pvalue.TaggedOutput(readers.BAD_RECORDS_TAG, item)
                continue
            line, doc = item
            batch.append((doc.docid, doc.text, index, line))
            if len(batch) == self._batch_size:
                self._docs.inc(len(batch))
                yield batch
                batch = []
        if batch:
            self._docs.inc(len(batch))
            yield batch


class ReadDocuments(beam.PTransform):
    """Document files -> {"batches": lists of (docid, text, file index, start line),
    "bad": BadRecord}.

    With `spread`, batches are reshuffled after reading so that the work downstream spreads over
    all workers even when the collection is a single file (one file = one task).
    """

    def __init__(
        self,
        pattern: str,
        fmt: str,
        policy: str,
        allow_empty_text: bool = False,
        spread: bool = True,
        batch_size: int = DOCUMENT_BATCH,
    ):
        super().__init__()
        self._paths = expand_paths(pattern)
        self._policy = policy
        self._spread = spread
        self._batch_size = batch_size
        self._reader = readers.get_reader(readers.DOCUMENTS, fmt, allow_empty_text=allow_empty_text)

    @property
    def paths(self) -> list[str]:
        return self._paths

    def expand(self, p):
        out = (
            p
            | "Paths" >> beam.Create(list(enumerate(self._paths)))
            | "Read"
            >> beam.ParDo(
                _ReadDocumentFile(self._reader, self._policy, self._batch_size)
            ).with_outputs(readers.BAD_RECORDS_TAG, main="batches")
        )
        batches = out.batches
        if self._spread:
            batches = batches | "Spread" >> beam.Reshuffle()
        return {"batches": batches, "bad": out[readers.BAD_RECORDS_TAG]}


class DocumentTexts(beam.PTransform):
    """The collection's documents as the examples hold them: {"texts": batches of (docid,
    text), one per docid, "bad": BadRecord}, read by ReadDocuments under the same policy.

    A docid found in several files keeps its first file's copy (the lowest file index, then
    line), as the encoding pass does (passes.encoding_pass keeps copies[0]); the other copies are
    bad records of pass 1. What a step that must see the same texts as the examples reads (the
    CorpusEncoder), so that the two never drift apart."""

    def __init__(
        self,
        pattern: str,
        fmt: str,
        policy: str,
        allow_empty_text: bool = False,
        batch_size: int = DOCUMENT_BATCH,
    ):
        super().__init__()
        self._read = ReadDocuments(pattern, fmt, policy, allow_empty_text, batch_size=batch_size)
        self._batch_size = batch_size

    @property
    def paths(self) -> list[str]:
        return self._read.paths

    def expand(self, p):
        out = p | "ReadDocuments" >> self._read
        if len(self._read.paths) == 1:  # a file's docids are unique (the reader checks)
            texts = out["batches"] | "Texts" >> beam.Map(lambda b: [(d[0], d[1]) for d in b])
            return {"texts": texts, "bad": out["bad"]}
        texts = (
            out["batches"]
            | "ByDocid" >> beam.FlatMap(lambda b: [(d[0], (d[2], d[3], d[1])) for d in b])
            | "FirstCopy" >> beam.CombinePerKey(min)  # (file index, line, text): lifted
            | "Text" >> beam.MapTuple(lambda docid, copy: (docid, copy[2]))
            | "Batch"
            >> beam.BatchElements(min_batch_size=self._batch_size, max_batch_size=self._batch_size)
        )
        return {"texts": texts, "bad": out["bad"]}


_RECORD_RE = re.compile(r"(?P<path>\S.*?):(?P<line>\d+): (?P<problem>.*?)(?: \[while running .*)?$")


def _parse_bad_record(text: str) -> BadRecord | None:
    m = _RECORD_RE.match(text.strip())
    if m is None:
        return None
    return BadRecord(m.group("path"), int(m.group("line")), m.group("problem"))


def unwrap_bad_record_error(error: BaseException) -> BadRecordError | None:
    """The BadRecordError behind an exception from a Beam pipeline, or None.

    In-process runners re-raise it as a new BadRecordError built from the message with
    " [while running '<step>']" appended (so its `bad_record` is that string); multi-process
    ones raise a RuntimeError holding the worker's traceback as text. Either way the run should
    stop with the plain "<file>:<line>: <problem>" message.
    """
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, BadRecordError):
            bad = current.bad_record
            if not isinstance(bad, BadRecord):
                bad = _parse_bad_record(str(bad))
            if bad is not None:
                return BadRecordError(bad)
        current = current.__cause__ or current.__context__
    for line in str(error).splitlines():
        if "BadRecordError: " in line:
            bad = _parse_bad_record(line.split("BadRecordError: ", 1)[1])
            if bad is not None:
                return BadRecordError(bad)
    return None
