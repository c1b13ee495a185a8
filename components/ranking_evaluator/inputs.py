"""The RankingEvaluator's inputs: the judgments, the first-stage run, the model served now (the
baseline) and the model of each evaluated split (with cross-validation, each fold's)."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from typing import NamedTuple

import tensorflow as tf

from components import artifacts
from components.ranking_evaluator.baseline import BaselineChoice, find_baseline
from components.ranking_evaluator.constants import FOLD_MODEL
from components.ranking_evaluator.request import EvaluationRequest
from rankcore import folds
from rankcore.metrics import read_qrels, read_run


class Part(NamedTuple):
    """What one model ranks: the eval split, the SavedModel, its Trainer's model_run (the
    report's training curves and TensorBoard logs); `fold` None without cross-validation."""

    fold: int | None
    split: str
    model_dir: str
    model_run: str | None


class EvalInputs(NamedTuple):
    """The full qrels and first-stage run, the baseline choice, the evaluated parts and the
    SavedModel directories by system ("candidate", and "baseline" when one is served)."""

    qrels: dict[str, dict[str, int]]
    first_stage: dict[str, dict[str, float]]
    choice: BaselineChoice
    parts: list[Part]
    models: dict[str, str]


def local_copy(path: str, local_dir: str) -> str:
    # trec_eval's readers use open(); artifacts may live on gs:// or other gfile filesystems.
    if "://" not in path:
        return path
    local = os.path.join(local_dir, f"{len(os.listdir(local_dir))}-{os.path.basename(path)}")
    tf.io.gfile.copy(path, local, overwrite=True)
    return local


def examples_lineage(record: str) -> dict | None:
    """RankingDataGen's record of what the examples' token ids mean (rankcore/lineage.py),
    from the examples artifact; None when it records none (examples from before the record)."""
    try:
        return json.loads(record) if record else None
    except ValueError:
        return None


def parts(request: EvaluationRequest) -> list[Part]:
    """The model of each evaluated split: the candidate on `config.split`, or with
    cross-validation each fold branch's model on its fold's eval split (rankcore/folds.py)."""
    config = request.config
    k = config.cross_validation.folds
    if not k:
        return [Part(None, config.split, request.model_dir, request.model_run)]
    found = []
    for i in range(k):
        if i not in request.fold_models:
            key = FOLD_MODEL.format(fold=i)
            raise ValueError(
                f"evaluator.cross_validation.folds is {k} but input {key!r} (fold branch {i}'s "
                "model) is not wired: build the pipeline with pipelines/pipeline.py"
            )
        model_dir, model_run = request.fold_models[i]
        found.append(Part(i, folds.split_name(i, folds.EVAL), model_dir, model_run))
    return found


def read_inputs(request: EvaluationRequest) -> EvalInputs:
    """The qrels and first-stage run (copied to local disk where they are not), and the
    SavedModel directories by system. The baseline is the model served now: the newest
    version under the push destination (a pushed version dir is the SavedModel itself)."""
    local_dir = tempfile.mkdtemp(prefix="ranking_evaluator-")
    try:
        qrels = read_qrels(
            local_copy(os.path.join(request.qrels_uri, artifacts.QRELS_FILE), local_dir)
        )
        first_stage = read_run(
            local_copy(os.path.join(request.first_stage_run_uri, artifacts.RUN_FILE), local_dir)
        )
    finally:
        shutil.rmtree(local_dir, ignore_errors=True)
    models = {"candidate": request.model_dir}
    choice = find_baseline(
        request.push_destination, request.model_uri, examples_lineage(request.examples_lineage)
    )
    if choice.served is not None:
        models["baseline"] = choice.served.path
    return EvalInputs(qrels, first_stage, choice, parts(request), models)
