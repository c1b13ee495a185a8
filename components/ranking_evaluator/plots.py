"""The evaluation report's pictures, drawn with matplotlib as inline SVG.

- per_query_change: the main metric's change per query vs a reference (sorted bars);
- training_curves: the Trainer's loss and validation metric over steps (train_results.json);
- score_distributions: the candidate's scores of relevant vs non-relevant candidates.

Each returns an `<svg>` element to paste into the HTML report: vector, no scripts, no external
resources (the Kubeflow UI's sandboxed viewer and an offline browser show it as is). Figures are
drawn through matplotlib's object API (Figure + its SVG canvas), never pyplot, so no GUI backend
is chosen and nothing global changes in the executor's process. Text stays text
(svg.fonttype none: searchable, small), and the output is deterministic (no date; ids hashed
from a per-figure salt, which also keeps ids distinct between the figures of one page).
"""

from __future__ import annotations

import functools
import io
import json
import logging
import math
import os
import re
from collections.abc import Callable, Iterable, Sequence
from typing import TypeVar

import matplotlib
import tensorflow as tf
from matplotlib.figure import Figure

from rankcore.constants import TRAIN_RESULTS_FILE

GAIN, LOSS, NEUTRAL = "#2a7", "#c33", "#888"
RELEVANT, NON_RELEVANT = "#2a7", "#57a"
MAX_LABELED_QUERIES = 60  # beyond this, bars carry no qid labels (the tables list the queries)
# A change within this is a tie, as in the report's W/T/L counts (significance.win_tie_loss).
TIE_EPS = 1e-9
# Text sizes for a figure shown at its own size: the SVG's unit is the point, which a browser
# draws as 4/3 CSS px, so 11 pt is about 15 px, like the page's text, and the smallest text
# (the qids under the bars) 8 pt, about 11 px. matplotlib's defaults (10 pt, titles set to
# 10 pt, qids at 7 pt) read small once a wide figure is scaled to the page (max-width: 100%).
STYLE = {
    "font.size": 11,
    "axes.titlesize": 12,
    "axes.labelsize": 11,
    "xtick.labelsize": 10,
    "ytick.labelsize": 10,
    "legend.fontsize": 10,
}
QID_FONT_SIZE = 8
MAX_WIDTH = 12.0  # inches: 1,152 px, about a page's width; more would be shrunk to fit

_F = TypeVar("_F", bound=Callable[..., str])


def _styled(draw: _F) -> _F:
    """Draws under STYLE: matplotlib reads text sizes when a text is made, so the figure is
    built, not only saved, inside the context (which also leaves the process's rcParams be)."""

    @functools.wraps(draw)
    def wrapper(*args, **kwargs):
        with matplotlib.rc_context(STYLE):
            return draw(*args, **kwargs)

    return wrapper  # type: ignore[return-value]


def _svg(fig: Figure, salt: str) -> str:
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": salt}):
        buffer = io.StringIO()
        fig.savefig(buffer, format="svg", metadata={"Date": None}, bbox_inches="tight")
    text = buffer.getvalue()
    # Inline: drop the XML declaration, DOCTYPE and the RDF metadata block (creator, format);
    # the <svg> element keeps its namespace.
    text = re.sub(r"\s*<metadata>.*?</metadata>", "", text, flags=re.S)
    return text[text.index("<svg") :].strip()


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


@_styled
def per_query_change(
    deltas: Sequence[tuple[str, float, float, float]], metric: str, reference: str
) -> str:
    """Bars of (qid, reference value, candidate value, change), in the given (sorted) order."""
    n = len(deltas)
    fig = Figure(figsize=(min(max(6.5, 0.18 * n + 2.0), MAX_WIDTH), 3.8))
    ax = fig.add_subplot()
    values = [d for *_, d in deltas]
    colors = [GAIN if d > TIE_EPS else LOSS if d < -TIE_EPS else NEUTRAL for d in values]
    bars = ax.bar(range(n), values, color=colors, width=0.8)
    for i, bar in enumerate(bars):  # ids for tests and for styling: delta-<reference>-<rank>
        bar.set_gid(f"delta-{_slug(reference)}-{i}")
    ax.axhline(0.0, color="#444", linewidth=0.8)
    wins = sum(d > TIE_EPS for d in values)
    losses = sum(d < -TIE_EPS for d in values)
    ax.set_title(
        f"{metric}: candidate minus {reference}, per query\n"
        f"({wins} better, {n - wins - losses} same, {losses} worse)"
    )
    ax.set_ylabel(f"Δ {metric}")
    if n <= MAX_LABELED_QUERIES:
        # "$" would start matplotlib's mathtext.
        labels = [str(q).replace("$", r"\$") for q, *_ in deltas]
        ax.set_xticks(range(n), labels, rotation=90, fontsize=QID_FONT_SIZE)
        ax.set_xlabel("query (qid), sorted by change")
    else:
        ax.set_xticks([])
        ax.set_xlabel(f"{n} queries, sorted by change")
    ax.set_xlim(-0.6, n - 0.4)
    ax.grid(axis="y", alpha=0.3)
    return _svg(fig, f"delta-{_slug(reference)}")


