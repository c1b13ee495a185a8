"""Human-readable evaluation reports: Markdown, and a self-contained HTML page (no scripts,
no external resources, so the Kubeflow UI's sandboxed HTML viewer shows all of it)."""

from __future__ import annotations

import html as html_lib
import math
from collections.abc import Sequence

from components.ranking_evaluator import plots
from components.ranking_evaluator.constants import BLESSED, MAIN_METRIC
from rankcore import feedback

SYSTEMS = ("first_stage", "baseline", "reranker", "candidate")
LABELS = {
    "first_stage": "first stage",
    "baseline": "baseline",
    "reranker": "reranker alone",
    "candidate": "candidate",
}
WORST_QUERIES = 10
FOLDS_NOTE = (
    "Each fold's queries are ranked by the model of its fold branch, which trained on the other "
    "folds but the next one, and chose its checkpoint and alpha on the next fold's queries."
)


def _p(value: float) -> str:
    return "n/a" if value is None or math.isnan(value) else f"{value:.4f}"


def system_label(metrics: dict, system: str) -> str:
    """A system's column name; the candidate is "fused (alpha=...)" when it carries fusion."""
    fusion = metrics.get("fusion")
    if system == "candidate" and fusion:
        if "alphas" in fusion:  # cross-validation: each fold's own alpha
            return f"fused (alpha per fold, mean {fusion['alpha']:.2f})"
        return f"fused (alpha={fusion['alpha']:.2f})"
    return LABELS[system]


def where(metrics: dict) -> str:
    """What was evaluated, for a sentence: "the test split" or, with cross-validation, every
    judged query by the model of the fold branch that never saw it."""
    cv = metrics.get("cross_validation")
    if not cv:
        return f"the {metrics['split']} split"
    folds = cv["folds"]
    return f"all queries, {folds}-fold cross-validated (each ranked by a model that never saw it)"


def fold_rows(metrics: dict) -> list[list[str]]:
    """Header + one row per fold (cross-validation): its queries, alpha and main metric per
    system; [] without cross-validation."""
    cv = metrics.get("cross_validation")
    if not cv:
        return []
    main = metrics[MAIN_METRIC]
    systems = [s for s in SYSTEMS if s in cv["per_fold"][0][main]]
    header = ["fold", "queries", "alpha", *(f"{system_label(metrics, s)} {main}" for s in systems)]
    rows = [header]
    for fold in cv["per_fold"]:
        alpha = "-" if fold["alpha"] is None else f"{fold['alpha']:.2f}"
        values = [f"{fold[main][s]:.4f}" for s in systems]
        rows.append([str(fold["fold"]), str(fold["queries"]), alpha, *values])
    return rows


def comparison_columns(metrics: dict) -> list[tuple[str, str, dict]]:
    """(system, reference, stats by measure) of every comparison the report shows: the
    candidate (what the blessing judges) vs the first stage and the baseline, and with fusion
    the reranker alone vs the first stage."""
    out = [
        ("candidate", ref, metrics["comparisons"][ref])
        for ref in ("first_stage", "baseline")
        if ref in metrics["comparisons"]
    ]
    for ref, stats in metrics.get("reranker_comparisons", {}).items():
        out.append(("reranker", ref, stats))
    return out


def summary_rows(metrics: dict) -> list[list[str]]:
    """Header + one row per measure: each system's mean, then per comparison the change,
    paired t-test and randomization p-values and wins/ties/losses."""
    agg = metrics["aggregate"]
    systems = [s for s in SYSTEMS if s in agg]
    columns = comparison_columns(metrics)
    several = len({system for system, _, _ in columns}) > 1
    header = ["measure", *(system_label(metrics, s) for s in systems)]
    for system, ref, _ in columns:
        who = f"{LABELS[system]} " if several else ""
        header += [f"Δ {who}vs {LABELS[ref]}", "p (t-test)", "p (randomization)", "W/T/L"]
    rows = [header]
    for measure in agg["candidate"]:
        row = [measure, *(f"{agg[s][measure]:.4f}" for s in systems)]
        for _, _, by_measure in columns:
            stats = by_measure[measure]
            row += [
                f"{stats['mean_delta']:+.4f}",
                _p(stats["ttest_p"]),
                _p(stats["randomization_p"]),
                f"{stats['wins']}/{stats['ties']}/{stats['losses']}",
            ]
        rows.append(row)
    return rows


