"""The RankingEvaluator's scoring passes: every candidate of the evaluated split(s) scored by
every model (scoring.score_split, in Beam). Dual encoders embed each distinct text once; other
models score every pair (scoring.py); a model whose documents come from frozen sentence
encoders takes them from the corpus-vectors artifact when one is wired (corpus_documents.py).
One part (no cross-validation): candidate and baseline in
one pass. Folds: each fold's eval split with its own model, then the baseline over all of them
in one more pass."""

from __future__ import annotations

import logging
import os
import time
import uuid
from typing import NamedTuple

import tensorflow as tf
from tfx.dsl.components.base import base_beam_executor

from components import beam_mode, process_memory, worker_dirs
from components.ranking_evaluator import scoring
from components.ranking_evaluator.config import EvaluatorConfig
from components.ranking_evaluator.corpus_documents import FROM_CORPUS_VECTORS, corpus_documents
from components.ranking_evaluator.embedding import DOCUMENTS_EMBEDDED, release_frozen_models
from components.ranking_evaluator.frozen_parts import frozen_parts_model
from components.ranking_evaluator.inputs import EvalInputs
from components.ranking_evaluator.request import EvaluationRequest
from rankcore import feedback, fusion

Run = dict[str, dict[str, float]]


class Scoring(NamedTuple):
    """What the passes gave: each system's scores, not fused (`raw`), the queries of each
    part, each part's fusion and the baseline's (their SavedModels' fusion.json), how the
    models were scored (the last part's pass), where the time went (`phases`), when the
    scoring started and how long it took, and how many candidates the candidate scored."""

    raw: dict[str, Run]
    part_qids: list[list[str]]
    part_fusions: list[dict | None]
    baseline_fusion: dict | None
    scored_by: dict[str, str]
    phases: dict[str, float]
    started: float
    seconds: float
    n_scored: int


def score_pass(
    beam_executor: base_beam_executor.BaseBeamExecutor,
    request: EvaluationRequest,
    splits: list[str],
    models: dict[str, str],
    config: EvaluatorConfig,
    phases: dict[str, float],
    fusions: dict[str, dict | None] | None = None,
    first_stage: Run | None = None,
) -> tuple[dict[str, Run], dict[str, str]]:
    """One scoring pass (scoring.score_split) over `splits` with `models`; its phases are
    added to `phases`. A model whose fusion (`fusions`, by name) carries feedback ranks each
    query's candidates with it (rankcore/feedback.py), from the lists of `first_stage`, at
    its fusion alpha: its run is then what its rank_candidates signature ranks. A model with
    a frozen document tower takes its documents from the request's corpus vectors
    (corpus_documents). `beam_executor` is the executor whose Beam settings and temp dir the
    pass uses."""
    feedbacks = {
        name: (fused["feedback"], fused.get("alpha"))
        for name, fused in (fusions or {}).items()
        if name in models and fused and feedback.is_on(fused.get("feedback"))
    }
    split_uris = [request.split_uri(s) for s in splits]
    # A fold model exported as its query tower takes its frozen parts from the served model.
    frozen_from = {name: frozen_parts_model(d, request.model_dir) for name, d in models.items()}
    # A fresh directory per pass: a retried execution must not read a failed one's parts.
    # Workers write it and read the splits and models: worker-reachable (worker_dirs.py).
    reads = {
        **{f"examples ({s})": u for s, u in zip(splits, split_uris)},
        **models,
        **{f"{name}'s frozen parts": d for name, d in frozen_from.items() if d},
    }
    scores_dir = worker_dirs.work_dir(
        beam_executor, f"scores-{uuid.uuid4().hex}", "RankingEvaluator", reads
    )
    # A small split is scored in process: no Beam worker start-up (components/beam_mode.py).
    split_bytes = beam_mode.input_bytes([os.path.join(u, "*") for u in split_uris])
    make_pipeline = beam_mode.pipeline_maker(beam_executor, split_bytes, "RankingEvaluator")
    pass_phases: dict[str, float] = {}
    try:
        runs, scored_by = scoring.score_split(
            make_pipeline,
            split_uris,
            models,
            batch_size=config.batch_size,
            scores_prefix=os.path.join(scores_dir, "part"),
            phases=pass_phases,
            corpus={
                name: corpus_documents(request.corpus_vectors_uri, model_dir)
                for name, model_dir in models.items()
            },
            feedbacks=feedbacks,
            first_stage=first_stage,
            frozen_from=frozen_from,
        )
    finally:
        # The scores are in `runs` now; under --temp_location (an object store) nothing
        # else would delete them.
        if tf.io.gfile.exists(scores_dir):
            tf.io.gfile.rmtree(scores_dir)
    for key, value in pass_phases.items():
        phases[key] = round(phases.get(key, 0) + value, 2)
    phases["in_process"] = beam_mode.chooses_in_process(beam_executor, split_bytes)
    return runs, scored_by


