"""The measure table: trec_eval v10's measures (measures.c) in print order, restricted to what
pytrec_eval can compute plus the measures computed here (own.py), and the parsing of measure
names into families and parameters as trec_eval's meas_init.c reads them.

One `Family` entry per measure family says everything about it: how its names and parameters
read (`kind`, `default`, `pairs`, `arity`), who computes it (`compute`: None for pytrec_eval,
else a function of own.py, with `needs` naming pytrec_eval measures it derives from), and how
its "all" value and trec_eval -c's value for a missing query come about (from `kind`, unless
`missing` / `complete_all` say otherwise). Laid out as ir_measures' measures/ table is, one
entry per measure, rather than trec_eval's parallel C arrays.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from rankcore.metrics import own
from rankcore.metrics.ranking import Qrels, num_rel

__all__ = [
    "FAMILIES",
    "MIN_GEO_MEAN",
    "Family",
    "MeasureInfo",
    "family_of",
    "measure_names",
    "measure_string",
    "normalize_measures",
    "parse_measures",
    "resolve_measures",
]

MIN_GEO_MEAN = 1e-5  # trec_eval's floor for gm_map / gm_bpref (common.h)

Params = tuple | str | None


def _num_rel_missing(judged: Mapping[str, int], relevance_level: int) -> float:
    return float(num_rel(judged, relevance_level))


def _num_rel_complete(qrels: Qrels) -> float:
    # trec_eval -c reports the judgments > 0 of the whole qrels, whatever the relevance level.
    return float(sum(1 for j in qrels.values() for r in j.values() if r > 0))


@dataclass(frozen=True)
class Family:
    """One measure family of the table, e.g. P (P_5, P_10, ...) or map."""

    name: str
    # runid | num_q (counted) | long (summed count) | mean | gm (geometric mean) | cut (integer
    # cutoffs) | cut_real (real cutoffs) | param (a parameter string) | relstring (text)
    kind: str
    default: tuple = ()  # default cutoffs (cut, cut_real) or parameters (param)
    # Computed here: own.py's function (query, params or default, output names) -> values.
    # None: pytrec_eval computes it.
    compute: Callable | None = None
    pairs: bool = False  # param family taking name=value pairs
    arity: int | None = None  # param family: the number of parameters it takes
    needs: tuple[str, ...] = ()  # pytrec_eval measures `compute` reads from the query's row
    # trec_eval -c's value for a qrels query the run lacks, when not the kind's (0, num_q 1,
    # gm log(MIN_GEO_MEAN)): (judgments, relevance level) -> value.
    missing: Callable[[Mapping[str, int], int], float] | None = None
    # The "all" value under trec_eval -c, when not the kind's mean or sum: qrels -> value.
    complete_all: Callable[[Qrels], float] | None = None

    @property
    def own(self) -> bool:
        """Computed here (or text only), not asked of pytrec_eval."""
        return self.compute is not None or self.kind == "relstring"


_STD_CUTOFFS = (5, 10, 15, 20, 30, 100, 200, 500, 1000)
_RECALL_PCTS = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)
_FAMILY_LIST = (
    Family("runid", "runid"),
    Family("num_q", "num_q"),
    Family("num_ret", "long"),
    Family("num_rel", "long", missing=_num_rel_missing, complete_all=_num_rel_complete),
    Family("num_rel_ret", "long"),
    Family("map", "mean"),
    Family("gm_map", "gm"),
    Family("Rprec", "mean"),
    Family("bpref", "mean"),
    Family("recip_rank", "mean"),
    Family("mrr_cut", "cut", (10,), compute=own.mrr_cut_measure, needs=("recip_rank",)),
    Family("iprec_at_recall", "cut_real", _RECALL_PCTS, compute=own.iprec_at_recall_measure),
    Family("P", "cut", _STD_CUTOFFS),
    Family("relstring", "relstring", (10.0,), arity=1),
    Family("recall", "cut", _STD_CUTOFFS),
    Family("infAP", "mean"),
    Family("gm_bpref", "gm"),
    Family("Rprec_mult", "cut_real", (0.2, 0.4, 0.6, 0.8, 1.0, 1.2, 1.4, 1.6, 1.8, 2.0)),
    Family("utility", "param", (1.0, -1.0, 0.0, 0.0), arity=4),
    Family("11pt_avg", "param", _RECALL_PCTS, compute=own.eleven_pt_avg_measure),
    Family("binG", "mean"),
    Family("G", "param", pairs=True),
    Family("ndcg", "param", pairs=True),
    Family("ndcg_rel", "param", pairs=True),
    Family("Rndcg", "param", pairs=True),
    Family("ndcg_cut", "cut", _STD_CUTOFFS),
    Family("map_cut", "cut", _STD_CUTOFFS),
    Family("relative_P", "cut", _STD_CUTOFFS),
    Family("success", "cut", (1, 5, 10)),
    Family("set_P", "mean"),
    Family("set_relative_P", "mean"),
    Family("set_recall", "mean"),
    Family("set_map", "mean"),
    Family("set_F", "param", (1.0,), arity=1),
    Family("num_nonrel_judged_ret", "long"),
    Family("rbp", "param", pairs=True, compute=own.rbp_measure),
    Family("rbp_resid", "param", pairs=True, compute=own.rbp_resid_measure),
    Family("unj", "cut", (5, 10, 20), compute=own.unj_measure),
)
FAMILIES = {f.name: f for f in _FAMILY_LIST}
_ORDER = {f.name: i for i, f in enumerate(_FAMILY_LIST)}
# Longest first, so that "ndcg_cut_10" is ndcg_cut, not ndcg with parameter "cut_10".
_BY_LENGTH = sorted(FAMILIES, key=len, reverse=True)

# trec_eval v10 nicknames (measures.c); "all_trec" is what out.test.a prints.
_NICKNAMES = {
    "official": (
        "runid", "num_q", "num_ret", "num_rel", "num_rel_ret", "map", "gm_map",
        "Rprec", "bpref", "recip_rank", "iprec_at_recall", "P",
    ),
    "all_trec": (
        "runid", "num_q", "num_ret", "num_rel", "num_rel_ret", "map", "gm_map",
        "Rprec", "bpref", "recip_rank", "iprec_at_recall", "P", "relstring",
        "recall", "unj", "rbp", "rbp_resid", "infAP", "gm_bpref",
        "utility", "11pt_avg", "ndcg", "relative_P", "Rprec_mult", "success",
        "map_cut", "ndcg_cut", "ndcg_rel", "Rndcg", "binG", "G",
        "set_P", "set_recall", "set_relative_P", "set_map", "set_F",
        "num_nonrel_judged_ret",
    ),
    "set": (
        "runid", "num_q", "num_ret", "num_rel", "num_rel_ret", "utility", "set_P",
        "set_recall", "set_relative_P", "set_map", "set_F",
    ),
}  # fmt: skip

_PAIRS_RE = re.compile(r"[^=,]+=[^=,]+(,[^=,]+=[^=,]+)*")
_ATOL_RE = re.compile(r"\s*([+-]?\d+)")


def missing_value(family: Family | None, judged: Mapping[str, int], relevance_level: int) -> float:
    """trec_eval v10 -c's value of `family` for a qrels query absent from the run.

    v10 evaluates a one-document bogus ranking and then zeroes num_ret, utility, unj
    and rbp_resid: every measure ends up 0 except num_rel (and num_q = 1), and gm_*
    take log(MIN_GEO_MEAN), trec_eval's floor.
    """
    if family is None:
        return 0.0
    if family.missing is not None:
        return family.missing(judged, relevance_level)
    return {"num_q": 1.0, "gm": math.log(MIN_GEO_MEAN)}.get(family.kind, 0.0)


def _atol(text: str) -> int:
    # trec_eval reads cutoffs with atol(): leading integer, "23.4" -> 23, junk -> 0.
    m = _ATOL_RE.match(text)
    return int(m.group(1)) if m else 0


def _parse_params(family: Family, text: str, strict_ints: bool) -> tuple | str:
    """Validate a parameter string the way trec_eval's meas_init.c reads it."""
    items = text.split(",")
    if family.kind == "cut":
        if strict_ints and not all(re.fullmatch(r"\d+", i) for i in items):
            raise ValueError(f"cutoffs of {family.name} must be integers, got {text!r}")
        cutoffs = sorted(_atol(i) for i in items)
        if cutoffs[0] <= 0:
            raise ValueError(f"cutoffs of {family.name} must be positive, got {text!r}")
        if len(set(cutoffs)) != len(cutoffs):
            raise ValueError(f"duplicate cutoffs in {family.name}.{text}")
        return tuple(cutoffs)
    if family.pairs:
        try:
            if not _PAIRS_RE.fullmatch(text):
                raise ValueError
            for item in items:
                float(item.split("=")[1])
        except ValueError:
            raise ValueError(f"{family.name} takes name=number pairs, got {text!r}") from None
        return text
    try:
        values = [float(i) for i in items]
    except ValueError:
        raise ValueError(f"bad parameter for {family.name}: {text!r}") from None
    if family.kind == "cut_real":
        values.sort()
        if len({f"{v:3.2f}" for v in values}) != len(values):
            raise ValueError(f"duplicate cutoffs in {family.name}.{text}")
        return tuple(values)
    if family.arity is not None and len(values) != family.arity:
        what = "one parameter" if family.arity == 1 else f"{family.arity} coefficients"
        raise ValueError(f"{family.name} takes {what}, got {text!r}")
    return text


