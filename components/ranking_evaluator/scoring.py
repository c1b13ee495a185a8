"""Batched scoring of eval examples with SavedModels inside Beam.

Two paths, chosen per model by its signatures (`embeds`):
- per pair (`ScoreExamples`, per_pair.py): tfx-bsl RunInference runs the `score_examples`
  signature over every (query, document) example. Cross-encoders (KNRM, Conv-KNRM,
  Transformer, BERT) read query and document together, so this is inherent to them.
- encode once (`EmbedAndScore`, embed_once.py): a dual encoder's score is the dot product of
  two L2-normalised vectors, so every distinct query and document of the split is embedded
  once (embedding.py) and each pair is scored by a dot product, as sentence-transformers
  scores a corpus (util.semantic_search over encode()d embeddings,
  https://www.sbert.net/examples/applications/semantic-search/); a model whose documents come
  from frozen sentence encoders takes them from the corpus-vectors artifact
  (corpus_documents.py). A dual encoder with pseudo-relevance feedback scores a query's whole
  list (rankcore/feedback.py).

Where a pass's time goes (docs/speed.md, "The pipeline's own cost"): `score_split` can fill a
`phases` dict from the pass's Beam metrics: how many SavedModels were loaded and for how long
(each worker process loads each model once: shared.Shared here, the same in tfx-bsl's
RunInference, whose `load_model_latency_milli_secs` counts its loads), and the seconds spent
inside the models, summed over workers; the rest of the pass is Beam (start-up, workers,
reading, joins, writing).

The transforms and helpers of both paths are importable from here, as before the split.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from typing import NamedTuple

import apache_beam as beam
import tensorflow as tf
from apache_beam.metrics.metric import MetricsFilter
from apache_beam.runners.runner import PipelineResult
from tfx.utils import io_utils

from components.ranking_evaluator.corpus_documents import FROM_CORPUS_VECTORS, CorpusDocuments
from components.ranking_evaluator.embed_once import EmbedAndScore, Feedback
from components.ranking_evaluator.embedding import DOCUMENTS_EMBEDDED, embeds
from components.ranking_evaluator.eval_examples import Scored
from components.ranking_evaluator.per_pair import ScoreExamples


def to_runs(scored: list[Scored], names: Sequence[str]) -> dict[str, dict[str, dict[str, float]]]:
    """(qid, docid, scores) rows -> one TREC-style run {qid: {docid: score}} per model name."""
    runs: dict[str, dict[str, dict[str, float]]] = {name: {} for name in names}
    for qid, docid, scores in scored:
        for name, score in zip(names, scores, strict=True):
            docs = runs[name].setdefault(qid, {})
            if docid in docs:
                raise ValueError(f"candidate {docid!r} of query {qid!r} appears twice")
            docs[docid] = score
    return runs


def read_scores(pattern: str) -> list[Scored]:
    """The (qid, docid, scores) JSON lines a scoring pass wrote."""
    rows = []
    for path in sorted(tf.io.gfile.glob(pattern)):
        with tf.io.gfile.GFile(path) as f:
            rows.extend((qid, docid, tuple(s)) for qid, docid, s in map(json.loads, f))
    return rows


# How a model was scored (metrics.json "scoring").
EMBED_ONCE, PER_PAIR = "embed_once", "per_pair"
# "rankpipe" counter of the examples a pass read; every model must score as many pairs.
EXAMPLES_READ = "examples_read"


class _CountExamples(beam.DoFn):
    def __init__(self):
        self._read = beam.metrics.Metrics.counter("rankpipe", EXAMPLES_READ)

    def process(self, serialized: bytes):
        self._read.inc()
        yield serialized


def check_complete(runs: dict[str, dict[str, dict[str, float]]], examples_read: int) -> None:
    """Every model scored every example the pass read, or an error: a candidate without a
    score would drop out of the ranking and be counted as not retrieved, silently moving the
    figures (Beam's own data-plane flaw once lost whole documents' pairs this way:
    components/beam_direct.py). The count comes from a Beam counter, which travels with the
    workers' bundle reports, not with the elements."""
    for name, run in runs.items():
        scored = sum(len(docs) for docs in run.values())
        if scored != examples_read:
            raise RuntimeError(
                f"model {name!r} scored {scored:,} candidates of the {examples_read:,} examples "
                "the pass read: Beam lost elements between the pass's stages, and the figures "
                "would count the lost candidates as not retrieved. Run it again; if it "
                "recurs, set runner.beam.direct_running_mode: in_memory (no data plane) and "
                "report the runner and Beam version"
            )


