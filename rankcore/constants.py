"""File names that cross the components / trainer_module boundary (issue 19).

The Trainer (trainer_module) writes them and the RankingEvaluator (components) and the CLI
(pipelines) read them; components and trainer_module never import each other, so the name
lives in the layer both import.
"""

# The Trainer's result (steps, best checkpoint, validation history, fusion, timings) in the
# ModelRun artifact: trainer_module/training.py writes it, the evaluator's plots read it.
TRAIN_RESULTS_FILE = "train_results.json"
