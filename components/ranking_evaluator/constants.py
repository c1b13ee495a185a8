"""RankingEvaluator's file and property names, one place for every reader (issue 19).

The evaluator writes them; its report, plots and KFP UI outputs, the Pusher's model card and
the CLI (pipelines/) read them back, so a rename is one line here.
"""

METRICS_FILE = "metrics.json"  # the ModelEvaluation artifact's full result
REPORT_MD_FILE = "report.md"
REPORT_HTML_FILE = "report.html"
# The ModelBlessing artifact's marker files, as TFX's own Evaluator names them.
BLESSED_FILE, NOT_BLESSED_FILE = "BLESSED", "NOT_BLESSED"
# Keys of metrics.json that are also ModelEvaluation custom properties.
MAIN_METRIC = "main_metric"
BLESSED = "blessed"
# With cross-validation, the input keys of fold branch i's model and model_run (one optional
# pair per fold up to rankcore.folds.MAX_FOLDS: KFP v2 has no list-of-channels input).
FOLD_MODEL, FOLD_MODEL_RUN = "fold_model_{fold}", "fold_model_run_{fold}"