@_styled
def training_curves(
    loss_history: Iterable[Sequence[float]],
    validation_history: Iterable[Sequence[float]],
    validation_metric: str,
    best_step: int | None = None,
) -> str:
    """Training loss (mean over each logging window) and the dev metric, over steps."""
    loss = [(s, v) for s, v in loss_history if v is not None and math.isfinite(v)]
    val = [(s, v) for s, v in validation_history if v is not None and math.isfinite(v)]
    panels = [p for p in (loss, val) if p]
    fig = Figure(figsize=(5.2 * max(1, len(panels)), 3.6))
    axes = fig.subplots(1, max(1, len(panels)), squeeze=False)[0]
    i = 0
    if loss:
        ax = axes[i]
        i += 1
        ax.plot([s for s, _ in loss], [v for _, v in loss], color="#c60", marker=".")
        ax.set_title("training loss")
        ax.set_xlabel("step")
        ax.set_ylabel("loss (mean of the window)")
        ax.grid(alpha=0.3)
    if val:
        ax = axes[i]
        ax.plot([s for s, _ in val], [v for _, v in val], color="#36a", marker="o")
        if best_step is not None and best_step >= 0:
            ax.axvline(best_step, color="#888", linestyle="--", linewidth=0.8)
            ax.annotate(
                "best (exported)",
                (best_step, min(v for _, v in val)),
                xytext=(4, 2),
                textcoords="offset points",
                fontsize=9,
            )
        ax.set_title(f"dev {validation_metric}")
        ax.set_xlabel("step")
        ax.set_ylabel(validation_metric)
        ax.grid(alpha=0.3)
    fig.tight_layout()
    return _svg(fig, "training")


@_styled
def score_distributions(
    relevant: Sequence[float], non_relevant: Sequence[float], system: str = "candidate"
) -> str:
    """Histograms (shared bins, each normalised to its own count) of the scores."""
    fig = Figure(figsize=(7.0, 3.8))
    ax = fig.add_subplot()
    everything = [*relevant, *non_relevant]
    low, high = (min(everything), max(everything)) if everything else (0.0, 1.0)
    if high <= low:
        low, high = low - 0.5, high + 0.5
    bins = [low + (high - low) * k / 40 for k in range(41)]
    for scores, color, label in (
        (non_relevant, NON_RELEVANT, f"non-relevant or unjudged ({len(non_relevant):,})"),
        (relevant, RELEVANT, f"relevant ({len(relevant):,})"),
    ):
        if scores:
            ax.hist(scores, bins=bins, density=True, alpha=0.55, color=color, label=label)
    ax.set_title(f"{system} scores of the evaluated candidates")
    ax.set_xlabel("score")
    ax.set_ylabel("density")
    ax.legend()
    ax.grid(alpha=0.3)
    return _svg(fig, f"scores-{_slug(system)}")


def split_scores(
    run: dict[str, dict[str, float]], qrels: dict[str, dict[str, int]], relevance_level: int
) -> tuple[list[float], list[float]]:
    """(relevant, non-relevant) scores of a run: judged >= relevance_level counts relevant;
    judged below it and unjudged count non-relevant, as trec_eval counts them."""
    relevant, other = [], []
    for qid, docs in run.items():
        judged = qrels.get(qid, {})
        for docid, score in docs.items():
            (relevant if judged.get(docid, 0) >= relevance_level else other).append(score)
    return relevant, other


def report_figures(
    train_results: dict | None,
    run: dict[str, dict[str, float]] | None,
    qrels: dict[str, dict[str, int]] | None,
    relevance_level: int,
) -> list[tuple[str, str, str]]:
    """(title, caption, svg) of the figures beyond the per-query bars, for report.html()."""
    figures = []
    if train_results and (
        train_results.get("loss_history") or train_results.get("validation_history")
    ):
        metric = train_results.get("validation_metric", "validation metric")
        figures.append(
            (
                "Training",
                f"Trainer: loss and dev {metric} over {train_results.get('steps', '?')} steps; "
                "the exported model is the best validated one (dashed line).",
                training_curves(
                    train_results.get("loss_history") or [],
                    train_results.get("validation_history") or [],
                    metric,
                    train_results.get("best_step"),
                ),
            )
        )
    if run and qrels is not None:
        relevant, other = split_scores(run, qrels, relevance_level)
        figures.append(
            (
                "Scores of relevant and non-relevant candidates",
                "The candidate's scores of every evaluated candidate; the further apart the two "
                "distributions, the better the model separates relevant documents.",
                score_distributions(relevant, other),
            )
        )
    return figures


def read_train_results(model_run) -> dict | None:
    """train_results.json of the Trainer's model_run artifact (None: no artifact or file)."""
    if model_run is None:
        return None
    path = os.path.join(model_run.uri, TRAIN_RESULTS_FILE)
    if not tf.io.gfile.exists(path):
        return None
    with tf.io.gfile.GFile(path) as f:
        return json.load(f)


def figures_or_none(
    train_results: dict | None,
    run: dict[str, dict[str, float]] | None,
    qrels: dict[str, dict[str, int]] | None,
    relevance_level: int,
) -> list[tuple[str, str, str]]:
    """report_figures, or none when drawing fails: a plotting problem is logged with its
    traceback but does not cost the evaluation (the blessing does not depend on pictures)."""
    try:
        return report_figures(train_results, run, qrels, relevance_level)
    except Exception:  # noqa: BLE001
        logging.exception("report figures could not be drawn; the report has none")
        return []