def _metric_sum(results: dict, name: str) -> float:
    """Committed (else attempted) value of every counter or distribution sum called `name`."""
    total = 0.0
    for result in results["counters"] + results["distributions"]:
        if result.key.metric.name == name:
            value = result.committed if result.committed is not None else result.attempted
            total += getattr(value, "sum", value) or 0
    return total


def _metric_count(results: dict, name: str) -> int:
    """How many values every distribution called `name` received."""
    total = 0
    for result in results["distributions"]:
        if result.key.metric.name == name:
            value = result.committed if result.committed is not None else result.attempted
            total += value.count if value is not None else 0
    return total


def pass_phases(results: dict, seconds: float) -> dict[str, float]:
    """Where a scoring pass's `seconds` went, from its Beam metrics (`results`, the pipeline
    result's metrics().query()): SavedModel loads (count
    and seconds, summed over workers: EmbedAndScore's counters and RunInference's
    `load_model_latency_milli_secs`), seconds inside the models (summed over workers), the
    texts embedded and the documents taken from the corpus vectors instead, and the
    rest of the pass (Beam start-up, workers, I/O, joins; the model seconds are taken off as if
    the workers had run in turn, so with N parallel workers it is an upper bound)."""
    loads = _metric_sum(results, "saved_model_loads") + _metric_count(
        results, "load_model_latency_milli_secs"
    )
    load_ms = _metric_sum(results, "model_load_ms")
    load_s = (load_ms + _metric_sum(results, "load_model_latency_milli_secs")) / 1e3
    model_s = (
        _metric_sum(results, "model_ms") / 1e3
        + _metric_sum(results, "inference_batch_latency_micro_secs") / 1e6
    )
    texts = {
        name: int(_metric_sum(results, name))
        for name in ("texts_embedded", DOCUMENTS_EMBEDDED, FROM_CORPUS_VECTORS)
    }
    return {
        "pass_seconds": round(seconds, 2),
        **texts,
        "saved_model_loads": int(loads),
        "model_load_seconds": round(load_s, 2),
        "model_seconds": round(model_s, 2),
        "beam_seconds": round(max(0.0, seconds - load_s - model_s), 2),
    }


class _Plan(NamedTuple):
    """How each model is scored (EMBED_ONCE or PER_PAIR), the models of each way, and the
    feedback settings, corpus vectors and frozen parts of the models that can use them."""

    how: dict[str, str]
    groups: dict[str, list[str]]
    feedbacks: dict[str, Feedback]
    corpus: dict[str, CorpusDocuments]
    frozen_from: dict[str, str]


def _plan(
    models: dict[str, str],
    embed: bool,
    corpus: dict[str, CorpusDocuments | None] | None,
    feedbacks: dict[str, Feedback] | None,
    frozen_from: dict[str, str | None] | None = None,
) -> _Plan:
    """score_split's choice per model: by embedding when it `embeds` (unless embed=False),
    else per pair; feedback and frozen parts only for models scored by embedding."""
    how = {n: EMBED_ONCE if embed and embeds(d) else PER_PAIR for n, d in models.items()}
    frozen_from = {n: f for n, f in (frozen_from or {}).items() if f and n in models}
    for name in frozen_from:
        if how[name] != EMBED_ONCE:
            raise ValueError(
                f"{models[name]} is a fold model exported as its query tower: it can only be "
                "scored by embedding each text (embed=True)"
            )
    feedbacks = {n: f for n, f in (feedbacks or {}).items() if n in models}
    for name, (setting, _) in feedbacks.items():
        if how[name] != EMBED_ONCE:
            raise ValueError(
                f"{models[name]} carries feedback ({setting}) but has no embedding "
                "signatures: only dual encoders can rank with feedback"
            )
    corpus = {n: c for n, c in (corpus or {}).items() if c and how.get(n) == EMBED_ONCE}
    groups = {
        label: [n for n in models if how[n] == label]
        for label in (EMBED_ONCE, PER_PAIR)
        if label in how.values()
    }
    return _Plan(how, groups, feedbacks, corpus, frozen_from)


