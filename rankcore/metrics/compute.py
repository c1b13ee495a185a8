"""Per-query measures and trec_eval's "all" line (ir_measures' `iter_calc` / `calc_aggregate`
counterparts, trec_eval v10's numbers).

The metric math is pytrec_eval's, i.e. trec_eval's own C code, called once per evaluation for
every measure it knows; the table's own measures (measures.py -> own.py) fill in the rest.
Added here: trec_eval -M / -c / -J / -l handling and the "all" line (`aggregate`), summed in
trec_eval's order so the floats match it bit for bit.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence

# pytrec_eval's C extension, called directly: the Python wrapper's measure-name regex
# rejects valid trec_eval parameters ("utility.2,-1,0,0", "ndcg.1=3,2=9",
# "iprec_at_recall..25") that the extension itself accepts.
from pytrec_eval_ext import RelevanceEvaluator as _TrecEvalEvaluator

from rankcore.metrics import own
from rankcore.metrics.measures import (
    FAMILIES,
    family_of,
    measure_names,
    measure_string,
    missing_value,
    parse_measures,
    resolve_measures,
)
from rankcore.metrics.ranking import Qrels, QueryEval, Run, ranked_rels, truncate_run

__all__ = ["aggregate", "compute_metrics", "mean_metrics", "relstrings"]

PerQuery = dict[str, dict[str, float]]


def _missing_query_values(
    names: Iterable[str], judged: Mapping[str, int], relevance_level: int
) -> dict[str, float]:
    """Values trec_eval v10 -c gives a qrels query absent from the run (measures.missing_value)."""
    return {name: missing_value(family_of(name), judged, relevance_level) for name in names}


def compute_metrics(
    qrels: Qrels,
    run: Run,
    measures: Sequence[str],
    relevance_level: int = 1,
    judged_docs_only: bool = False,
    *,
    max_docs_per_query: int | None = None,
    complete: bool = False,
) -> PerQuery:
    """Per-query trec_eval measures: {qid: {measure: value}}, qids in trec_eval order.

    Queries are those in both qrels and run (trec_eval's default); `complete=True`
    adds the qrels queries the run lacks with the values trec_eval -c gives them.
    `max_docs_per_query` is trec_eval -M, `judged_docs_only` is -J, `relevance_level`
    is -l. See `resolve_measures` for the accepted names. Per-query gm_map/gm_bpref
    are log(max(AP or bpref, MIN_GEO_MEAN)), the terms trec_eval (and pytrec_eval)
    accumulate, so `aggregate` reproduces trec_eval's geometric mean bit for bit; num_q
    is 1. runid and relstring have no numeric per-query value and are skipped here.
    """
    specs = parse_measures(measures)
    if max_docs_per_query is not None:
        run = truncate_run(run, max_docs_per_query)
    qrels = {qid: judged for qid, judged in qrels.items() if judged}  # pytrec_eval#57

    # One evaluator call computes every measure pytrec_eval knows.
    trec_measures = [
        measure_string(name, params)
        for name, params in specs.items()
        if not FAMILIES[name].own and name != "runid"
    ]
    for name in specs:
        trec_measures.extend(n for n in FAMILIES[name].needs if n not in specs)

    qids = sorted(qid for qid in run if qid in qrels and run[qid])
    trec_results: dict[str, dict[str, float]] = {}
    if trec_measures and qids:
        evaluator = _TrecEvalEvaluator(qrels, set(trec_measures), relevance_level, judged_docs_only)
        trec_results = evaluator.evaluate({qid: run[qid] for qid in qids})

    names = {name: measure_names(FAMILIES[name], params) for name, params in specs.items()}
    per_query: PerQuery = {}
    for qid in qids:
        trec_row = trec_results.get(qid, {})
        query = QueryEval(qrels[qid], run[qid], relevance_level, judged_docs_only, trec_row)
        row: dict[str, float] = {}
        for name, params in specs.items():
            family = FAMILIES[name]
            if family.kind in ("runid", "relstring"):
                continue
            if family.compute is not None:
                args = params if params is not None else family.default
                row.update(family.compute(query, args, names[name]))
            elif family.kind == "param":
                row[names[name][0]] = trec_row[name]  # pytrec_eval's key drops the params
            else:
                for output_name in names[name]:
                    row[output_name] = trec_row[output_name]
        per_query[qid] = row

    if complete:
        missing_names = [
            m.name for m in resolve_measures(measures) if m.family not in ("runid", "relstring")
        ]
        for qid, judged in qrels.items():
            if qid not in per_query:
                per_query[qid] = _missing_query_values(missing_names, judged, relevance_level)
        per_query = {qid: per_query[qid] for qid in sorted(per_query)}
    return per_query


def relstrings(
    qrels: Qrels,
    run: Run,
    length: int = 10,
    judged_docs_only: bool = False,
    *,
    max_docs_per_query: int | None = None,
    complete: bool = False,
) -> dict[str, str]:
    """trec_eval's per-query `relstring`: relevance of the top `length` docs as text.

    Digits are judgments, '>' above 9, '-' not in the qrels, '.' judged negative.
    """
    if max_docs_per_query is not None:
        run = truncate_run(run, max_docs_per_query)
    out = {}
    for qid in sorted(qrels):
        if qrels[qid] and run.get(qid):
            rels = ranked_rels(qrels[qid], run[qid], judged_docs_only)
            out[qid] = own.relstring(rels, length)
        elif complete and qrels[qid]:
            out[qid] = ""
    return out


def aggregate(
    per_query: Mapping[str, Mapping[str, float]],
    *,
    qrels: Qrels | None = None,
    complete: bool = False,
    relevance_level: int = 1,
    runid: str | None = None,
) -> dict[str, float | str]:
    """trec_eval's "all" values from per-query values.

    Means over queries, except: num_q counts queries; num_ret, num_rel, num_rel_ret,
    num_nonrel_judged_ret are sums; gm_map and gm_bpref are geometric means (exp of the
    mean of their per-query logs, see compute_metrics). `complete=True` (trec_eval -c;
    needs `qrels`) averages over every qrels query, a query missing from `per_query`
    counting 0 (see compute_metrics), and reports num_rel as trec_eval does then: the
    number of judgments > 0 in the whole qrels, whatever the relevance level. `runid`, when
    given, is returned under "runid". Queries are summed in sorted-qid order, as
    trec_eval does, so the floats match it bit for bit.
    """
    rows = dict(per_query)
    if complete:
        if qrels is None:
            raise ValueError("complete=True needs the qrels")
        names = list(next(iter(rows.values()), {}))
        if not names:  # compute_metrics(complete=True) always gives rows to name them
            raise ValueError("complete=True needs at least one per-query row")
        for qid, judged in qrels.items():
            if judged and qid not in rows:
                rows[qid] = _missing_query_values(names, judged, relevance_level)
    if not rows:
        raise ValueError("no queries to aggregate")
    ordered = [rows[qid] for qid in sorted(rows)]
    n = len(ordered)
    out: dict[str, float | str] = {}
    if runid is not None:
        out["runid"] = runid
    for name in ordered[0]:
        family = family_of(name)
        kind = family.kind if family else "mean"
        values = [row[name] for row in ordered]
        if kind == "num_q":
            out[name] = float(n)
        elif complete and family is not None and family.complete_all is not None:
            out[name] = family.complete_all(qrels)
        elif kind == "long":
            out[name] = float(sum(values))
        elif kind == "gm":
            out[name] = math.exp(_ordered_sum(values) / n)
        else:
            out[name] = _ordered_sum(values) / n
    return out


def _ordered_sum(values: Iterable[float]) -> float:
    # Plain left-to-right addition, as trec_eval accumulates; Python >= 3.12's sum() of
    # floats is compensated and could round a 4th decimal differently.
    total = 0.0
    for v in values:
        total += v
    return total


def mean_metrics(
    per_query: Mapping[str, Mapping[str, float]], measures: Sequence[str]
) -> dict[str, float]:
    """The "all" values of `measures` (names, families or nicknames, as for
    compute_metrics) from compute_metrics output, without runid/relstring."""
    summary = aggregate(per_query)
    return {
        m.name: float(summary[m.name])
        for m in resolve_measures(measures)
        if m.family not in ("runid", "relstring")
    }
