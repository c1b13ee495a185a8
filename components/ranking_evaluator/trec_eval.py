"""TREC run/qrels readers and trec_eval (v10.0) compatible metrics.

The metric math is pytrec_eval's, i.e. trec_eval's own C code. This module adds what
pytrec_eval does not do: strict readers with file:line errors, the trec_eval v10
measures its bundled (older) trec_eval lacks or computes differently, `-M`/`-c`
handling, and the "all" line (see `aggregate`). docs/metrics.md lists every
difference from trec_eval v10.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from os import PathLike

# pytrec_eval's C extension, called directly: the Python wrapper's measure-name regex
# rejects valid trec_eval parameters ("utility.2,-1,0,0", "ndcg.1=3,2=9",
# "iprec_at_recall..25") that the extension itself accepts.
from pytrec_eval_ext import RelevanceEvaluator as _TrecEvalEvaluator

__all__ = [
    "MIN_GEO_MEAN",
    "MalformedLineError",
    "MeasureInfo",
    "aggregate",
    "compute_metrics",
    "mean_metrics",
    "normalize_measures",
    "rank_documents",
    "read_qrels",
    "read_run",
    "read_run_with_runid",
    "read_runid",
    "relstrings",
    "resolve_measures",
    "truncate_run",
]

Qrels = Mapping[str, Mapping[str, int]]
Run = Mapping[str, Mapping[str, float]]
PerQuery = dict[str, dict[str, float]]

MIN_GEO_MEAN = 1e-5  # trec_eval's floor for gm_map / gm_bpref (common.h)
_NONPOOL = -1  # retrieved doc absent from the qrels (trec_eval RELVALUE_NONPOOL)
_UNJUDGED = -2  # doc in the qrels with a negative judgment (RELVALUE_UNJUDGED)


class MalformedLineError(ValueError):
    """A line of a qrels or run file that trec_eval would reject (or misread)."""

    def __init__(self, path: str | PathLike[str], line_no: int, problem: str) -> None:
        super().__init__(f"{path}:{line_no}: {problem}")
        self.path = str(path)
        self.line_no = line_no
        self.problem = problem


# --------------------------------------------------------------------------- readers


def _decode(raw: bytes, path: str | PathLike[str], line_no: int) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise MalformedLineError(path, line_no, f"not valid UTF-8 ({exc.reason})") from None


def read_qrels(path: str | PathLike[str]) -> dict[str, dict[str, int]]:
    """Read `qid iter docno rel` lines (trec_eval's qrels format).

    As in trec_eval: fields are split on ASCII whitespace (bytes.split matches C
    isspace, str.split would also split on e.g. U+00A0), exactly 4 fields, lines
    starting with '#' are comments. Stricter than trec_eval, which atol()s garbage to
    0: a non-integer relevance or a repeated (qid, docno) raises MalformedLineError.
    Blank lines are skipped (trec_eval rejects them in qrels, accepts them in runs).
    """
    qrels: dict[str, dict[str, int]] = {}
    first_seen: dict[tuple[str, str], int] = {}
    with open(path, "rb") as f:
        for line_no, raw in enumerate(f, start=1):
            if raw.startswith(b"#"):
                continue
            fields = raw.split()
            if not fields:
                continue
            if len(fields) != 4:
                raise MalformedLineError(
                    path, line_no, f"expected 4 fields 'qid iter docno rel', got {len(fields)}"
                )
            qid = _decode(fields[0], path, line_no)
            docno = _decode(fields[2], path, line_no)
            try:
                rel = int(fields[3])
            except ValueError:
                problem = f"relevance {_decode(fields[3], path, line_no)!r} is not an integer"
                raise MalformedLineError(path, line_no, problem) from None
            judged = qrels.setdefault(qid, {})
            if docno in judged:
                first = first_seen[(qid, docno)]
                problem = (
                    f"duplicate judgment of {docno!r} for query {qid!r} (first at line {first})"
                )
                raise MalformedLineError(path, line_no, problem)
            judged[docno] = rel
            first_seen[(qid, docno)] = line_no
    return qrels


def read_run_with_runid(
    path: str | PathLike[str],
) -> tuple[dict[str, dict[str, float]], str | None]:
    """Read `qid iter docno rank score runid [ignored...]` lines; return (run, runid).

    As in trec_eval: the rank column is ignored (ranks come from the scores, see
    `rank_documents`), columns after runid are ignored (results.trunc has them), blank
    lines and lines whose first non-blank character is '#' are skipped, and the runid
    is the one on the last line. Stricter than trec_eval (which atof()s garbage to 0):
    a non-numeric or NaN score raises MalformedLineError, and so does a document
    retrieved twice for one query (trec_eval aborts on that too, without a line).
    """
    run: dict[str, dict[str, float]] = {}
    first_seen: dict[tuple[str, str], int] = {}
    qid_cache: dict[bytes, str] = {}
    runid_raw: bytes | None = None
    with open(path, "rb") as f:
        for line_no, raw in enumerate(f, start=1):
            fields = raw.split()
            if not fields or fields[0].startswith(b"#"):
                continue
            if len(fields) < 6:
                raise MalformedLineError(
                    path,
                    line_no,
                    f"expected 6 fields 'qid iter docno rank score runid', got {len(fields)}",
                )
            qid = qid_cache.get(fields[0])
            if qid is None:
                qid = qid_cache[fields[0]] = _decode(fields[0], path, line_no)
            docno = _decode(fields[2], path, line_no)
            try:
                score = float(fields[4])
            except ValueError:
                problem = f"score {_decode(fields[4], path, line_no)!r} is not a number"
                raise MalformedLineError(path, line_no, problem) from None
            if math.isnan(score):
                raise MalformedLineError(path, line_no, "score is NaN")
            docs = run.get(qid)
            if docs is None:
                docs = run[qid] = {}
            if docno in docs:
                first = first_seen[(qid, docno)]
                problem = (
                    f"document {docno!r} retrieved twice for query {qid!r} (first at line {first})"
                )
                raise MalformedLineError(path, line_no, problem)
            docs[docno] = score
            first_seen[(qid, docno)] = line_no
            runid_raw = fields[5]
    runid = None if runid_raw is None else runid_raw.decode("utf-8", errors="replace")
    return run, runid


def read_run(path: str | PathLike[str]) -> dict[str, dict[str, float]]:
    """Read a TREC run file (see `read_run_with_runid`)."""
    return read_run_with_runid(path)[0]


def read_runid(path: str | PathLike[str]) -> str | None:
    """The run's runid as trec_eval reports it: the runid column of the last line."""
    runid_raw: bytes | None = None
    with open(path, "rb") as f:
        for raw in f:
            fields = raw.split()
            if len(fields) >= 6 and not fields[0].startswith(b"#"):
                runid_raw = fields[5]
    return None if runid_raw is None else runid_raw.decode("utf-8", errors="replace")


# --------------------------------------------------------------------------- ranking


def rank_documents(doc_scores: Mapping[str, float]) -> list[str]:
    """Docnos in trec_eval's rank order: score descending, then docno descending.

    This is form_res_rels.c's comparator (the rank column of a run is ignored).
    Python compares str by code point, which is the byte order strcmp sees in UTF-8.
    """
    return sorted(doc_scores, key=lambda d: (doc_scores[d], d), reverse=True)


def truncate_run(run: Run, max_docs: int) -> dict[str, dict[str, float]]:
    """Keep each query's top `max_docs` documents in trec_eval order (trec_eval -M)."""
    if max_docs < 1:
        raise ValueError(f"max_docs must be positive, got {max_docs}")
    out: dict[str, dict[str, float]] = {}
    for qid, docs in run.items():
        if len(docs) <= max_docs:
            out[qid] = dict(docs)
        else:
            out[qid] = {d: docs[d] for d in rank_documents(docs)[:max_docs]}
    return out


def _ranked_rels(
    judged: Mapping[str, int], docs: Mapping[str, float], judged_docs_only: bool
) -> list[int]:
    """Relevance of each retrieved doc in rank order, coded as trec_eval's res_rels."""
    rels = []
    for docno in rank_documents(docs):
        rel = judged.get(docno)
        if rel is None:
            rel = _NONPOOL
        elif rel < 0:
            rel = _UNJUDGED
        rels.append(rel)
    if judged_docs_only:  # -J drops non-pool and unjudged docs, keeping the order
        rels = [r for r in rels if r >= 0]
    return rels


def _num_rel(judged: Mapping[str, int], relevance_level: int) -> int:
    # form_res_rels.c: only judgments >= 0 form relevance levels.
    return sum(1 for r in judged.values() if r >= 0 and r >= relevance_level)


# --------------------------------------------------------------------------- measures


@dataclass(frozen=True)
class _Family:
    name: str
    kind: str  # runid | num_q | long | mean | gm | cut | cut_real | param | relstring
    default: tuple = ()  # default cutoffs (cut, cut_real) or parameters (param)
    own: bool = False  # computed here, not by pytrec_eval
    pairs: bool = False  # param family taking name=value pairs


# trec_eval v10's measure table (measures.c) in print order, restricted to what
# pytrec_eval can compute plus the v10 measures computed here. mrr_cut is ours.
_STD_CUTOFFS = (5, 10, 15, 20, 30, 100, 200, 500, 1000)
_RECALL_PCTS = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)
_FAMILY_LIST = (
    _Family("runid", "runid"),
    _Family("num_q", "num_q"),
    _Family("num_ret", "long"),
    _Family("num_rel", "long"),
    _Family("num_rel_ret", "long"),
    _Family("map", "mean"),
    _Family("gm_map", "gm"),
    _Family("Rprec", "mean"),
    _Family("bpref", "mean"),
    _Family("recip_rank", "mean"),
    _Family("mrr_cut", "cut", (10,), own=True),
    _Family("iprec_at_recall", "cut_real", _RECALL_PCTS, own=True),
    _Family("P", "cut", _STD_CUTOFFS),
    _Family("relstring", "relstring", (10.0,), own=True),
    _Family("recall", "cut", _STD_CUTOFFS),
    _Family("infAP", "mean"),
    _Family("gm_bpref", "gm"),
    _Family("Rprec_mult", "cut_real", (0.2, 0.4, 0.6, 0.8, 1.0, 1.2, 1.4, 1.6, 1.8, 2.0)),
    _Family("utility", "param", (1.0, -1.0, 0.0, 0.0)),
    _Family("11pt_avg", "param", _RECALL_PCTS, own=True),
    _Family("binG", "mean"),
    _Family("G", "param", pairs=True),
    _Family("ndcg", "param", pairs=True),
    _Family("ndcg_rel", "param", pairs=True),
    _Family("Rndcg", "param", pairs=True),
    _Family("ndcg_cut", "cut", _STD_CUTOFFS),
    _Family("map_cut", "cut", _STD_CUTOFFS),
    _Family("relative_P", "cut", _STD_CUTOFFS),
    _Family("success", "cut", (1, 5, 10)),
    _Family("set_P", "mean"),
    _Family("set_relative_P", "mean"),
    _Family("set_recall", "mean"),
    _Family("set_map", "mean"),
    _Family("set_F", "param", (1.0,)),
    _Family("num_nonrel_judged_ret", "long"),
    _Family("rbp", "param", pairs=True, own=True),
    _Family("rbp_resid", "param", pairs=True, own=True),
    _Family("unj", "cut", (5, 10, 20), own=True),
)
_FAMILIES = {f.name: f for f in _FAMILY_LIST}
_ORDER = {f.name: i for i, f in enumerate(_FAMILY_LIST)}
# Longest first, so that "ndcg_cut_10" is ndcg_cut, not ndcg with parameter "cut_10".
_BY_LENGTH = sorted(_FAMILIES, key=len, reverse=True)

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