def _run_pass(
    make_pipeline: Callable[[], beam.Pipeline],
    split_uris: Sequence[str],
    models: dict[str, str],
    plan: _Plan,
    batch_size: int,
    scores_prefix: str,
    first_stage: dict[str, dict[str, float]] | None,
) -> PipelineResult:
    """One Beam pipeline that reads the splits' examples once and writes each group's scores
    as JSON lines under `scores_prefix` (read_scores); its finished result."""
    transforms = {EMBED_ONCE: EmbedAndScore, PER_PAIR: ScoreExamples}
    p = make_pipeline()
    examples = [
        p
        | f"ReadExamples{i or ''}"
        >> beam.io.ReadFromTFRecord(
            io_utils.all_files_pattern(uri),
            compression_type=beam.io.filesystem.CompressionTypes.GZIP,
        )
        for i, uri in enumerate(split_uris)
    ]
    examples = examples[0] if len(examples) == 1 else examples | "Splits" >> beam.Flatten()
    examples = examples | "CountExamples" >> beam.ParDo(_CountExamples())
    for label, names in plan.groups.items():
        kwargs = {}
        if label == EMBED_ONCE:
            kwargs["corpus"] = [plan.corpus.get(n) for n in names]
            kwargs["frozen_from"] = [plan.frozen_from.get(n) for n in names]
            if plan.feedbacks:
                kwargs["feedbacks"] = [plan.feedbacks.get(n) for n in names]
                kwargs["first_stage"] = first_stage
        _ = (
            examples
            | f"Score-{label}"
            >> transforms[label]([models[n] for n in names], batch_size, **kwargs)
            | f"ToJson-{label}" >> beam.Map(json.dumps)
            | f"WriteScores-{label}"
            >> beam.io.WriteToText(f"{scores_prefix}-{label}", file_name_suffix=".jsonl")
        )
    result = p.run()
    result.wait_until_finish()
    return result


def score_split(
    make_pipeline: Callable[[], beam.Pipeline],
    split_uris: Sequence[str],
    models: dict[str, str],
    batch_size: int,
    scores_prefix: str,
    embed: bool = True,
    phases: dict[str, float] | None = None,
    corpus: dict[str, CorpusDocuments | None] | None = None,
    feedbacks: dict[str, Feedback] | None = None,
    first_stage: dict[str, dict[str, float]] | None = None,
    frozen_from: dict[str, str | None] | None = None,
) -> tuple[dict[str, dict[str, dict[str, float]]], dict[str, str]]:
    """Every candidate of the splits (their URIs) scored by every model in one Beam pipeline
    that reads the examples once: the models that `embeds` by EmbedAndScore (unless
    embed=False), the others by ScoreExamples. `corpus` ({model name:
    corpus_documents.corpus_documents(...)}) lets EmbedAndScore take that model's document
    vectors from the corpus-vectors artifact instead of embedding them.
    Returns ({name: run}, {name: EMBED_ONCE or PER_PAIR}), each run holding every example
    read (check_complete: else an error); `phases`, when given, gets
    `pass_phases` (where the pass's time went). `feedbacks` ({model name: (setting, alpha)})
    names the models that rank with feedback, from the lists of `first_stage` (EmbedAndScore);
    only models scored by embedding can. `frozen_from` ({model name: served model dir}) gives
    a partial model (a fold model exported as its query tower) the model it takes the frozen
    parts of its vectors from (frozen_parts.py)."""
    plan = _plan(models, embed, corpus, feedbacks, frozen_from)
    t0 = time.perf_counter()
    result = _run_pass(
        make_pipeline, split_uris, models, plan, batch_size, scores_prefix, first_stage
    )
    seconds = time.perf_counter() - t0
    metrics = result.metrics().query(MetricsFilter())  # once: the phases and the count
    if phases is not None:
        phases.update(pass_phases(metrics, seconds))
    runs: dict[str, dict[str, dict[str, float]]] = {}
    for label, names in plan.groups.items():
        runs.update(to_runs(read_scores(f"{scores_prefix}-{label}*.jsonl"), names))
    check_complete(runs, int(_metric_sum(metrics, EXAMPLES_READ)))
    return {n: runs[n] for n in models}, plan.how
