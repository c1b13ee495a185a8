"""Human-readable evaluation reports: Markdown, and a self-contained HTML page (no scripts,
no external resources, so the Kubeflow UI's sandboxed HTML viewer shows all of it)."""

from __future__ import annotations

import html as html_lib
import math

SYSTEMS = ("first_stage", "baseline", "candidate")
LABELS = {"first_stage": "first stage", "baseline": "baseline", "candidate": "candidate"}
WORST_QUERIES = 10


def _p(value: float) -> str:
    return "n/a" if value is None or math.isnan(value) else f"{value:.4f}"


def summary_rows(metrics: dict) -> list[list[str]]:
    """Header + one row per measure: each system's mean, then per reference the change,
    paired t-test and randomization p-values and wins/ties/losses of the candidate."""
    agg = metrics["aggregate"]
    systems = [s for s in SYSTEMS if s in agg]
    references = [r for r in ("first_stage", "baseline") if r in metrics["comparisons"]]
    header = ["measure", *(LABELS[s] for s in systems)]
    for ref in references:
        header += [f"Δ vs {LABELS[ref]}", "p (t-test)", "p (randomization)", "W/T/L"]
    rows = [header]
    for measure in agg["candidate"]:
        row = [measure, *(f"{agg[s][measure]:.4f}" for s in systems)]
        for ref in references:
            stats = metrics["comparisons"][ref][measure]
            row += [
                f"{stats['mean_delta']:+.4f}",
                _p(stats["ttest_p"]),
                _p(stats["randomization_p"]),
                f"{stats['wins']}/{stats['ties']}/{stats['losses']}",
            ]
        rows.append(row)
    return rows


def per_query_deltas(metrics: dict, reference: str = "first_stage") -> list[tuple]:
    """(qid, reference value, candidate value, delta) of the main metric, worst first."""
    main = metrics["main_metric"]
    cand = metrics["per_query"]["candidate"]
    ref = metrics["per_query"][reference]
    rows = [(q, ref[q][main], cand[q][main], cand[q][main] - ref[q][main]) for q in cand]
    return sorted(rows, key=lambda r: (r[3], r[0]))


def _references(metrics: dict) -> list[str]:
    return [r for r in ("first_stage", "baseline") if r in metrics["per_query"]]


def _verdict(metrics: dict) -> str:
    return "BLESSED" if metrics["blessed"] else "NOT BLESSED"


def markdown(metrics: dict) -> str:
    main = metrics["main_metric"]
    lines = [
        "# RankingEvaluator report",
        "",
        f"**{_verdict(metrics)}** on the {metrics['split']} split "
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
        "Δ is the candidate minus the reference, averaged over queries; W/T/L counts the "
        "queries where the candidate wins, ties or loses.",
    ]
    for ref in _references(metrics):
        label = LABELS[ref]
        lines += ["", f"## Worst queries by {main} change vs {label}", ""]
        lines += [f"| qid | {label} | candidate | Δ |", "|---|---|---|---|"]
        lines += [
            f"| {q} | {r:.4f} | {c:.4f} | {d:+.4f} |"
            for q, r, c, d in per_query_deltas(metrics, ref)[:WORST_QUERIES]
        ]
    lines += ["", "## Files", ""]
    lines += [f"- {LABELS[s]} run: `{f}`" for s, f in metrics.get("runs", {}).items()]
    lines.append("- metrics (aggregate and per query): `metrics.json`")
    return "\n".join(lines) + "\n"


def _table(rows: list[list[str]], header: bool = True) -> str:
    out = []
    for i, row in enumerate(rows):
        tag = "th" if header and i == 0 else "td"
        out.append("<tr>" + "".join(f"<{tag}>{html_lib.escape(c)}</{tag}>" for c in row) + "</tr>")
    return "<table>" + "".join(out) + "</table>"


def delta_plot(deltas: list[tuple], width: int = 720, height: int = 220) -> str:
    """Inline SVG: one bar per query (sorted), green above zero, red below; hover shows qid."""
    bar_w = width / max(1, len(deltas))
    peak = max([abs(d) for *_, d in deltas] + [1e-9])
    mid = height / 2
    bars = []
    for i, (q, r, c, d) in enumerate(deltas):
        h = abs(d) / peak * (mid - 2)
        y = mid - h if d >= 0 else mid
        title = html_lib.escape(f"{q}: {r:.4f} -> {c:.4f} ({d:+.4f})")
        bars.append(
            f'<rect x="{i * bar_w:.1f}" y="{y:.1f}" width="{max(bar_w - 1, 1):.1f}" '
            f'height="{max(h, 0.5):.1f}" fill="{"#2a7" if d >= 0 else "#c33"}">'
            f"<title>{title}</title></rect>"
        )
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'role="img" style="border:1px solid #ccc">'
        f'<line x1="0" y1="{mid}" x2="{width}" y2="{mid}" stroke="#888"/>{"".join(bars)}'
        f'<text x="4" y="12" font-size="11">+{peak:.3f}</text>'
        f'<text x="4" y="{height - 4}" font-size="11">-{peak:.3f}</text></svg>'
    )


def html(metrics: dict) -> str:
    """A standalone page: verdict and reasons, summary table, per-query delta plots and the
    worst queries against each reference."""
    main = html_lib.escape(metrics["main_metric"])
    verdict = _verdict(metrics)
    items = [f"<li class='fail'>failed: {html_lib.escape(r)}</li>" for r in metrics["reasons"]]
    items += [f"<li>passed: {html_lib.escape(r)}</li>" for r in metrics["checks"]]
    sections = []
    for ref in _references(metrics):
        label = LABELS[ref]
        deltas = per_query_deltas(metrics, ref)
        worst = [["qid", label, "candidate", "Δ"]] + [
            [q, f"{r:.4f}", f"{c:.4f}", f"{d:+.4f}"] for q, r, c, d in deltas[:WORST_QUERIES]
        ]
        sections.append(
            f"<h2>Per-query {main} change vs {label}</h2>"
            f"<p>{len(deltas)} queries, sorted by change; hover a bar for the query.</p>"
            f"{delta_plot(deltas)}<h3>Worst queries vs {label}</h3>{_table(worst)}"
        )
    return (
        "<!doctype html><html><head><meta charset='utf-8'><title>RankingEvaluator report</title>"
        "<style>body{font-family:sans-serif;margin:1em}table{border-collapse:collapse}"
        "td,th{padding:2px 8px;border-bottom:1px solid #ddd;text-align:right}"
        "td:first-child,th:first-child{text-align:left}.fail{color:#c33}"
        ".BLESSED{color:#2a7}.NOT{color:#c33}</style></head><body>"
        f"<h1>RankingEvaluator: <span class='{verdict.split()[0]}'>{verdict}</span></h1>"
        f"<p>{html_lib.escape(metrics['split'])} split, {metrics['num_queries']} queries, "
        f"{metrics['candidates_scored']} candidates scored.</p>"
        f"<ul>{''.join(items)}</ul><h2>Summary</h2>{_table(summary_rows(metrics))}"
        "<p>Δ is the candidate minus the reference, averaged over queries; W/T/L counts the "
        "queries where the candidate wins, ties or loses.</p>"
        f"{''.join(sections)}</body></html>"
    )
