"""The blessing decision: absolute floors, required gains, optional significance."""

from __future__ import annotations

from dataclasses import dataclass, field

from components.ranking_evaluator.config import EvaluatorConfig


@dataclass
class Decision:
    blessed: bool
    reasons: list[str] = field(default_factory=list)
    checks: list[str] = field(default_factory=list)


def _on_fewer(comparisons: dict[str, dict], reference: str) -> str:
    """The check's note where the baseline is compared on fewer queries than the candidate is
    measured on (it trained or chose on the others: baseline.py); "" otherwise."""
    if reference != "baseline" or "first_stage" not in comparisons:
        return ""
    n = next(iter(comparisons[reference].values()), {}).get("n")
    total = next(iter(comparisons["first_stage"].values()), {}).get("n")
    if n is None or total is None or n >= total:
        return ""
    return f" on the {n} of {total} queries it neither trained nor chose on"


def decide(
    aggregates: dict[str, float],
    comparisons: dict[str, dict],
    config: EvaluatorConfig,
) -> Decision:
    """Applies the evaluator config's thresholds.

    `aggregates` are the candidate's mean metrics; `comparisons` maps "first_stage" / "baseline"
    to significance.compare_per_query results (candidate = b, reference = a).
    """
    failed, passed = [], []
    main = config.main_metric
    for metric, floor in sorted(config.min_values.items()):
        value = aggregates.get(metric)
        line = f"{metric} = {value:.4f} (floor {floor:.4f})" if value is not None else metric
        if value is None:
            failed.append(f"{metric}: not computed (add it to evaluator.measures)")
        elif value < floor:
            failed.append(f"{line}: below floor")
        else:
            passed.append(line)
    for reference, key in (
        ("first_stage", "min_delta_vs_first_stage"),
        ("baseline", "min_delta_vs_baseline"),
    ):
        threshold = getattr(config, key)
        if threshold is None:
            continue
        if reference not in comparisons:
            passed.append(f"no {reference.replace('_', ' ')} to compare with: {key} not applied")
            continue
        stats = comparisons[reference][main]
        delta = stats["mean_delta"]
        label = reference.replace("_", " ")
        line = f"{main} change vs {label} = {delta:+.4f}{_on_fewer(comparisons, reference)}"
        line += f" (need >= {threshold:+.4f})"
        if delta < threshold:
            failed.append(f"{line}: too small")
        else:
            passed.append(line)
        if config.require_significance:
            p = stats["randomization_p"]
            level = config.significance_level
            sig = f"{main} vs {label}: randomization p = {p:.4f} (need < {level}, gain > 0)"
            (passed if p < level and delta > 0 else failed).append(sig)
    return Decision(blessed=not failed, reasons=failed, checks=passed)