def _split_measure(measure: str) -> tuple[Family, Params]:
    """'P' -> (P, None); 'P.5,10' / 'P_5' -> (P, (5, 10)) / (P, (5,))."""
    if measure in FAMILIES:
        return FAMILIES[measure], None
    head, dot, tail = measure.partition(".")
    if dot and head in FAMILIES:  # trec_eval's -m form: everything after the 1st '.'
        if not tail:
            raise ValueError(f"empty parameters in measure {measure!r}")
        return FAMILIES[head], _parse_params(FAMILIES[head], tail, strict_ints=False)
    for name in _BY_LENGTH:  # pytrec_eval's output-name form: P_5, ndcg_cut_10
        if measure.startswith(name + "_") and len(measure) > len(name) + 1:
            family = FAMILIES[name]
            if family.kind in ("long", "mean", "gm", "num_q", "runid"):
                continue
            return family, _parse_params(family, measure[len(name) + 1 :], strict_ints=True)
    raise ValueError(f"unsupported measure {measure!r}")


def parse_measures(measures: Iterable[str], first_params_win: bool = False) -> dict[str, Params]:
    """Family -> parameters (None = trec_eval's defaults), in trec_eval print order.

    By default, mentions of a family merge their cutoffs (P_5 + P_10 -> P_5, P_10; a bare
    "P", also via a nickname, adds the default cutoffs). With `first_params_win`, the
    first parameterized mention alone decides, as with trec_eval's -m.
    """
    if isinstance(measures, str):
        raise TypeError("measures must be a list of measure names, not a str")
    marked: dict[str, Params] = {}
    explicit: set[str] = set()
    for measure in measures:
        if measure in _NICKNAMES:
            for name in _NICKNAMES[measure]:
                marked.setdefault(name, None)
                if not first_params_win:
                    explicit.add(name)
            continue
        family, params = _split_measure(measure)
        name = family.name
        marked.setdefault(name, None)
        if params is None:
            if not first_params_win:
                explicit.add(name)  # bare "P" asks for the default cutoffs too
            continue
        old = marked[name]
        if old is None:
            marked[name] = params
        elif first_params_win:
            continue
        elif isinstance(params, tuple):
            marked[name] = tuple(sorted(set(old) | set(params)))
        elif params != old:
            raise ValueError(f"conflicting parameters for {name}: {old!r} and {params!r}")
    for name in explicit:
        params = marked[name]
        if isinstance(params, tuple):
            marked[name] = tuple(sorted(set(params) | set(FAMILIES[name].default)))
    return {name: marked[name] for name in sorted(marked, key=_ORDER.__getitem__)}


