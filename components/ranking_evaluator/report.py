"""Human-readable evaluation reports: Markdown, and a self-contained HTML page (no scripts,
no external resources, so the Kubeflow UI's sandboxed HTML viewer shows all of it)."""

from __future__ import annotations

import html as html_lib
import math
import shlex
from collections.abc import Mapping, Sequence

from components.ranking_evaluator import plots, significance
from components.ranking_evaluator.constants import BLESSED, MAIN_METRIC
from components.ranking_evaluator.texts import TOP_DOCUMENTS
from rankcore import feedback

SYSTEMS = ("first_stage", "baseline", "reranker", "candidate")
LABELS = {
    "first_stage": "first stage",
    "baseline": "baseline",
    "reranker": "reranker alone",
    "candidate": "candidate",
}
# Queries listed per reference and direction (largest losses, largest gains).
LISTED_QUERIES = 10
# A change within this counts as a tie, as in the W/T/L counts and the per-query bars.
TIE_EPS = plots.TIE_EPS
# How the settings that evaluate every judged query are spelled (config.py, docs/evaluator.md).
CROSS_VALIDATION_FIX = (
    "cross-validation: evaluator.cross_validation.folds: 5 with datagen.split.num_folds: 5, "
    "which evaluates every judged query"
)
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


def no_candidate_note(metrics: dict) -> str | None:
    """The sentence on the evaluated judged queries that had no first-stage candidate
    (metrics.json `queries_without_candidates`, measuring.no_candidate_note); None when every
    one had candidates (or none was recorded: a warning says so)."""
    return (metrics.get("queries_without_candidates") or {}).get("note")


def fold_rows(metrics: dict) -> list[list[str]]:
    """Header + one row per fold (cross-validation): its queries, alpha and main metric per
    system; [] without cross-validation."""
    cv = metrics.get("cross_validation")
    if not cv:
        return []
    main = metrics[MAIN_METRIC]
    systems = [s for s in SYSTEMS if s in cv["per_fold"][0][main]]
    # Queries without a first-stage candidate (scored 0 by every system): a column only
    # when some fold has one.
    none = [fold.get("queries_without_candidates", 0) for fold in cv["per_fold"]]
    header = ["fold", "queries", *(["no candidate"] if any(none) else []), "alpha"]
    header += [f"{system_label(metrics, s)} {main}" for s in systems]
    rows = [header]
    for fold, n in zip(cv["per_fold"], none):
        alpha = "-" if fold["alpha"] is None else f"{fold['alpha']:.2f}"
        values = [f"{fold[main][s]:.4f}" for s in systems]
        counts = [str(fold["queries"]), *([str(n)] if any(none) else [])]
        rows.append([str(fold["fold"]), *counts, alpha, *values])
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
    # The baseline has figures only on the queries held out from it (measuring.measure).
    rows = [
        (q, ref[q][main], cand[q][main], cand[q][main] - ref[q][main]) for q in cand if q in ref
    ]
    return sorted(rows, key=lambda r: (r[3], r[0]))


def losses_and_gains(metrics: dict, reference: str) -> tuple[list[tuple], list[tuple]]:
    """The listed queries vs `reference`: (largest losses, worst first; largest gains, best
    first), at most LISTED_QUERIES each; a query within TIE_EPS of the reference is in neither,
    so a list holds only what its heading says (no gain under "losses")."""
    deltas = per_query_deltas(metrics, reference)
    losses = [r for r in deltas if r[3] < -TIE_EPS][:LISTED_QUERIES]
    gains = [r for r in reversed(deltas) if r[3] > TIE_EPS][:LISTED_QUERIES]
    return losses, gains


def listed_qids(metrics: dict) -> set[str]:
    """Every query the report lists (losses and gains against each reference): the queries
    whose texts and top documents the executor looks up (texts.py)."""
    return {
        row[0]
        for ref in _references(metrics)
        for rows in losses_and_gains(metrics, ref)
        for row in rows
    }