def fusion_note(metrics: dict) -> str:
    """One sentence on how the candidate ranks (fused or not), for both reports."""
    fusion = metrics.get("fusion")
    if not fusion:
        return "The candidate ranks by the reranker's scores alone (no first-stage fusion)."
    how = "tuned on the dev queries" if fusion.get("mode") == "tuned" else "fixed in the config"
    alpha = f"{fusion['alpha']:.2f} {how}"
    if "alphas" in fusion:  # cross-validation: each fold branch's own
        alpha = f"{', '.join(f'{a:.2f}' for a in fusion['alphas'])} by fold (each {how})"
    note = (
        f"The candidate ranks by alpha * reranker + (1 - alpha) * first stage (both min-max "
        f"normalised per query), alpha = {alpha}; the blessing judges this "
        'fused ranking. "reranker alone" is the same model without fusion.'
    )
    settings = fusion.get("feedbacks") or ([fusion["feedback"]] if "feedback" in fusion else [])
    if any(feedback.is_on(s) for s in settings):
        what = "; ".join(
            (f"fold {i}: " if "feedbacks" in fusion else "") + feedback.describe(s)
            for i, s in enumerate(settings)
        )
        note += (
            " The reranker scores each query's candidates with pseudo-relevance feedback "
            "(each candidate's vector moved towards its nearest candidates, the query's towards "
            f"the first stage's top candidates; chosen on the dev queries): {what}."
        )
    return note


def per_query_deltas(metrics: dict, reference: str = "first_stage") -> list[tuple]:
    """(qid, reference value, candidate value, delta) of the main metric, worst first."""
    main = metrics[MAIN_METRIC]
    cand = metrics["per_query"]["candidate"]
    ref = metrics["per_query"][reference]
    rows = [(q, ref[q][main], cand[q][main], cand[q][main] - ref[q][main]) for q in cand]
    return sorted(rows, key=lambda r: (r[3], r[0]))


def _references(metrics: dict) -> list[str]:
    return [r for r in ("first_stage", "baseline") if r in metrics["per_query"]]


def _verdict(metrics: dict) -> str:
    return "BLESSED" if metrics[BLESSED] else "NOT BLESSED"


def markdown(metrics: dict) -> str:
    main = metrics[MAIN_METRIC]
    lines = [
        "# RankingEvaluator report",
        "",
        f"**{_verdict(metrics)}** on {where(metrics)} "
        f"({metrics['num_queries']} queries, {metrics['candidates_scored']} candidates scored"
        f"{', against the baseline model' if 'baseline' in metrics['aggregate'] else ''}).",
        "",
    ]
    lines += [f"- failed: {r}" for r in metrics["reasons"]]
    lines += [f"- passed: {r}" for r in metrics["checks"]]
    lines += ["", "## Summary", ""]
    rows = summary_rows(metrics)
    lines.append("| " + " | ".join(rows[0]) + " |")
    lines.append("|" + "---|" * len(rows[0]))
    lines += ["| " + " | ".join(r) + " |" for r in rows[1:]]
    lines += [
        "",
        "Δ is the system minus the reference, averaged over queries; W/T/L counts the "
        "queries where the system wins, ties or loses. " + fusion_note(metrics),
    ]
    folds = fold_rows(metrics)
    if folds:
        lines += ["", "## Folds", "", "| " + " | ".join(folds[0]) + " |"]
        lines.append("|" + "---|" * len(folds[0]))
        lines += ["| " + " | ".join(r) + " |" for r in folds[1:]]
        lines += ["", FOLDS_NOTE]
    for ref in _references(metrics):
        label = LABELS[ref]
        lines += ["", f"## Worst queries by {main} change vs {label}", ""]
        lines += [
            f"| qid | {label} | {system_label(metrics, 'candidate')} | Δ |",
            "|---|---|---|---|",
        ]
        lines += [
            f"| {q} | {r:.4f} | {c:.4f} | {d:+.4f} |"
            for q, r, c, d in per_query_deltas(metrics, ref)[:WORST_QUERIES]
        ]
    lines += ["", "## Files", ""]
    runs = metrics.get("runs", {})
    lines += [f"- {system_label(metrics, s)} run: `{f}`" for s, f in runs.items()]
    lines.append("- metrics (aggregate and per query): `metrics.json`")
    return "\n".join(lines) + "\n"


