"""TREC run files as rankpipe writes them: `qid Q0 docno rank score runid`, one line a document.

The one run writer: RankingDataGen's first-stage run, the RankingEvaluator's run files and
`rankpipe rerank` all write through `format_run`/`write_run`, so every run the pipeline writes
has the same layout and reads back the same way (rankcore.metrics.readers reads them as
trec_eval v10 does; trec_eval's README, https://github.com/usnistgov/trec_eval, defines the
format). In rankcore, the lowest layer, beside the readers: the writers are in independent
components (RankingDataGen, the evaluator), and every layer above may import it.

Scores are written with repr(), which round-trips exactly: reading the file back gives the same
floats, so trec_eval on the file ranks it as it was ranked here, and no two documents that
differ in score get the same printed score (a rounded score could create ties that trec_eval
would break differently from the rank column).

No TensorFlow at import (the CLI formats runs without it); `write_run` loads it to write.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

__all__ = ["RUN_COLUMNS", "format_run", "write_run"]

# The columns of a run line, as trec_eval's README names them (rankpipe writes "Q0" in the
# second, which trec_eval ignores).
RUN_COLUMNS: tuple[str, ...] = ("qid", "Q0", "docid", "rank", "score", "runid")


def format_run(ranked: Mapping[str, Iterable[tuple[str, float]]], runid: str) -> str:
    """TREC run text: queries in sorted order, each query's (docid, score) list in its given
    order with ranks 1..n (rank 1 first). The caller orders the lists (e.g. trec_eval's order,
    rankcore.metrics.rank_documents) and gives a one-word runid."""
    return "".join(
        f"{qid} Q0 {docid} {rank} {score!r} {runid}\n"
        for qid in sorted(ranked)
        for rank, (docid, score) in enumerate(ranked[qid], 1)
    )


def write_run(path: str, ranked: Mapping[str, Iterable[tuple[str, float]]], runid: str) -> None:
    """`format_run` to `path` (local or any tf.io.gfile URI) through a temporary file and a
    rename: a reader never sees a half-written run."""
    from rankcore.file_io import write_text_atomic

    write_text_atomic(path, format_run(ranked, runid))