def significance_warnings(n: int, level: float, split: str = "test", folds: int = 0) -> list[str]:
    """A warning when `n` queries are too few for the randomization test to ever give
    p < `level`: its smallest two-sided p is 2/2^n (significance.min_randomization_p), so
    with 5 queries and 0.05 no model can be significant; `require_significance` would then
    refuse every model. [] when the test can pass."""
    smallest = significance.min_randomization_p(n)
    if smallest < level:
        return []
    if folds:
        what = f"{n} queries ({folds}-fold cross-validation: every judged query)"
        fix = "judge more queries (cross-validation already evaluates every judged one)"
    else:
        what = f"{n} {split} queries"
        fix = f"use more {split} queries (e.g. {CROSS_VALIDATION_FIX})"
    return [
        f"{what}: the significance test cannot reach p < {level:g} (the smallest two-sided p "
        f"of the paired randomization test over {n} queries is 2/2^{n} = {smallest:.4g}); {fix}"
    ]


def tensorboard_command(logdirs: Mapping[str, str] | None) -> str | None:
    """The command that shows the Trainer's TensorBoard logs (its model_run artifact holds
    `train/` and `validation/` event files): one --logdir, or with cross-validation the
    pushed model's and every fold branch's runs by name (--logdir_spec). None without a run."""
    logdirs = {name: path for name, path in (logdirs or {}).items() if path}
    if not logdirs:
        return None
    if len(logdirs) == 1:
        return f"tensorboard --logdir {shlex.quote(next(iter(logdirs.values())))}"
    spec = ",".join(f"{name}:{path}" for name, path in logdirs.items())
    return f"tensorboard --logdir_spec {shlex.quote(spec)}"


def _grade(grade: int | None) -> str:
    return "unjudged" if grade is None else str(grade)


def _doc_cell(doc: dict) -> str:
    return f"{doc['docid']}: {doc['text']}" if doc.get("text") else doc["docid"]


def query_text(metrics: dict, qid: str) -> str:
    """The query's text as listed_queries recorded it ("" when unknown)."""
    listed = (metrics.get("listed_queries") or {}).get("queries", {})
    return (listed.get(qid) or {}).get("text") or ""


def list_rows(metrics: dict, reference: str, rows: list[tuple]) -> list[list[str]]:
    """Header + one row per listed query: qid, its text (when known), both values, change."""
    label = LABELS[reference]
    texts = any(query_text(metrics, q) for q, *_ in rows)
    header = ["qid", *(["query"] if texts else []), label, system_label(metrics, "candidate"), "Δ"]
    return [header] + [
        [q, *([query_text(metrics, q)] if texts else []), f"{r:.4f}", f"{c:.4f}", f"{d:+.4f}"]
        for q, r, c, d in rows
    ]


def top_rows(metrics: dict, reference: str, rows: list[tuple]) -> list[list[str]]:
    """Header + per listed query and rank: the candidate's and the reference's document at that
    rank (docid: first words) and its judged grade; [] when the executor recorded none."""
    listed = (metrics.get("listed_queries") or {}).get("queries", {})
    if not any(q in listed for q, *_ in rows):
        return []
    cand, ref = system_label(metrics, "candidate"), LABELS[reference]
    out = [["qid", "rank", cand, "grade", ref, "grade"]]
    for q, *_ in rows:
        top = (listed.get(q) or {}).get("top", {})
        ours, theirs = top.get("candidate", []), top.get(reference, [])
        for i in range(max(len(ours), len(theirs))):
            row = [q if i == 0 else "", str(i + 1)]
            for docs in (ours, theirs):
                row += [_doc_cell(docs[i]), _grade(docs[i]["grade"])] if i < len(docs) else ["", ""]
            out.append(row)
    return out


def _lists(metrics: dict, reference: str) -> list[tuple[str, list[list[str]], list[list[str]]]]:
    """(heading or the sentence that replaces an empty list, query rows, top-document rows)
    of the largest losses and gains vs `reference`."""
    main, label = metrics[MAIN_METRIC], LABELS[reference]
    deltas = [d for *_, d in per_query_deltas(metrics, reference)]
    counts = {
        "losses": sum(d < -TIE_EPS for d in deltas),
        "gains": sum(d > TIE_EPS for d in deltas),
    }
    losses, gains = losses_and_gains(metrics, reference)
    out = []
    for rows, kind, none in ((losses, "losses", "lost"), (gains, "gains", "gained")):
        if rows:
            shown = f"; the {len(rows)} largest" if len(rows) < counts[kind] else ""
            heading = (
                f"Largest {kind} in {main} vs {label} "
                f"({counts[kind]} of {len(deltas)} queries {none}{shown})"
            )
            out.append(
                (heading, list_rows(metrics, reference, rows), top_rows(metrics, reference, rows))
            )
        else:
            out.append((f"No query {none} {main} against the {label}.", [], []))
    return out


