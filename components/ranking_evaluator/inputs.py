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
    """The full qrels and first-stage run, the baseline choice, the evaluated parts, the
    SavedModel directories by system ("candidate", and "baseline" when one is served) and, per
    part, the judged queries of its split that have no first-stage candidate (so no example;
    None when the qrels artifact records no split queries: made before the record)."""

    qrels: dict[str, dict[str, int]]
    first_stage: dict[str, dict[str, float]]
    choice: BaselineChoice
    parts: list[Part]
    models: dict[str, str]
    without_candidates: list[list[str]] | None = None


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


def read_split_queries(qrels_dir: str) -> dict[str, dict] | None:
    """RankingDataGen's record of each split's judged queries (rankcore/folds.py
    SPLIT_QUERIES_FILE, beside qrels.txt); None when the artifact has none (made before it
    was recorded)."""
    path = os.path.join(qrels_dir, folds.SPLIT_QUERIES_FILE)
    if not tf.io.gfile.exists(path):
        return None
    with tf.io.gfile.GFile(path) as f:
        try:
            return json.load(f)["splits"]
        except (ValueError, KeyError, TypeError) as e:
            raise ValueError(
                f"{path}: not RankingDataGen's split queries record ({e!r}); rerun "
                "RankingDataGen (without the cache) to write it again"
            ) from None


def without_candidates(
    record: dict[str, dict] | None, evaluated: list[Part]
) -> list[list[str]] | None:
    """Per evaluated part, the judged queries of its split with no first-stage candidate, from
    `record` (read_split_queries); None without a record. A split the record lacks is an
    error naming it: the qrels artifact is not from the run that wrote the examples."""
    if record is None:
        return None
    out = []
    for part in evaluated:
        if part.split not in record:
            raise ValueError(
                f"the qrels artifact's {folds.SPLIT_QUERIES_FILE} records no split "
                f"{part.split!r} (it has {sorted(record)}): the qrels and the examples must "
                "come from the same RankingDataGen run"
            )
        out.append(sorted(record[part.split][folds.WITHOUT_CANDIDATES]))
    return out


def read_inputs(request: EvaluationRequest) -> EvalInputs:
    """The qrels and first-stage run (copied to local disk where they are not), and the
    SavedModel directories by system, and per evaluated split its judged queries without a
    candidate (read_split_queries). The baseline is the model served now: the newest
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
    # Given the judged queries, a served model with too few of them held out from it
    # (baseline.for_queries) is skipped here, before it is scored.
    choice = find_baseline(
        request.push_destination,
        request.model_uri,
        examples_lineage(request.examples_lineage),
        judged=[q for q, judgments in qrels.items() if judgments],
        level=request.config.significance_level,
    )
    if choice.served is not None:
        models["baseline"] = choice.served.path
    evaluated = parts(request)
    unranked = without_candidates(read_split_queries(request.qrels_uri), evaluated)
    return EvalInputs(qrels, first_stage, choice, evaluated, models, unranked)