_SUM_FAMILIES = frozenset({"num_q", "num_ret", "num_rel", "num_rel_ret", "num_nonrel_judged_ret"})
_PAIRS_RE = re.compile(r"[^=,]+=[^=,]+(,[^=,]+=[^=,]+)*")
_ATOL_RE = re.compile(r"\s*([+-]?\d+)")


def _atol(text: str) -> int:
    # trec_eval reads cutoffs with atol(): leading integer, "23.4" -> 23, junk -> 0.
    m = _ATOL_RE.match(text)
    return int(m.group(1)) if m else 0


def _parse_params(family: _Family, text: str, strict_ints: bool) -> tuple | str:
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
    if family.name == "utility" and len(values) != 4:
        raise ValueError(f"utility takes 4 coefficients, got {text!r}")
    if family.name in ("relstring", "set_F") and len(values) != 1:
        raise ValueError(f"{family.name} takes one parameter, got {text!r}")
    return text


def _split_measure(measure: str) -> tuple[_Family, tuple | str | None]:
    """'P' -> (P, None); 'P.5,10' / 'P_5' -> (P, (5, 10)) / (P, (5,))."""
    if measure in _FAMILIES:
        return _FAMILIES[measure], None
    head, dot, tail = measure.partition(".")
    if dot and head in _FAMILIES:  # trec_eval's -m form: everything after the 1st '.'
        if not tail:
            raise ValueError(f"empty parameters in measure {measure!r}")
        return _FAMILIES[head], _parse_params(_FAMILIES[head], tail, strict_ints=False)
    for name in _BY_LENGTH:  # pytrec_eval's output-name form: P_5, ndcg_cut_10
        if measure.startswith(name + "_") and len(measure) > len(name) + 1:
            family = _FAMILIES[name]
            if family.kind in ("long", "mean", "gm", "num_q", "runid"):
                continue
            return family, _parse_params(family, measure[len(name) + 1 :], strict_ints=True)
    raise ValueError(f"unsupported measure {measure!r}")


