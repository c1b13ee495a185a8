"""TREC run/qrels readers and trec_eval (v10.0) compatible metrics.

The metric math is pytrec_eval's, i.e. trec_eval's own C code. This package adds what
pytrec_eval does not do: strict readers with file:line errors (readers.py), the trec_eval v10
measures its bundled (older) trec_eval lacks or computes differently (own.py), `-M`/`-c`
handling, and the "all" line (compute.py `aggregate`). Split as ir_measures is: readers, a
measure table (measures.py, one entry per measure), our own measures, and the computation.
docs/metrics.md lists every difference from trec_eval v10.

In rankcore because the RankingEvaluator (components) and the Trainer's validation
(trainer_module) compute the same numbers with it, and those two never import each other.
"""

from rankcore.metrics.compute import aggregate, compute_metrics, mean_metrics, relstrings
from rankcore.metrics.measures import (
    MIN_GEO_MEAN,
    MeasureInfo,
    normalize_measures,
    resolve_measures,
)
from rankcore.metrics.ranking import rank_documents, truncate_run
from rankcore.metrics.readers import (
    QRELS_FORMATS,
    MalformedLineError,
    detect_qrels_format,
    read_qrels,
    read_run,
    read_run_with_runid,
    read_runid,
)

__all__ = [
    "MIN_GEO_MEAN",
    "QRELS_FORMATS",
    "MalformedLineError",
    "MeasureInfo",
    "aggregate",
    "compute_metrics",
    "detect_qrels_format",
    "mean_metrics",
    "normalize_measures",
    "rank_documents",
    "read_qrels",
    "read_run",
    "read_run_with_runid",
    "read_runid",
    "relstrings",
    "resolve_measures",
    "truncate_run",
]