def score_parts(
    beam_executor: base_beam_executor.BaseBeamExecutor,
    request: EvaluationRequest,
    inputs: EvalInputs,
) -> Scoring:
    """Every candidate of the evaluated split(s) scored by the candidate (each part by its
    model) and the baseline; the split with no example to score is an error."""
    config, parts, baseline = request.config, inputs.parts, inputs.choice.served
    t0 = time.time()
    phases: dict[str, float] = {}
    raw: dict[str, Run] = {}  # system -> scores, not fused
    part_qids: list[list[str]] = []
    # Each model's fusion (its SavedModel's assets.extra/fusion.json): with feedback, its
    # scores depend on each query's list, and scoring rescores them (rankcore/feedback.py).
    part_fusions = [fusion.read_fusion(part.model_dir) for part in parts]
    baseline_fusion = fusion.read_fusion(baseline.path) if baseline is not None else None
    try:
        for part, part_fusion in zip(parts, part_fusions):
            part_models = {"candidate": part.model_dir}
            if len(parts) == 1 and baseline is not None:
                part_models["baseline"] = baseline.path
            scored, scored_by = score_pass(
                beam_executor,
                request,
                [part.split],
                part_models,
                config,
                phases,
                {"candidate": part_fusion, "baseline": baseline_fusion},
                inputs.first_stage,
            )
            part_qids.append(sorted(scored["candidate"]))
            for name, run in scored.items():
                raw.setdefault(name, {}).update(run)
            # Each pass loads its fold's model; what it left is collected before the next.
            process_memory.release()
    finally:  # the served model kept for the fold models' passes (embedding.py)
        release_frozen_models()
    if len(parts) > 1 and baseline is not None:
        scored, _ = score_pass(
            beam_executor,
            request,
            [part.split for part in parts],
            {"baseline": baseline.path},
            config,
            phases,
            fusions={"baseline": baseline_fusion},
            first_stage=inputs.first_stage,
        )
        raw.update(scored)
    seconds = time.time() - t0
    n_scored = _count_and_log(
        request, raw, len(parts) + (baseline is not None), scored_by, seconds, phases
    )
    return Scoring(
        raw, part_qids, part_fusions, baseline_fusion, scored_by, phases, t0, seconds, n_scored
    )


def _count_and_log(
    request: EvaluationRequest,
    raw: dict[str, Run],
    n_models: int,
    scored_by: dict[str, str],
    seconds: float,
    phases: dict[str, float],
) -> int:
    """How many candidates the candidate scored (none: the split has no example, an error),
    logged with how and how fast."""
    n_scored = sum(len(d) for d in raw["candidate"].values())
    if not n_scored:
        raise ValueError(
            f"the {request.split_label} split of {request.examples_uri} has no examples to score"
        )
    logging.info(
        "Scored %d candidates of %d %s queries with %d model(s) (%s) in %.1fs; documents from "
        "corpus vectors: %d, embedded: %d; %s",
        n_scored,
        len(raw["candidate"]),
        request.split_label,
        n_models,
        scored_by,
        seconds,
        phases.get(FROM_CORPUS_VECTORS, 0),
        phases.get(DOCUMENTS_EMBEDDED, 0),
        phases,
    )
    return n_scored