def _parse_measures(
    measures: Iterable[str], first_params_win: bool = False
) -> dict[str, tuple | str | None]:
    """Family -> parameters (None = trec_eval's defaults), in trec_eval print order.

    By default, mentions of a family merge their cutoffs (P_5 + P_10 -> P_5, P_10; a bare
    "P", also via a nickname, adds the default cutoffs). With `first_params_win`, the
    first parameterized mention alone decides, as with trec_eval's -m.
    """
    if isinstance(measures, str):
        raise TypeError("measures must be a list of measure names, not a str")
    marked: dict[str, tuple | str | None] = {}
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
            marked[name] = tuple(sorted(set(params) | set(_FAMILIES[name].default)))
    return {name: marked[name] for name in sorted(marked, key=_ORDER.__getitem__)}


@dataclass(frozen=True)
class MeasureInfo:
    """One output measure as trec_eval names and prints it."""

    name: str  # e.g. "P_5", "iprec_at_recall_0.10", "ndcg_cut_10", "mrr_cut_10"
    family: str  # e.g. "P"
    integer: bool  # printed as an integer (counts)
    per_query: bool  # printed for each query with -q
    summary: bool  # printed on the "all" lines


def _names(family: _Family, params: tuple | str | None) -> list[str]:
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
    for name, params in _parse_measures(measures, first_params_win).items():
        family = _FAMILIES[name]
        per_query = family.kind not in ("runid", "num_q", "gm")
        summary = family.kind != "relstring"
        integer = family.kind in ("long", "num_q")
        for output_name in _names(family, params):
            out.append(MeasureInfo(output_name, name, integer, per_query, summary))
    return out