def _table(rows: list[list[str]], header: bool = True) -> str:
    out = []
    for i, row in enumerate(rows):
        tag = "th" if header and i == 0 else "td"
        out.append("<tr>" + "".join(f"<{tag}>{html_lib.escape(c)}</{tag}>" for c in row) + "</tr>")
    return "<table>" + "".join(out) + "</table>"


def html(metrics: dict, figures: Sequence[tuple[str, str, str]] = ()) -> str:
    """A standalone page: verdict and reasons, summary table, `figures` (title, caption, inline
    SVG: plots.report_figures' training curves and score distributions), then per reference a
    per-query change plot and the worst queries."""
    main = html_lib.escape(metrics[MAIN_METRIC])
    verdict = _verdict(metrics)
    items = [f"<li class='fail'>failed: {html_lib.escape(r)}</li>" for r in metrics["reasons"]]
    items += [f"<li>passed: {html_lib.escape(r)}</li>" for r in metrics["checks"]]
    sections = []
    for ref in _references(metrics):
        label = LABELS[ref]
        deltas = per_query_deltas(metrics, ref)
        worst = [["qid", label, system_label(metrics, "candidate"), "Δ"]] + [
            [q, f"{r:.4f}", f"{c:.4f}", f"{d:+.4f}"] for q, r, c, d in deltas[:WORST_QUERIES]
        ]
        sections.append(
            f"<h2>Per-query {main} change vs {label}</h2>"
            f"<p>{len(deltas)} queries, sorted by change (green: the candidate is better).</p>"
            f"<figure class='plot'>"
            f"{plots.per_query_change(deltas, metrics['main_metric'], label)}</figure>"
            f"<h3>Worst queries vs {label}</h3>{_table(worst)}"
        )
    folds = fold_rows(metrics)
    folds = f"<h2>Folds</h2>{_table(folds)}<p>{FOLDS_NOTE}</p>" if folds else ""
    pictures = "".join(
        f"<h2>{html_lib.escape(title)}</h2><p>{html_lib.escape(caption)}</p>"
        f"<figure class='plot'>{svg}</figure>"
        for title, caption, svg in figures
    )
    return (
        "<!doctype html><html><head><meta charset='utf-8'><title>RankingEvaluator report</title>"
        "<style>body{font-family:sans-serif;margin:1em}table{border-collapse:collapse}"
        "td,th{padding:2px 8px;border-bottom:1px solid #ddd;text-align:right}"
        "td:first-child,th:first-child{text-align:left}.fail{color:#c33}"
        ".BLESSED{color:#2a7}.NOT{color:#c33}figure.plot{margin:0}"
        "figure.plot svg{max-width:100%;height:auto}</style></head><body>"
        f"<h1>RankingEvaluator: <span class='{verdict.split()[0]}'>{verdict}</span></h1>"
        f"<p>{html_lib.escape(where(metrics))}: {metrics['num_queries']} queries, "
        f"{metrics['candidates_scored']} candidates scored.</p>"
        f"<ul>{''.join(items)}</ul><h2>Summary</h2>{_table(summary_rows(metrics))}"
        "<p>Δ is the system minus the reference, averaged over queries; W/T/L counts the "
        f"queries where the system wins, ties or loses. {html_lib.escape(fusion_note(metrics))}</p>"
        f"{folds}{pictures}{''.join(sections)}</body></html>"
    )
