"""Where a Trainer execution keeps its resumable checkpoints."""

from __future__ import annotations

import hashlib
import json
import os
from typing import Any

# The custom_config key of the corpus-vectors artifact's URI (the Trainer component sets it;
# absent or None without a CorpusEncoder): where those vectors are is no part of what is
# trained, so it is left out of the fingerprint.
CORPUS_VECTORS_URI = "corpus_vectors_uri"
# The same for RankingDataGen's qrels artifact, whose dev splits' judgments the dev metric counts
# (trainer_module/validation.py split_judgments), and the names of those dev splits.
QRELS_URI, DEV_SPLITS = "qrels_uri", "dev_splits"
# True for a cross-validation fold branch's Trainer (pipelines/component_table.py): its model is
# evaluated, never served, and a recipe with frozen documents exports its query tower only
# (trainer_module/export.py export_query_tower).
QUERY_TOWER_ONLY = "query_tower_only"
_WHERE = (CORPUS_VECTORS_URI, QRELS_URI)


def run_fingerprint(
    train_files: list[str], transform_graph_path: str, custom_config: Any, train_steps: int
) -> str:
    """Identifies "the same training run": same data, same TransformGraph, same config."""
    payload = json.dumps(
        {
            "train_files": sorted(train_files),
            "transform_graph_path": transform_graph_path,
            "custom_config": {k: v for k, v in custom_config.items() if k not in _WHERE},
            "train_steps": train_steps,
        },
        sort_keys=True,
        default=str,
    )
    return hashlib.sha256(payload.encode()).hexdigest()[:16]


def checkpoint_dir(model_run_dir: str, fingerprint: str) -> str:
    """<pipeline_root>/Trainer/checkpoints/<fingerprint> for model_run_dir
    <pipeline_root>/Trainer/model_run/<execution id>.

    The execution id changes when an execution is retried, the fingerprint does not, so a
    retried (e.g. preempted) Trainer finds and resumes the checkpoints of the killed one.
    """
    trainer_root = os.path.dirname(os.path.dirname(model_run_dir.rstrip("/")))
    return os.path.join(trainer_root, "checkpoints", fingerprint)