def normalize_measures(measures: Iterable[str], *, first_params_win: bool = False) -> list[str]:
    """Canonical 'family[.params]' strings, one per family, in trec_eval order."""
    specs = _parse_measures(measures, first_params_win)
    return [_measure_string(name, params) for name, params in specs.items()]


def _measure_string(name: str, params: tuple | str | None) -> str:
    if params is None:
        return name
    if isinstance(params, str):
        return f"{name}.{params}"
    return f"{name}.{','.join(repr(p) for p in params)}"


def _family_of(name: str) -> str | None:
    try:
        return _split_measure(name)[0].name
    except ValueError:
        return None


# --------------------------------------------------------------- own measure math


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


def _pair_params(text: str | None) -> dict[str, float]:
    if not text:
        return {}
    return {k: float(v) for k, v in (item.split("=") for item in text.split(","))}


def _rbp(rels: Sequence[int], judged: Mapping[str, int], params: str | None) -> float:
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


def _rbp_resid(rels: Sequence[int], params: str | None) -> float:
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


def _relstring(rels: Sequence[int], length: int) -> str:
    chars = []
    for rel in rels[: max(length, 0)]:
        if rel > 9:
            chars.append(">")
        elif rel >= 0:
            chars.append(str(rel))
        elif rel == _NONPOOL:
            chars.append("-")
        elif rel == _UNJUDGED:
            chars.append(".")
        else:
            chars.append("<")
    return "".join(chars)


# --------------------------------------------------------------------------- compute


