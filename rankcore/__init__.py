"""rankpipe's bottom layer: code every other package may use and that imports nothing of ours.

The direction is pipelines -> {components, trainer_module} -> rankcore (import-linter contracts
in pyproject.toml, checked by `make lint`): config loading (config_loader), TREC run/qrels
readers and trec_eval-exact metrics (metrics/), first-stage score fusion (fusion), the BERT
encoder of a Hugging Face checkpoint and its sentence embedding (encoders/: the Trainer's models
and RankingDataGen's dense retrieval both run it), atomic file writes (file_io) and the file
and signature names the Trainer and the evaluator share (constants).
Only the standard library and third-party packages are imported here.
"""
