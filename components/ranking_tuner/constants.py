"""The RankingTuner's file names, in a module without TFX so the console can read them.

They are TFX's own (tfx/components/tuner/executor.py), which its Trainer executor reads."""

BEST_HYPERPARAMETERS_FILE = "best_hyperparameters.txt"
TUNER_RESULTS_FILE = "tuner_results.json"