def _missing_query_values(
    names: Iterable[str], judged: Mapping[str, int], relevance_level: int
) -> dict[str, float]:
    """Values trec_eval v10 -c gives a qrels query absent from the run.

    v10 evaluates a one-document bogus ranking and then zeroes num_ret, utility, unj
    and rbp_resid: every measure ends up 0 except num_rel (and num_q = 1), and gm_*
    take log(MIN_GEO_MEAN), trec_eval's floor.
    """
    row = {}
    for name in names:
        family = _family_of(name)
        if family == "num_rel":
            row[name] = float(_num_rel(judged, relevance_level))
        elif family == "num_q":
            row[name] = 1.0
        elif family in ("gm_map", "gm_bpref"):
            row[name] = math.log(MIN_GEO_MEAN)
        else:
            row[name] = 0.0
    return row


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
    specs = _parse_measures(measures)
    if max_docs_per_query is not None:
        run = truncate_run(run, max_docs_per_query)
    qrels = {qid: judged for qid, judged in qrels.items() if judged}  # pytrec_eval#57

    # One evaluator call computes every measure pytrec_eval knows.
    trec_measures = [
        _measure_string(name, params)
        for name, params in specs.items()
        if not _FAMILIES[name].own and name != "runid"
    ]
    if "mrr_cut" in specs and "recip_rank" not in specs:
        trec_measures.append("recip_rank")

    qids = sorted(qid for qid in run if qid in qrels and run[qid])
    trec_results: dict[str, dict[str, float]] = {}
    if trec_measures and qids:
        evaluator = _TrecEvalEvaluator(qrels, set(trec_measures), relevance_level, judged_docs_only)
        trec_results = evaluator.evaluate({qid: run[qid] for qid in qids})

    needs_ranking = any(
        name in specs for name in ("iprec_at_recall", "11pt_avg", "rbp", "rbp_resid", "unj")
    )
    names = {name: _names(_FAMILIES[name], params) for name, params in specs.items()}
    per_query: PerQuery = {}
    for qid in qids:
        trec_row = trec_results.get(qid, {})
        row: dict[str, float] = {}
        rels: list[int] = []
        judged = qrels[qid]
        if needs_ranking:
            rels = _ranked_rels(judged, run[qid], judged_docs_only)
        for name, params in specs.items():
            family = _FAMILIES[name]
            if family.kind in ("runid", "relstring"):
                continue
            if name == "mrr_cut":
                # pytrec_eval has no rank cut-off for recip_rank. RR@k is RR when the
                # first relevant doc is within the top k, else 0; deriving it from
                # trec_eval's own recip_rank reuses trec_eval's ranking (score desc,
                # docno desc), -J and -M exactly, at no extra sorting cost.
                rr = trec_row["recip_rank"]
                first_rel_rank = round(1.0 / rr) if rr > 0 else 0
                for k, output_name in zip(params or family.default, names[name], strict=True):
                    row[output_name] = rr if 0 < first_rel_rank <= k else 0.0
            elif name == "iprec_at_recall":
                pcts = params or family.default
                values = _interpolated_precisions(
                    rels, relevance_level, _num_rel(judged, relevance_level), pcts
                )
                row.update(zip(names[name], values, strict=True))
            elif name == "11pt_avg":
                pcts = [float(p) for p in params.split(",")] if params else family.default
                values = _interpolated_precisions(
                    rels, relevance_level, _num_rel(judged, relevance_level), pcts
                )
                # m_11pt_avg.c sums from the last cut-off down; keep its float order.
                row[names[name][0]] = sum(reversed(values)) / len(pcts)
            elif name == "rbp":
                row[names[name][0]] = _rbp(rels, judged, params)
            elif name == "rbp_resid":
                row[names[name][0]] = _rbp_resid(rels, params)
            elif name == "unj":
                for k, output_name in zip(params or family.default, names[name], strict=True):
                    row[output_name] = _unj(rels, k)
            elif family.kind == "param":
                row[names[name][0]] = trec_row[name]  # pytrec_eval's key drops the params
            else:
                for output_name in names[name]:
                    row[output_name] = trec_row[output_name]
        per_query[qid] = row

    if complete:
        names = [
            m.name for m in resolve_measures(measures) if m.family not in ("runid", "relstring")
        ]
        for qid, judged in qrels.items():
            if qid not in per_query:
                per_query[qid] = _missing_query_values(names, judged, relevance_level)
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
            rels = _ranked_rels(qrels[qid], run[qid], judged_docs_only)
            out[qid] = _relstring(rels, length)
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
        family = _family_of(name)
        values = [row[name] for row in ordered]
        if family == "num_q":
            out[name] = float(n)
        elif family == "num_rel" and complete:
            out[name] = float(sum(1 for j in qrels.values() for r in j.values() if r > 0))
        elif family in _SUM_FAMILIES:
            out[name] = float(sum(values))
        elif family in ("gm_map", "gm_bpref"):
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
