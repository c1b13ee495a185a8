"""Human-readable evaluation reports (Markdown and a self-contained HTML page)."""

from __future__ import annotations

import html as html_lib

_SYSTEMS = ("first_stage", "baseline", "candidate")


def _summary_rows(metrics: dict) -> list[list[str]]:
    agg = metrics["aggregate"]
    systems = [s for s in _SYSTEMS if s in agg]
    rows = [["measure", *systems, "delta vs first stage", "p (randomization)"]]
    comparison = metrics["comparisons"].get("first_stage", {})
    for measure in agg["candidate"]:
        stats = comparison.get(measure, {})
        rows.append(
            [
                measure,
                *(f"{agg[s][measure]:.4f}" for s in systems),
                f"{stats.get('mean_delta', float('nan')):+.4f}",
                f"{stats.get('randomization_p', float('nan')):.4f}",
            ]
        )
    return rows


def _per_query_deltas(metrics: dict) -> list[tuple[str, float, float, float]]:
    main = metrics["main_metric"]
    cand = metrics["per_query"]["candidate"]
    first = metrics["per_query"]["first_stage"]
    rows = []
    for qid in cand:
        c = cand[qid].get(main, 0.0)
        f = first.get(qid, {}).get(main, 0.0)
        rows.append((qid, f, c, c - f))
    return sorted(rows, key=lambda r: r[3])


def markdown(metrics: dict) -> str:
    main = metrics["main_metric"]
    verdict = "BLESSED" if metrics["blessed"] else "NOT BLESSED"
    lines = [
        "# RankingEvaluator report",
        "",
        f"**{verdict}** on the {metrics['split']} split "
        f"({metrics['num_queries']} queries, {metrics['candidates_scored']} candidates scored).",
        "",
    ]
    lines += [f"- failed: {r}" for r in metrics["reasons"]]
    lines += [f"- passed: {r}" for r in metrics["checks"]]
    lines += ["", "## Summary", ""]
    rows = _summary_rows(metrics)
    lines.append("| " + " | ".join(rows[0]) + " |")
    lines.append("|" + "---|" * len(rows[0]))
    lines += ["| " + " | ".join(r) + " |" for r in rows[1:]]
    lines += ["", f"## Worst queries by {main} change vs first stage", ""]
    lines += ["| qid | first stage | candidate | delta |", "|---|---|---|---|"]
    lines += [
        f"| {q} | {f:.4f} | {c:.4f} | {d:+.4f} |" for q, f, c, d in _per_query_deltas(metrics)[:10]
    ]
    return "\n".join(lines) + "\n"


def html(metrics: dict) -> str:
    """A standalone page with the summary table and an inline SVG per-query delta plot."""
    rows = _summary_rows(metrics)
    table = "".join(
        "<tr>"
        + "".join(
            f"<{'th' if i == 0 else 'td'}>{html_lib.escape(c)}</{'th' if i == 0 else 'td'}>"
            for c in r
        )
        + "</tr>"
        for i, r in enumerate(rows)
    )
    deltas = _per_query_deltas(metrics)
    width, height = 640, 200
    bar_w = width / max(1, len(deltas))
    peak = max([abs(d) for *_, d in deltas] + [1e-9])
    bars = "".join(
        f'<rect x="{i * bar_w:.1f}" y="{min(height / 2, height / 2 - d / peak * height / 2):.1f}" '
        f'width="{max(bar_w - 1, 1):.1f}" height="{abs(d) / peak * height / 2:.1f}" '
        f'fill="{"#2a7" if d >= 0 else "#c33"}"><title>{html_lib.escape(q)}: {d:+.4f}</title></rect>'
        for i, (q, _, _, d) in enumerate(deltas)
    )
    verdict = "BLESSED" if metrics["blessed"] else "NOT BLESSED"
    reasons = "".join(
        f"<li>{html_lib.escape(r)}</li>" for r in metrics["reasons"] + metrics["checks"]
    )
    return (
        "<!doctype html><html><head><meta charset='utf-8'><title>rankpipe evaluation</title>"
        "<style>body{font-family:sans-serif}td,th{padding:2px 8px;border-bottom:1px solid #ddd}"
        "</style></head><body>"
        f"<h1>RankingEvaluator: {verdict}</h1><ul>{reasons}</ul>"
        f"<table>{table}</table>"
        f"<h2>Per-query {html_lib.escape(metrics['main_metric'])} change vs first stage</h2>"
        f'<svg width="{width}" height="{height}" style="border:1px solid #ccc">'
        f'<line x1="0" y1="{height / 2}" x2="{width}" y2="{height / 2}" stroke="#888"/>{bars}</svg>'
        "<pre>" + html_lib.escape(markdown(metrics)) + "</pre></body></html>"
    )
