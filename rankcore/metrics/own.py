"""The measures computed here rather than by pytrec_eval: trec_eval v10 measures that the
trec_eval inside pytrec_eval-terrier 0.5.11 lacks or computes differently (iprec_at_recall,
11pt_avg, relstring, rbp, rbp_resid, unj; trec_eval v10's m_*.c files, cited per function), and
mrr_cut, which is not trec_eval's at all (MRR@k as MS MARCO reports it).

Each `*_measure` function is the `compute` of one entry of the table in measures.py:
(query, parameters or the family's defaults, output names) -> {output name: value}.
docs/metrics.md lists every difference from trec_eval v10.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence

from rankcore.metrics.ranking import NONPOOL, UNJUDGED, QueryEval

Params = tuple | str


def _lround(x: float) -> int:
    # C lround (half away from zero); floor(x + 0.5) misrounds 0.49999999999999994.
    f = math.floor(x)
    return f + 1 if x - f >= 0.5 else f


def _interpolated_precisions(
    rels: Sequence[int], relevance_level: int, num_rel: int, percents: Sequence[float]
) -> list[float]:
    """trec_eval v10 m_iprec_at_recall.c / m_11pt_avg.c, values aligned with percents.

    Own code because pytrec_eval's trec_eval turns a recall fraction into a number of
    relevant docs as (long)(pct * num_rel + 0.9); v10 uses lround(pct * num_rel).
    """
    num_ret = len(rels)
    num_rel_ret = sum(1 for r in rels if r >= 0 and r >= relevance_level)
    cutoffs = [_lround(p * num_rel) for p in percents]
    values = [0.0] * len(cutoffs)
    cut = len(cutoffs) - 1
    while cut >= 0 and cutoffs[cut] > num_rel_ret:
        cut -= 1
    # trec_eval divides 0/0 (NaN) when nothing is retrieved (possible with -J).
    int_precis = num_rel_ret / num_ret if num_ret else 0.0
    rel_so_far = num_rel_ret
    i = num_ret
    while i > 0 and rel_so_far > 0:  # backwards: interpolation is a max over ranks >= i
        precis = rel_so_far / i
        if int_precis < precis:
            int_precis = precis
        if rels[i - 1] >= relevance_level:
            while cut >= 0 and rel_so_far == cutoffs[cut]:
                values[cut] = int_precis
                cut -= 1
            rel_so_far -= 1
        i -= 1
    while cut >= 0:
        values[cut] = int_precis
        cut -= 1
    return values


def _pair_params(text: Params | None) -> dict[str, float]:
    if not text:
        return {}
    return {k: float(v) for k, v in (item.split("=") for item in text.split(","))}


def _rbp(rels: Sequence[int], judged: Mapping[str, int], params: Params | None) -> float:
    """trec_eval v10 m_rbp.c: rank-biased precision, p=0.9, gains scaled into [0, 1]."""
    pairs = _pair_params(params)
    p = pairs.get("p", 0.9)
    # setup_gains(): gain = relevance level unless overridden by an integer-named pair.
    gains = {int(k): v for k, v in pairs.items() if re.fullmatch(r"[+-]?\d+", k)}
    present = [r for r in judged.values() if r >= 0]
    for level in range(max(present) + 1 if present else 0):
        gains.setdefault(level, float(level))
    if gains:
        # m_rbp.c leaves min/max uninitialised; the evident intent is used here.
        lo, hi = min(gains.values()), max(gains.values())
        if lo < 0 or hi > 1:
            gains = {k: (g - lo) / (hi - lo) for k, g in gains.items()}
    total = 0.0
    cur_p = 1.0
    for rel in rels:
        gain = gains.get(rel, 0.0)
        if gain != 0:
            total += gain * cur_p
        cur_p *= p
    return (1.0 - p) * total


def _rbp_resid(rels: Sequence[int], params: Params | None) -> float:
    """trec_eval v10 m_rbp_resid.c: RBP weight of unjudged docs plus the unseen tail."""
    p = _pair_params(params).get("p", 0.9)
    unjudged = 0
    total = 0.0
    cur_p = 1.0
    for rel in rels:
        if rel < 0:
            unjudged += 1
            total += cur_p
        cur_p *= p
    return cur_p + (1 - p) * total if unjudged else 0.0


def _unj(rels: Sequence[int], cutoff: int) -> float:
    """trec_eval v10 m_unjudged.c: unjudged fraction of the top `cutoff` ranks."""
    return sum(1 for r in rels[:cutoff] if r < 0) / cutoff


def relstring(rels: Sequence[int], length: int) -> str:
    """trec_eval v10 m_relstring.c: the relevance of the top `length` docs as text."""
    chars = []
    for rel in rels[: max(length, 0)]:
        if rel > 9:
            chars.append(">")
        elif rel >= 0:
            chars.append(str(rel))
        elif rel == NONPOOL:
            chars.append("-")
        elif rel == UNJUDGED:
            chars.append(".")
        else:
            chars.append("<")
    return "".join(chars)


# ------------------------------------------------ the table's `compute` functions


def mrr_cut_measure(q: QueryEval, params: Params, names: list[str]) -> dict[str, float]:
    """MRR@k (not trec_eval). pytrec_eval has no rank cut-off for recip_rank. RR@k is RR when
    the first relevant doc is within the top k, else 0; deriving it from trec_eval's own
    recip_rank reuses trec_eval's ranking (score desc, docno desc), -J and -M exactly, at no
    extra sorting cost."""
    rr = q.trec_row["recip_rank"]
    first_rel_rank = round(1.0 / rr) if rr > 0 else 0
    return {
        name: rr if 0 < first_rel_rank <= k else 0.0 for k, name in zip(params, names, strict=True)
    }


def iprec_at_recall_measure(q: QueryEval, params: Params, names: list[str]) -> dict[str, float]:
    values = _interpolated_precisions(q.rels, q.relevance_level, q.num_rel, params)
    return dict(zip(names, values, strict=True))


def eleven_pt_avg_measure(q: QueryEval, params: Params, names: list[str]) -> dict[str, float]:
    pcts = [float(p) for p in params.split(",")] if isinstance(params, str) else params
    values = _interpolated_precisions(q.rels, q.relevance_level, q.num_rel, pcts)
    # m_11pt_avg.c sums from the last cut-off down; keep its float order.
    return {names[0]: sum(reversed(values)) / len(pcts)}


def rbp_measure(q: QueryEval, params: Params, names: list[str]) -> dict[str, float]:
    return {names[0]: _rbp(q.rels, q.judged, params)}


def rbp_resid_measure(q: QueryEval, params: Params, names: list[str]) -> dict[str, float]:
    return {names[0]: _rbp_resid(q.rels, params)}


def unj_measure(q: QueryEval, params: Params, names: list[str]) -> dict[str, float]:
    return {name: _unj(q.rels, k) for k, name in zip(params, names, strict=True)}
