"""What the RankingEvaluator shows in the Kubeflow Pipelines UI besides its HTML report.

The KFP v2 UI (frontend/src/components/viewers/MetricsVisualizations.tsx) shows a
`system.Metrics` artifact as a table of its numeric custom properties; the launcher records the
ExecutorOutput metadata of an artifact as those properties and keeps a `display_name` one that
is already set (backend/src/v2/metadata/client.go RecordArtifact).
"""

from __future__ import annotations

from typing import Any

from components.ranking_evaluator.constants import BLESSED, MAIN_METRIC
from components.ranking_evaluator.report import LABELS

# Measures shown as scalars, after the main metric, when the evaluator computed them.
HEADLINE_MEASURES = ("ndcg_cut_10", "map", "recip_rank", "P_10")
# The report's names of the systems, in the order the scalars are listed.
SYSTEM_LABELS = {s: LABELS[s] for s in ("candidate", "first_stage", "reranker", "baseline")}
DISPLAY_NAMES = {
    "report": "Evaluation report",
    "report_markdown": "Evaluation report (Markdown)",
    "metrics": "Ranking metrics",
}


def scalars(metrics: dict[str, Any]) -> dict[str, float]:
    """`"<measure> (<system>)" -> value` for the main measures of every evaluated system, plus
    the verdict (`blessed` 1/0) and the number of evaluated queries, from metrics.json."""
    aggregate = metrics["aggregate"]
    measures = [metrics[MAIN_METRIC]]
    measures += [m for m in HEADLINE_MEASURES if m in aggregate["candidate"] and m not in measures]
    values = {BLESSED: float(metrics[BLESSED]), "num_queries": float(metrics["num_queries"])}
    for system in (s for s in SYSTEM_LABELS if s in aggregate):
        for measure in measures:
            label = SYSTEM_LABELS[system]
            values[f"{measure} ({label})"] = float(aggregate[system][measure])
    return values
