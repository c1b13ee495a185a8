"""Where a partial model's frozen parts come from. A cross-validation fold model of a recipe with
frozen documents is exported as its trained query tower only (trainer_module/export.py
export_query_tower): it is evaluated, never served, and the rest of its vectors (the companion's
part of a query vector, every document vector) come from frozen checkpoints that the run's
served model holds too. The evaluator takes them from that model, after checking from the two
models' query_tower.json that their frozen parts are the same (rankcore QueryTower
frozen_identity), so a fold model costs its query tower on disk."""

from __future__ import annotations

from components.ranking_evaluator.embedding import partial
from rankcore.corpus_vectors import QUERY_TOWER_FILE, QueryTower


def frozen_parts_model(model_dir: str, served_dir: str) -> str | None:
    """None when the model at `model_dir` embeds every text itself; for a partial model,
    `served_dir` (the run's served model) once its frozen parts are found to be the same, else
    a ValueError naming both files."""
    if not partial(model_dir):
        return None
    tower = QueryTower.read(model_dir)
    served = QueryTower.read(served_dir)
    if served is None or not served["complete"]:
        raise ValueError(
            f"{model_dir} was exported with its trained query tower only ({QUERY_TOWER_FILE}), "
            f"to be completed by the run's served model, but {served_dir} has no complete "
            f"{QUERY_TOWER_FILE} (a model without frozen documents): nothing can serve the "
            "frozen parts of its vectors"
        )
    if served["frozen_identity"] != tower["frozen_identity"]:
        raise ValueError(
            f"{model_dir} takes the frozen parts of its vectors from the run's served model "
            f"{served_dir}, but their {QUERY_TOWER_FILE} name other frozen parts (query parts "
            f"{_parts(tower)} against {_parts(served)}; frozen_identity "
            f"{tower['frozen_identity']} against {served['frozen_identity']}): a Tuner or a "
            "config changed the frozen encoders between the fold branches and the final model"
        )
    return served_dir


def _parts(tower: dict) -> list[str]:
    return [
        f"{p['checkpoint_dir']} (cut {p['max_length']}) x {p['scale']:.4f}" for p in tower["frozen"]
    ]
