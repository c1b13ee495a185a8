"""Rerank a TREC run with a pushed model: `rankpipe rerank` and its library form.

    from components.ranking_evaluator.rerank import rerank_run, write_run
    ranked = rerank_run("outputs/serving/rankpipe-demo", "bm25.run", "topics.jsonl", "docs.jsonl")
    write_run(ranked, "reranked.run")

What the Pusher ships (<destination>/<version>/, components/push_destination.py) is a
SavedModel that scores raw text (trainer_module/export.py). Each query's candidates go through its
`rank_candidates` signature in one call, with their first-stage scores from the run: that is the
ranking the RankingEvaluator judged and blessed (the "candidate" run: the reranker fused with the
first stage at the alpha the Trainer chose, with pseudo-relevance feedback for a model that has
it; tests/pipelines/test_pipeline_e2e.py checks the signature against the evaluator's
candidate.run). `scores="reranker"` takes the reranker's own scores from the same call instead.

Texts are read with the pipeline's readers (components/ranking_datagen: the formats of
`collection.documents_format` / `queries_format`), documents kept only when the run retrieved
them. The run is read as trec_eval reads it (rankcore.metrics), and the candidates of a query are
taken in trec_eval's order (score descending, then docno descending) when `depth` cuts them.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping

from components.push_destination import SAVED_MODEL_FILE, served_model
from rankcore import trec
from rankcore.constants import RANK_SIGNATURE
from rankcore.metrics import rank_documents, read_run

__all__ = ["format_run", "model_path", "rerank_run", "write_run"]

SCORE_KINDS = {"fused": "fused_score", "reranker": "reranker_score"}  # rank_candidates' outputs
DEFAULT_RUNID = "rankpipe"

Ranked = dict[str, list[tuple[str, float]]]


def model_path(model: str) -> str:
    """`model` when it is a SavedModel directory (one version, <destination>/<version>); for a
    push destination, its newest complete version, the one TF Serving serves
    (push_destination.served_model, the evaluator's own lookup of its baseline)."""
    import tensorflow as tf

    if tf.io.gfile.exists(os.path.join(model, SAVED_MODEL_FILE)):
        return model
    if not tf.io.gfile.isdir(model):
        raise FileNotFoundError(f"{model}: no such directory (a pushed model or push destination)")
    served = served_model(model)
    if served is None:
        raise FileNotFoundError(
            f"{model}: neither a SavedModel directory (no {SAVED_MODEL_FILE}) nor a push "
            "destination with a complete version (<destination>/<version>/)"
        )
    return served.path


def _format(kind: str, path: str, fmt: str | None) -> str:
    """`fmt`, or the format the first file matching `path` looks like (the readers' own guess,
    readers.guess_format, which `rankpipe init` also uses); ValueError when it looks like none."""
    from components.ranking_datagen import collection, readers

    if fmt is not None:
        return fmt
    guessed = readers.guess_format(collection.expand_paths(path)[0], kind)
    if guessed is None:
        known = ", ".join(readers.READERS[kind])
        raise ValueError(f"cannot tell the {kind} format of {path}; name it ({known})")
    return guessed


def _read_texts(
    kind: str, path: str, fmt: str | None, wanted: set[str] | None = None
) -> dict[str, str]:
    """id -> text of the files matching `path`, read with the pipeline's reader of `fmt`
    (guessed when None: `_format`); only the ids in `wanted` when given. A bad record fails
    (file:line), as `datagen.on_bad_record: fail` does; empty documents are kept (they still
    get a score)."""
    from components.ranking_datagen import collection, readers

    fmt = _format(kind, path, fmt)
    if kind == readers.QUERIES:
        return collection.read_queries(path, fmt, collection.BadRecordReport("fail"))
    reader = readers.get_reader(kind, fmt, allow_empty_text=True)
    texts: dict[str, str] = {}
    for file in collection.expand_paths(path):
        for record in reader.read(file):
            if wanted is None or record.docid in wanted:
                texts.setdefault(record.docid, record.text)
    return texts


def _missing(what: str, ids: Iterable[str], where: str) -> None:
    ids = sorted(ids)
    if ids:
        shown = ", ".join(repr(i) for i in ids[:5]) + (", ..." if len(ids) > 5 else "")
        raise ValueError(f"{len(ids)} {what} of the run not in {where}: {shown}")


def _load(model_dir: str):
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (registers the tokenizer ops the graph holds)

    # As the evaluator loads it (embedding._LoadedModel), without its Beam machinery.
    return tf.saved_model.load(model_dir)


def rerank_run(
    model_dir: str,
    run_path: str,
    queries_path: str,
    documents_path: str,
    *,
    queries_format: str | None = None,
    documents_format: str | None = None,
    depth: int | None = None,
    scores: str = "fused",
) -> Ranked:
    """{qid: [(docid, score), ...]}, each list in the new order (score descending; ties by
    docno descending, as trec_eval ranks them), for every query of the run at `run_path`.

    `model_dir`: a pushed SavedModel (<destination>/<version>) or a push destination (its newest
    version, `model_path`). `queries_path` / `documents_path`: files or globs in a format of the
    pipeline's readers (beir_queries, trec_topics, msmarco_tsv, cranfield / beir_corpus,
    trec_sgml, msmarco_tsv, cranfield), guessed from the first lines when not given (the
    readers' guess_format). `depth`: rerank each query's top `depth` candidates (trec_eval's order)
    and leave the rest out, as a reranking depth does; None: all. `scores`: "fused" (the
    ranking the evaluator blessed) or "reranker" (the model alone). Raises ValueError when a
    query or document of the run has no text.
    """
    import numpy as np
    import tensorflow as tf

    from components.ranking_datagen import readers

    if scores not in SCORE_KINDS:
        raise ValueError(f"scores must be one of {sorted(SCORE_KINDS)}, got {scores!r}")
    if depth is not None and depth < 1:
        raise ValueError(f"depth must be a positive integer, got {depth}")
    model_dir = model_path(model_dir)
    run = read_run(run_path)
    candidates = {qid: rank_documents(docs)[:depth] for qid, docs in run.items() if docs}
    queries = _read_texts(readers.QUERIES, queries_path, queries_format)
    _missing("queries", set(candidates) - set(queries), queries_path)
    wanted = {docid for docids in candidates.values() for docid in docids}
    documents = _read_texts(readers.DOCUMENTS, documents_path, documents_format, wanted)
    _missing("documents", wanted - set(documents), documents_path)

    model = _load(model_dir)
    if RANK_SIGNATURE not in model.signatures:
        raise ValueError(f"{model_dir} has no {RANK_SIGNATURE} signature: not a rankpipe model")
    rank = model.signatures[RANK_SIGNATURE]
    output = SCORE_KINDS[scores]
    ranked: Ranked = {}
    for qid in sorted(candidates):
        docids = candidates[qid]
        # One call per query: fusion min-max normalises over the query's whole list, and
        # feedback moves the query towards its list's top documents.
        out = rank(
            query=tf.constant(queries[qid]),
            documents=tf.constant([documents[d] for d in docids]),
            first_stage_scores=tf.constant([run[qid][d] for d in docids], tf.float32),
        )
        values = np.asarray(out[output]).astype(np.float64).tolist()
        new = dict(zip(docids, values))
        ranked[qid] = [(d, new[d]) for d in rank_documents(new)]
    return ranked


def _check_runid(runid: str) -> None:
    if not runid or any(c.isspace() for c in runid):
        raise ValueError(f"runid must be one word, got {runid!r}")


def format_run(ranked: Mapping[str, list[tuple[str, float]]], runid: str = DEFAULT_RUNID) -> str:
    """TREC run text, `qid Q0 docid rank score runid`, queries in sorted order and each list in
    its given order (rank 1 first), written by rankcore.trec as every run of the pipeline: scores
    with repr(), so they read back as the same floats and trec_eval ranks the file as it was
    ranked here. A runid that is not one word is a ValueError."""
    _check_runid(runid)
    return trec.format_run(ranked, runid)


def write_run(
    ranked: Mapping[str, list[tuple[str, float]]], path: str, runid: str = DEFAULT_RUNID
) -> None:
    """`format_run` to `path` (local or any tf.io.gfile URI) through a temporary file and a
    rename: a reader never sees a half-written run (rankcore.trec.write_run)."""
    _check_runid(runid)
    trec.write_run(path, ranked, runid)