def top_note(metrics: dict) -> str:
    """The sentence above the top-documents table: what it shows and where its texts are from."""
    where_from = (metrics.get("listed_queries") or {}).get("texts")
    texts = (
        "Texts are the examples' token ids decoded with the model's vocabulary, i.e. the text "
        "as the model reads it (normalised, documents cut at datagen.max_doc_length), shortened "
        "to about 80 characters."
        if where_from
        else "No texts: the model carries no vocabulary (assets/vocab.txt) to decode them with."
    )
    return (
        f"Each listed query's top {TOP_DOCUMENTS} documents by the candidate and by the "
        f"reference, with their judged grade (unjudged: not in the qrels). {texts}"
    )


def _references(metrics: dict) -> list[str]:
    return [r for r in ("first_stage", "baseline") if r in metrics["per_query"]]


def _verdict(metrics: dict) -> str:
    return "BLESSED" if metrics[BLESSED] else "NOT BLESSED"


def _md_table(rows: list[list[str]]) -> list[str]:
    """A Markdown table; "|" in a cell (a query or document text) is escaped."""
    cells = [[c.replace("|", "\\|") for c in row] for row in rows]
    lines = ["| " + " | ".join(cells[0]) + " |", "|" + "---|" * len(cells[0])]
    return lines + ["| " + " | ".join(r) + " |" for r in cells[1:]]


def _warnings(metrics: dict) -> list[str]:
    """metrics.json `warnings` not already among the failed rules (with require_significance
    the small-sample warning is a reason too, see measuring.decide)."""
    return [w for w in metrics.get("warnings") or [] if w not in metrics["reasons"]]


def _tensorboard(metrics: dict) -> str | None:
    return tensorboard_command(metrics.get("tensorboard_logdirs"))


def markdown(metrics: dict) -> str:
    """report.md: verdict and rules, warnings, summary, folds, the largest losses and gains per
    reference with each query's text and top documents, files and the TensorBoard command."""
    lines = [
        "# RankingEvaluator report",
        "",
        f"**{_verdict(metrics)}** on {where(metrics)} "
        f"({metrics['num_queries']} queries, {metrics['candidates_scored']} candidates scored"
        f"{', against the baseline model' if 'baseline' in metrics['aggregate'] else ''}).",
        "",
    ]
    note = no_candidate_note(metrics)
    if note:
        lines += [f"{note}.", ""]
    lines += [f"- failed: {r}" for r in metrics["reasons"]]
    lines += [f"- warning: {w}" for w in _warnings(metrics)]
    lines += [f"- passed: {r}" for r in metrics["checks"]]
    lines += ["", "## Summary", "", *_md_table(summary_rows(metrics))]
    lines += [
        "",
        "Δ is the system minus the reference, averaged over queries; W/T/L counts the "
        "queries where the system wins, ties or loses. " + fusion_note(metrics),
    ]
    folds = fold_rows(metrics)
    if folds:
        lines += ["", "## Folds", "", *_md_table(folds), "", FOLDS_NOTE]
    for ref in _references(metrics):
        for heading, rows, top in _lists(metrics, ref):
            if not rows:
                lines += ["", heading]
                continue
            lines += ["", f"## {heading}", "", *_md_table(rows)]
            if top:
                lines += ["", top_note(metrics), "", *_md_table(top)]
    lines += ["", "## Files", ""]
    runs = metrics.get("runs", {})
    lines += [f"- {system_label(metrics, s)} run: `{f}`" for s, f in runs.items()]
    lines.append("- metrics (aggregate and per query): `metrics.json`")
    command = _tensorboard(metrics)
    if command:
        lines.append(f"- the Trainer's TensorBoard logs: `{command}`")
    return "\n".join(lines) + "\n"


def _table(rows: list[list[str]], header: bool = True, text: Sequence[str] = ()) -> str:
    """An HTML table, every cell escaped; columns whose header is in `text` (query and document
    texts) are left-aligned."""
    left = {i for i, name in enumerate(rows[0]) if name in text} if rows else set()
    out = []
    for i, row in enumerate(rows):
        tag = "th" if header and i == 0 else "td"
        attrs = [" class='text'" if j in left else "" for j in range(len(row))]
        cells = (f"<{tag}{a}>{html_lib.escape(c)}</{tag}>" for a, c in zip(attrs, row))
        out.append("<tr>" + "".join(cells) + "</tr>")
    return "<table>" + "".join(out) + "</table>"


