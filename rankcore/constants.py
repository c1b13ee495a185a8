"""File and SavedModel signature names that cross a boundary between independent modules.

The Trainer (trainer_module) writes most of them and the RankingEvaluator, the Pusher
(components) and the CLI (pipelines) read them; components and trainer_module never import each
other, so the name lives in the layer both import. The same holds for a file one component
writes and another reads (RankingDataGen's summary, read by the Pusher): a component imports no
other component's modules.
"""

# RankingDataGen's counts in its DatagenSummary artifact: components/ranking_datagen/outputs.py
# writes it, the Pusher's model card and the console (pipelines/console/figures.py) read it.
SUMMARY_JSON = "summary.json"

# The Trainer's result (steps, best checkpoint, validation history, fusion, timings) in the
# ModelRun artifact: trainer_module/training.py writes it, the evaluator's plots read it.
TRAIN_RESULTS_FILE = "train_results.json"

# The recipe's description of an exported model (a JSON list of Markdown lines, Recipe.describe)
# inside the SavedModel: trainer_module/export.py writes it, the Pusher's model card prints it.
MODEL_DESCRIPTION_FILE = "assets.extra/model_description.json"

# The SavedModel's signatures and output keys: trainer_module/export.py exports them, the
# evaluator's scoring (components/ranking_evaluator/scoring.py) and the Pusher's model card use
# them.
SERVING_SIGNATURE = "serving_default"  # (query, document) texts -> score
SCORE_SIGNATURE = "score_examples"  # serialized tf.Examples -> score
RANK_SIGNATURE = "rank_candidates"  # one query's candidates, fused with the first stage
SCORE_OUTPUT = "score"
# A dual encoder's embedding signatures (DualEncoderModule) and their output key.
EMBED_TEXTS_SIGNATURE = "embed_texts"
EMBED_QUERY_SIGNATURE = "embed_query_ids"
EMBED_DOC_SIGNATURE = "embed_doc_ids"
EMBEDDING_OUTPUT = "embedding"
