"""The model card written next to every pushed model: data, config, metrics, the evaluation."""

from __future__ import annotations

import datetime
import json
from typing import Any

from components.push_destination import BLESSED, MAIN_METRIC, TRAINED_QUERIES_FILE
from rankcore import feedback, lineage
from rankcore.constants import RANK_SIGNATURE, SCORE_SIGNATURE, SERVING_SIGNATURE

# The measures the card's table leads with (then the rest of the evaluation's measures).
_CONFIG_SECTIONS = ("collection", "datagen", "trainer", "evaluator")
_HEADLINE = ("ndcg_cut_10", "map", "recip_rank", "mrr_cut_10", "P_10", "recall_100")

USAGE = """\
import tensorflow as tf
import tensorflow_text  # registers the tokenizer ops the serving graph uses

model = tf.saved_model.load("{path}")
scores = model.signatures["serving_default"](
    query=tf.constant(["what is the heat transfer of a slab"]),
    document=tf.constant(["an analysis of heat conduction in composite slabs"]),
)["score"]
"""


def build(
    *,
    version: str,
    serving_path: str,
    model_uri: str,
    model_id: int,
    evaluation: dict[str, Any] | None,
    evaluation_uri: str | None,
    datagen_summary: dict[str, Any] | None,
    pipeline_config: dict[str, Any] | None,
    pushed_at: datetime.datetime | None = None,
    fusion: dict[str, Any] | None = None,
    model_description: list[str] | None = None,
    trained_queries: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The card as a JSON-able dict (model_card.json); `markdown` renders it. `fusion`: the
    pushed SavedModel's own (with cross-validation the evaluation's is the fold models').
    `model_description`: the Markdown lines the Trainer's recipe wrote beside the SavedModel
    (how it was trained, what it serves), printed as they are. `trained_queries`: the
    queries it trained and chose on (rankcore/lineage.py trained_queries; the lists go to
    their own file, the card keeps the counts and the rule)."""
    config = pipeline_config or {}
    pushed_at = pushed_at or datetime.datetime.now(datetime.timezone.utc)
    card: dict[str, Any] = {
        "version": version,
        "serving_path": serving_path,
        "pushed_at": pushed_at.isoformat(timespec="seconds"),
        "pipeline_name": config.get("runner", {}).get("pipeline_name"),
        "model": {"uri": model_uri, "mlmd_id": model_id},
        "signatures": {
            SERVING_SIGNATURE: "query: string [N], document: string [N] -> score: float32 [N]",
            SCORE_SIGNATURE: "examples: serialized tf.Example string [N] -> score: float32 [N]",
            RANK_SIGNATURE: "query: string [], documents: string [N], first_stage_scores: "
            "float32 [N] -> fused_score, reranker_score: float32 [N]",
        },
        # First-stage fusion the model ranks with (alpha, how it was chosen), or None.
        "fusion": fusion if fusion is not None else (evaluation or {}).get("fusion"),
        "model_description": list(model_description or []),
        "data": datagen_summary,
        # How many queries trained and chose it, and which splits: a later evaluation compares
        # it on the others only (the lists: push_destination.TRAINED_QUERIES_FILE). None: not
        # known, and a later evaluation will not compare with it.
        "trained_queries": _query_counts(trained_queries),
        "config": {key: config[key] for key in _CONFIG_SECTIONS if key in config},
        "evaluation": None,
    }
    if evaluation is not None:
        card["evaluation"] = _evaluation_entry(evaluation, evaluation_uri)
    return card


def _evaluation_entry(evaluation: dict[str, Any], evaluation_uri: str | None) -> dict[str, Any]:
    """The card's `evaluation`: what the model passed, from the evaluator's metrics.json."""
    return {
        "uri": evaluation_uri,
        "split": evaluation["split"],
        # Per fold: queries, alpha, main metric (the fold models', not this model's).
        "cross_validation": evaluation.get("cross_validation"),
        "num_queries": evaluation["num_queries"],
        "candidates_scored": evaluation["candidates_scored"],
        MAIN_METRIC: evaluation[MAIN_METRIC],
        BLESSED: evaluation[BLESSED],
        "checks": evaluation["checks"],
        "reasons": evaluation["reasons"],
        "thresholds": evaluation.get("thresholds"),
        "aggregate": evaluation["aggregate"],
        "comparisons": {
            ref: {
                m: {
                    k: s[k]
                    for k in (
                        "mean_delta",
                        "ttest_p",
                        "randomization_p",
                        "wins",
                        "ties",
                        "losses",
                    )
                }
                for m, s in stats.items()
            }
            for ref, stats in evaluation["comparisons"].items()
        },
        "baseline_model": evaluation.get("baseline_model"),
        "baseline_version": evaluation.get("baseline_version"),
    }


def _query_counts(record: dict[str, Any] | None) -> dict[str, Any] | None:
    """The card's `trained_queries`: the record's counts (of the lists it has) and its rule,
    without the lists."""
    if record is None:
        return None
    counts = {key: len(record[key]) for key in lineage.QUERY_LISTS if key in record}
    return {**counts, lineage.RULE: record[lineage.RULE], "file": TRAINED_QUERIES_FILE}


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4f}"
    return "" if value is None else str(value)


def _metrics_table(ev: dict[str, Any]) -> list[str]:
    agg = ev["aggregate"]
    measures = list(agg["candidate"])
    ordered = [m for m in _HEADLINE if m in measures]
    ordered += [m for m in measures if m not in ordered]
    systems = [s for s in ("first_stage", "baseline") if s in agg]
    labels = {"first_stage": "first stage", "baseline": "model served before"}
    alone = ["reranker"] if "reranker" in agg else []  # with fusion: the model without it
    head = ["measure", *(labels[s] for s in systems), *(["reranker alone"] * len(alone))]
    head.append("this model (fused)" if alone else "this model")
    for ref in systems:
        head += [f"Δ vs {labels[ref]}", "p (randomization)", "W/T/L"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for m in ordered:
        row = [m, *(_fmt(agg[s][m]) for s in [*systems, *alone]), _fmt(agg["candidate"][m])]
        for ref in systems:
            s = ev["comparisons"][ref][m]
            row += [
                f"{s['mean_delta']:+.4f}",
                _fmt(s["randomization_p"]),
                f"{s['wins']}/{s['ties']}/{s['losses']}",
            ]
        lines.append("| " + " | ".join(row) + " |")
    return lines


def _model_section(card: dict[str, Any]) -> list[str]:
    """ "## Model": architecture and training, the fusion it ranks with, its signatures."""
    trainer = card["config"].get("trainer", {})
    lines = ["## Model", ""]
    if trainer:
        lines += [
            f"- architecture: `{trainer.get('model')}`, loss `{trainer.get('loss')}`",
            f"- training: {trainer.get('train_steps')} steps, batch size "
            f"{trainer.get('batch_size')}, learning rate {trainer.get('learning_rate')}",
        ]
    # How it was trained and what it serves, as the Trainer's recipe describes the model it
    # exported (trainer_module/recipes/: the SavedModel's model description).
    lines += [f"- {line}" for line in card.get("model_description") or []]
    fusion = card.get("fusion")
    if fusion:
        lines.append(
            f"- ranks by alpha * reranker + (1 - alpha) * first stage (min-max per query), "
            f"alpha = {fusion['alpha']:.2f} ({fusion.get('mode')})"
            + (
                f"; dev {fusion['metric']}: fused {fusion['dev_fused']:.4f}, reranker alone "
                f"{fusion['dev_reranker']:.4f}, first stage {fusion['dev_first_stage']:.4f}"
                if "dev_fused" in fusion
                else ""
            )
        )
        if feedback.is_on(fusion.get("feedback")):
            what = feedback.describe(fusion["feedback"])
            lines.append(
                "- `rank_candidates` scores with pseudo-relevance feedback (each candidate moved "
                "towards its nearest candidates, the query towards the first stage's top "
                f"candidates): {what}; the pair signatures score without it"
            )
    lines += [f"- signature `{k}`: {v}" for k, v in card["signatures"].items()]
    usage = USAGE.format(path=card["serving_path"]).rstrip()
    return [*lines, "", "Scoring raw text:", "", "```python", usage, "```"]


def _data_section(card: dict[str, Any]) -> list[str]:
    """ "## Data": the datagen summary's counts and the datagen config's first stage and text."""
    lines = ["## Data", ""]
    data = card.get("data")
    datagen = card["config"].get("datagen", {})
    collection = card["config"].get("collection", {})
    if data:
        lines += [
            f"- collection `{data.get('collection')}`: {data.get('documents')} documents, "
            f"{data.get('queries')} queries, {data.get('judged_queries')} judged queries, "
            f"{data.get('judged_pairs')} judgments",
            f"- queries per split: {data.get('queries_per_split')}; examples per split: "
            f"{data.get('examples_per_split')}",
        ]
    if datagen:
        first_stage = collection.get("first_stage_run") or "BM25 computed by RankingDataGen"
        lines += [
            f"- first stage: {first_stage}, top {datagen.get('candidates_depth')} candidates",
            f"- text: up to {datagen.get('max_query_length')} query / "
            f"{datagen.get('max_doc_length')} document tokens",
        ]
    if not data and not datagen:
        lines.append("- not recorded (the Pusher was given no datagen summary or config)")
    queries = card.get("trained_queries")
    if queries:
        lines.append(
            f"- queries it saw: {queries[lineage.RULE]} (the qids: `{queries['file']}`); a "
            "later evaluation compares this model only on queries held out from it"
        )
    else:
        lines.append(
            "- the queries it trained on are not recorded: a later evaluation will not "
            "compare with this model"
        )
    return lines


def _cross_validation_lines(ev: dict[str, Any], cv: dict[str, Any]) -> list[str]:
    """What the cross-validated figures are, and each fold's."""
    return [
        f"Cross-validated: each query was ranked by the model of the fold branch that "
        f"never saw it ({cv['folds']} fold models, each tuned on its next fold). The "
        "figures below are that recipe's; this model is the same recipe trained on "
        "every fold but its dev fold, which chose its checkpoint and alpha.",
        "",
        *(
            f"- fold {f['fold']}: {f['queries']} queries, alpha "
            f"{_fmt(f['alpha'])}, {ev[MAIN_METRIC]} "
            f"{_fmt(f[ev[MAIN_METRIC]]['candidate'])} (first stage "
            f"{_fmt(f[ev[MAIN_METRIC]]['first_stage'])})"
            for f in cv["per_fold"]
        ),
        "",
    ]


def _evaluation_section(card: dict[str, Any]) -> list[str]:
    """ "## The evaluation it passed": the verdict, its checks and the metrics table."""
    ev = card.get("evaluation")
    lines = ["## The evaluation it passed", ""]
    if not ev:
        return [*lines, "- not recorded (the Pusher was given no evaluation)"]
    cv = ev.get("cross_validation")
    where = f"the {ev['split']} split" if not cv else f"all queries, {cv['folds']}-fold"
    lines += [
        f"**{'BLESSED' if ev['blessed'] else 'NOT BLESSED'}** by RankingEvaluator on "
        f"{where} ({ev['num_queries']} queries, {ev['candidates_scored']} "
        f"candidates), evaluation `{ev['uri']}`.",
        "",
    ]
    if cv:
        lines += _cross_validation_lines(ev, cv)
    lines += [f"- passed: {c}" for c in ev["checks"]]
    lines += [f"- failed: {r}" for r in ev["reasons"]]
    heading = "## Metrics vs the first stage"
    if "baseline" in ev["aggregate"]:
        heading += " and the model served before"
        if ev.get("baseline_version") is not None:
            heading += f" (version {ev['baseline_version']})"
    return [*lines, "", heading, "", *_metrics_table(ev)]


def markdown(card: dict[str, Any]) -> str:
    """model_card.md: `card` (`build`'s dict) as Markdown, one section per part of it."""
    name = card.get("pipeline_name") or "rankpipe"
    lines = [
        f"# Model card: {name} reranker, version {card['version']}",
        "",
        f"Pushed {card['pushed_at']} to `{card['serving_path']}` from the Trainer's model "
        f"`{card['model']['uri']}` (MLMD artifact {card['model']['mlmd_id']}).",
        "",
        *_model_section(card),
        "",
        *_data_section(card),
        "",
        *_evaluation_section(card),
    ]
    lines += ["", "## Config", "", "```json", json.dumps(card["config"], indent=2), "```"]
    return "\n".join(lines) + "\n"
