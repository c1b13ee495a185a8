"""Measure names as people type them: trec_eval's (`ndcg_cut.10`, `ndcg_cut_10`, `map`) or
ir_measures' (`nDCG@10`, `P@5`, `RR`, `AP`, `R@100`), mapped to trec_eval's, and a
"did you mean" hint for a name that is neither.

ir_measures (https://ir-measur.es) parses its own names (`ir_measures.parse_measure`) and
knows which trec_eval measure each one is: `ir_measures.parse_trec_measure` maps every trec_eval
name its pytrec_eval provider computes to its measure objects. This module inverts that map over
the families of our measure table, so which ir_measures measure is which trec_eval measure is
ir_measures' knowledge, not a table kept here. The values themselves stay rankpipe's
(trec_eval v10's, compute.py): a measure asked as `nDCG@10` is trec_eval's `ndcg_cut_10`,
printed under that name, the same number the evaluator reports.

Two entries ir_measures' trec map cannot give: `RR@k` (its pytrec_eval provider has no
cut-off for RR) is rankpipe's `mrr_cut.k`, MRR@k as MS MARCO defines it; and a measure's own
`rel=` or `judged_only=` must agree with the evaluation's one relevance level (trec_eval -l)
and -J, since a trec_eval evaluation has one of each.
"""

from __future__ import annotations

import difflib
from functools import lru_cache
from typing import Any

from rankcore.metrics.measures import _NICKNAMES, FAMILIES, measure_names, parse_measures

__all__ = ["supported_names", "to_trec_eval", "unsupported_message"]

# (ir_measures NAME, explicit parameter names) -> (trec_eval family, the parameter it takes)
_Key = tuple[str, frozenset[str]]
# Not in ir_measures' trec map: RR@k is mrr_cut.k here (measures.py, "mrr_cut").
_EXTRA: dict[_Key, tuple[str, str | None]] = {("RR", frozenset({"cutoff"})): ("mrr_cut", "cutoff")}
# Shown in messages; the ir_measures names of docs/metrics.md.
EXAMPLES = ("nDCG@10", "P@5", "RR", "RR@10", "AP", "R@100")


class UnsupportedMeasure(ValueError):
    """A measure name that is neither trec_eval's nor an ir_measures name mapped here."""


def _explicit(measure: Any) -> dict[str, Any]:
    """The parameters given explicitly and different from ir_measures' default (so
    `nDCG(dcg='log2')@10` is `nDCG@10`)."""
    supported = measure.SUPPORTED_PARAMS
    return {
        k: v
        for k, v in measure.params.items()
        if k not in supported or v != getattr(supported[k], "default", object())
    }


@lru_cache(maxsize=1)
def _trec_map() -> dict[_Key, tuple[str, str | None]]:
    """ir_measures' trec_eval map, inverted: for every family of ours that
    `ir_measures.parse_trec_measure` knows, the shape of the measures it returns."""
    import ir_measures

    table = dict(_EXTRA)
    for family in FAMILIES:
        try:
            measures = ir_measures.parse_trec_measure(family)
        except ValueError:  # a trec_eval measure ir_measures does not map (gm_map, rbp, ...)
            continue
        for measure in measures:
            params = _explicit(measure)
            varying = [k for k in params if len({repr(m.params.get(k)) for m in measures}) > 1]
            key = (measure.NAME, frozenset(params))
            table.setdefault(key, (family, varying[0] if varying else None))
    return table


def _parse_ir_measures(name: str) -> Any | None:
    import ir_measures

    try:
        return ir_measures.parse_measure(name)
    except (NameError, ValueError, TypeError, SyntaxError):
        return None


def to_trec_eval(name: str, relevance_level: int = 1, judged_docs_only: bool = False) -> str:
    """`name` in a form our measure table reads (measures.py): a trec_eval name as given, an
    ir_measures name as its trec_eval family with the parameter it carries (`nDCG@10` ->
    `ndcg_cut.10`, `AP` -> `map`, `RR@10` -> `mrr_cut.10`). Raises UnsupportedMeasure (with
    `unsupported_message`'s hint) for anything else, and ValueError when the name's own
    relevance level or judged_only differs from the evaluation's."""
    try:
        parse_measures([name])
        return name
    except ValueError:
        pass
    measure = _parse_ir_measures(name)
    if measure is None:
        raise UnsupportedMeasure(unsupported_message(name))
    params = _explicit(measure)
    # A relevance level / -J of its own: fine when it is the evaluation's.
    rel = params.get("rel")
    if rel is not None and rel != relevance_level:
        raise ValueError(
            f"measure {name!r}: rel={rel} differs from the relevance level of this evaluation "
            f"({relevance_level}); give -l {rel} (one level per evaluation, as in trec_eval)"
        )
    if params.get("judged_only") and not judged_docs_only:
        raise ValueError(f"measure {name!r}: judged_only=True needs -J (judged docs only)")
    table = _trec_map()
    key = (measure.NAME, frozenset(params))
    if key not in table:  # rel is part of some measures (NumRet(rel=1) is num_rel_ret) only
        params = {k: v for k, v in params.items() if k not in ("rel", "judged_only")}
        key = (measure.NAME, frozenset(params))
    if key not in table:
        raise UnsupportedMeasure(
            f"measure {name!r} has no trec_eval counterpart here; {_supported()}"
        )
    family, param = table[key]
    if param is None:
        return family
    return f"{family}.{params[param]}"


@lru_cache(maxsize=1)
def supported_names() -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(trec_eval families and nicknames, ir_measures measure names) this module accepts."""
    ir_names = sorted({name for name, _ in _trec_map()}, key=str.lower)
    return (*FAMILIES, *_NICKNAMES), tuple(ir_names)


def _candidates() -> dict[str, str]:
    """Lower-cased spelling -> spelling, of the names a hint may suggest: the families and
    nicknames, their output names at the default parameters (P_10, ndcg_cut_10) and the
    ir_measures names, with the cut-offs trec_eval uses by default (nDCG@10)."""
    trec, ir = supported_names()
    names = list(trec)
    for family in FAMILIES.values():
        if family.kind in ("cut", "cut_real"):
            names += measure_names(family, None)
    cutoffs = ("5", "10", "20", "100", "1000")
    for key, (_, param) in _trec_map().items():
        if param == "cutoff":
            names += [f"{key[0]}@{c}" for c in cutoffs]
        elif param is None and not key[1]:
            names.append(key[0])
    return {n.lower(): n for n in reversed(names)}


def unsupported_message(name: str) -> str:
    """ "unsupported measure 'X'; did you mean ...? supported: ..." (difflib's closest names,
    compared without case, then what is supported)."""
    candidates = _candidates()
    lowered = name.lower()
    if lowered in candidates:  # only the case differs: that name alone
        close = [lowered]
    else:
        close = difflib.get_close_matches(lowered, list(candidates), n=3, cutoff=0.6)
    hint = f"did you mean {' or '.join(candidates[c] for c in close)}? " if close else ""
    return f"unsupported measure {name!r}; {hint}{_supported()}"


def _supported() -> str:
    trec, ir = supported_names()
    return (
        f"supported: trec_eval names ({', '.join(trec)}; with parameters as P.5,10 or P_5) "
        f"and ir_measures names ({', '.join(ir)}; e.g. {', '.join(EXAMPLES)})"
    )