def html(metrics: dict, figures: Sequence[tuple[str, str, str]] = ()) -> str:
    """A standalone page: verdict, reasons and warnings, summary table, `figures` (title,
    caption, inline SVG: plots.report_figures' training curves and score distributions), then
    per reference a per-query change plot and the largest losses and gains with each query's
    text and top documents, and the files and TensorBoard command."""
    main = html_lib.escape(metrics[MAIN_METRIC])
    verdict = _verdict(metrics)
    items = [f"<li class='fail'>failed: {html_lib.escape(r)}</li>" for r in metrics["reasons"]]
    items += [f"<li class='warn'>warning: {html_lib.escape(w)}</li>" for w in _warnings(metrics)]
    items += [f"<li>passed: {html_lib.escape(r)}</li>" for r in metrics["checks"]]
    sections = []
    for ref in _references(metrics):
        label = LABELS[ref]
        deltas = per_query_deltas(metrics, ref)
        lists = []
        for heading, rows, top in _lists(metrics, ref):
            if not rows:
                lists.append(f"<p><b>{html_lib.escape(heading)}</b></p>")
                continue
            cand = system_label(metrics, "candidate")
            lists.append(
                f"<h3>{html_lib.escape(heading)}</h3>{_table(rows, text=['query'])}"
                + (
                    f"<p>{html_lib.escape(top_note(metrics))}</p>{_table(top, text=[cand, label])}"
                    if top
                    else ""
                )
            )
        sections.append(
            f"<h2>Per-query {main} change vs {label}</h2>"
            f"<p>{len(deltas)} queries, sorted by change (green: the candidate is better).</p>"
            f"<figure class='plot'>"
            f"{plots.per_query_change(deltas, metrics['main_metric'], label)}</figure>"
            + "".join(lists)
        )
    folds = fold_rows(metrics)
    folds = f"<h2>Folds</h2>{_table(folds)}<p>{FOLDS_NOTE}</p>" if folds else ""
    note = no_candidate_note(metrics)
    note = f"<p>{html_lib.escape(note)}.</p>" if note else ""
    pictures = "".join(
        f"<h2>{html_lib.escape(title)}</h2><p>{html_lib.escape(caption)}</p>"
        f"<figure class='plot'>{svg}</figure>"
        for title, caption, svg in figures
    )
    files = [
        f"{system_label(metrics, s)} run: <code>{html_lib.escape(f)}</code>"
        for s, f in metrics.get("runs", {}).items()
    ]
    files.append("metrics (aggregate and per query): <code>metrics.json</code>")
    command = _tensorboard(metrics)
    if command:
        files.append(f"the Trainer's TensorBoard logs: <code>{html_lib.escape(command)}</code>")
    return (
        "<!doctype html><html><head><meta charset='utf-8'><title>RankingEvaluator report</title>"
        "<style>body{font-family:sans-serif;margin:1em}table{border-collapse:collapse}"
        "td,th{padding:2px 8px;border-bottom:1px solid #ddd;text-align:right}"
        "td:first-child,th:first-child,.text{text-align:left}.text{max-width:40em}"
        ".fail{color:#c33}.warn{color:#b60}"
        ".BLESSED{color:#2a7}.NOT{color:#c33}figure.plot{margin:0}"
        "figure.plot svg{max-width:100%;height:auto}</style></head><body>"
        f"<h1>RankingEvaluator: <span class='{verdict.split()[0]}'>{verdict}</span></h1>"
        f"<p>{html_lib.escape(where(metrics))}: {metrics['num_queries']} queries, "
        f"{metrics['candidates_scored']} candidates scored.</p>{note}"
        f"<ul>{''.join(items)}</ul><h2>Summary</h2>{_table(summary_rows(metrics))}"
        "<p>Δ is the system minus the reference, averaged over queries; W/T/L counts the "
        f"queries where the system wins, ties or loses. {html_lib.escape(fusion_note(metrics))}</p>"
        f"{folds}{pictures}{''.join(sections)}"
        f"<h2>Files</h2><ul>{''.join(f'<li>{f}</li>' for f in files)}</ul></body></html>"
    )