@dataclass(frozen=True)
class MeasureInfo:
    """One output measure as trec_eval names and prints it."""

    name: str  # e.g. "P_5", "iprec_at_recall_0.10", "ndcg_cut_10", "mrr_cut_10"
    family: str  # e.g. "P"
    integer: bool  # printed as an integer (counts)
    per_query: bool  # printed for each query with -q
    summary: bool  # printed on the "all" lines


def measure_names(family: Family, params: Params) -> list[str]:
    """The output names of `family` with `params` (None: its defaults), as trec_eval prints."""
    if family.kind == "cut":
        return [f"{family.name}_{c}" for c in (params or family.default)]
    if family.kind == "cut_real":
        return [f"{family.name}_{c:3.2f}" for c in (params or family.default)]
    if family.kind in ("param", "relstring") and params is not None:
        return [f"{family.name}_{params}"]
    return [family.name]


def resolve_measures(
    measures: Iterable[str], *, first_params_win: bool = False
) -> list[MeasureInfo]:
    """Expand measure names, families and nicknames into trec_eval's output measures.

    Accepts "map", "P" (trec_eval's default cutoffs), "P.5,10" (trec_eval -m form),
    "P_5" / "ndcg_cut_15" (output-name form), "mrr_cut_10", and the nicknames
    "official", "all_trec" and "set". Raises ValueError for anything else.
    """
    out = []
    for name, params in parse_measures(measures, first_params_win).items():
        family = FAMILIES[name]
        per_query = family.kind not in ("runid", "num_q", "gm")
        summary = family.kind != "relstring"
        integer = family.kind in ("long", "num_q")
        for output_name in measure_names(family, params):
            out.append(MeasureInfo(output_name, name, integer, per_query, summary))
    return out


def normalize_measures(measures: Iterable[str], *, first_params_win: bool = False) -> list[str]:
    """Canonical 'family[.params]' strings, one per family, in trec_eval order."""
    specs = parse_measures(measures, first_params_win)
    return [measure_string(name, params) for name, params in specs.items()]


def measure_string(name: str, params: Params) -> str:
    """'family[.params]', the form pytrec_eval's evaluator is asked in."""
    if params is None:
        return name
    if isinstance(params, str):
        return f"{name}.{params}"
    return f"{name}.{','.join(repr(p) for p in params)}"


def family_of(name: str) -> Family | None:
    """The family of an output name ("P_5" -> P), or None for a name that is no measure."""
    try:
        return _split_measure(name)[0]
    except ValueError:
        return None
