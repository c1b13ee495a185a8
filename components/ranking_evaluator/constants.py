"""RankingEvaluator's file and property names, one place for every reader (issue 19).

The evaluator writes them; its report, plots and KFP UI outputs, the Pusher's model card and
the CLI (pipelines/) read them back, so a rename is one line here. The names the Pusher reads
too (metrics.json and its keys) are defined with the push destination's layout, which both
components import (components/push_destination.py), and re-exported here.
"""

from components.push_destination import BLESSED, MAIN_METRIC, METRICS_FILE

__all__ = [
    "BLESSED",
    "BLESSED_FILE",
    "CORPUS_VECTORS",
    "FOLD_MODEL",
    "FOLD_MODEL_RUN",
    "MAIN_METRIC",
    "METRICS_FILE",
    "NOT_BLESSED_FILE",
    "REPORT_HTML_FILE",
    "REPORT_MD_FILE",
]

REPORT_MD_FILE = "report.md"
REPORT_HTML_FILE = "report.html"
# The ModelBlessing artifact's marker files, as TFX's own Evaluator names them.
BLESSED_FILE, NOT_BLESSED_FILE = "BLESSED", "NOT_BLESSED"
# With cross-validation, the input keys of fold branch i's model and model_run (one optional
# pair per fold up to rankcore.folds.MAX_FOLDS: KFP v2 has no list-of-channels input).
FOLD_MODEL, FOLD_MODEL_RUN = "fold_model_{fold}", "fold_model_run_{fold}"
# The optional input of the CorpusEncoder's vectors (components.artifacts.CorpusVectors): the
# document vectors of models with a frozen document tower (corpus_documents.py).
CORPUS_VECTORS = "corpus_vectors"
