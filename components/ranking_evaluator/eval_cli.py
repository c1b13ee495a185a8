"""`rankpipe eval` (trec_eval v10 look-alike) and `rankpipe compare` (paired tests).

Both read every judgment format the pipeline reads (`--qrels-format`, by default told from the
file's first line: rankcore.metrics.detect_qrels_format) and take measures by trec_eval's names
or ir_measures' (`-m nDCG@10`: rankcore/metrics/names.py); the output keeps trec_eval's names
and layout. Usable without the console script:
python -m components.ranking_evaluator.eval_cli eval ...
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Mapping

from components.ranking_evaluator.significance import compare_per_query
from rankcore.metrics import (
    QRELS_FORMATS,
    MalformedLineError,
    MeasureInfo,
    aggregate,
    compute_metrics,
    normalize_measures,
    read_qrels,
    read_run_with_runid,
    relstrings,
    resolve_measures,
)
from rankcore.metrics.measures import measure_string, parse_measures
from rankcore.metrics.names import to_trec_eval

__all__ = ["compare_main", "eval_main", "format_line", "main"]


class _UsageError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    # Raise instead of exiting so that *_main can return a status.
    def error(self, message: str) -> None:  # type: ignore[override]
        raise _UsageError(f"{message}\n{self.format_usage().rstrip()}")


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text}")
    return value


def _add_qrels_format(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--qrels-format",
        choices=("auto", *QRELS_FORMATS),
        default="auto",
        help="auto [default]: BEIR (3 tab-separated fields, optional 'query-id corpus-id "
        "score' header) or TREC (4 fields), from the first line; cranfield (cranqrel: "
        "relevance codes 1..5 and -1 as gains 5 - code and 0) must be named",
    )


def _add_measure(p: argparse.ArgumentParser, required: bool) -> None:
    p.add_argument(
        "-m",
        action="append",
        required=required,
        metavar="MEASURE",
        help="measure: a trec_eval name, family with parameters (P.5,10, ndcg_cut.5,10) or "
        "nickname (official [default], all_trec, set), or an ir_measures name (nDCG@10, P@5, "
        "RR, RR@10, AP, R@100), printed under its trec_eval name; repeatable. As in trec_eval, "
        "the first parameters given for a family are the ones used (names of one measure, "
        "P@5 or P_5, add up: -m P@5 -m P_10 gives P_5 and P_10)",
    )


def trec_eval_measures(
    names: list[str], relevance_level: int = 1, judged_docs_only: bool = False
) -> list[str]:
    """The -m values in trec_eval's form (rankcore.metrics.names.to_trec_eval). Names of one
    measure each, ir_measures' (`P@5`) and output names (`P_5`), merge per family into one spec
    at the first one's place (`P@5`, `P_10` -> `P.5,10`): trec_eval's rule for its own
    `-m P.5 -m P.10` (the first parameters of a family win) would drop all but the first."""
    out: list[str] = []
    merged: dict[str, int] = {}  # family -> its merged spec's index in out
    for name in names:
        trec = to_trec_eval(name, relevance_level, judged_docs_only)
        specs = parse_measures([trec])
        (family, params), *others = specs.items()
        if others or not isinstance(params, tuple) or (trec == name and "." in name):
            out.append(trec)  # a nickname, a bare family, trec_eval's own family.params form
        elif family in merged:
            out[merged[family]] += "," + ",".join(repr(p) for p in params)
        else:
            merged[family] = len(out)
            out.append(measure_string(family, params))
    return out


def _eval_parser() -> _Parser:
    p = _Parser(
        prog="rankpipe eval",
        description="Evaluate a TREC run against qrels; output as trec_eval v10 prints it.",
    )
    p.add_argument(
        "qrels", help="judgments: TREC qrels (qid iter docno rel), BEIR qrels TSV or cranqrel"
    )
    p.add_argument("run", help="run file: qid iter docno rank score runid")
    p.add_argument("-q", action="store_true", help="also print per-query values")
    _add_measure(p, required=False)
    _add_qrels_format(p)
    p.add_argument("-l", type=int, default=1, metavar="LEVEL", help="min relevant grade [1]")
    p.add_argument(
        "-c", action="store_true", help="average over all qrels queries, 0 for missing ones"
    )
    p.add_argument("-M", type=_positive_int, metavar="N", help="use only the top N docs per query")
    p.add_argument("-J", action="store_true", help="evaluate over judged documents only")
    p.add_argument("-n", action="store_true", help="no summary ('all') lines")
    return p


def _compare_parser() -> _Parser:
    p = _Parser(
        prog="rankpipe compare",
        description="Compare run B against baseline A per query: means, wins/ties/losses of "
        "B, paired t-test and randomization test p-values, over the judged queries of the "
        "runs (as trec_eval averages without -c; a query only one run has scores 0 in the "
        "other); -c: over every qrels query.",
    )
    p.add_argument("qrels")
    p.add_argument("run_a", help="baseline run (A)")
    p.add_argument("run_b", help="run compared with the baseline (B)")
    _add_measure(p, required=True)
    _add_qrels_format(p)
    p.add_argument(
        "-c",
        action="store_true",
        help="over every qrels query, 0 for a query a run lacks (trec_eval -c)",
    )
    p.add_argument("--seed", type=int, default=0, help="randomization test seed [0]")
    p.add_argument("--trials", type=_positive_int, default=10000, help="randomization trials")
    p.add_argument("-l", type=int, default=1, metavar="LEVEL", help="min relevant grade [1]")
    p.add_argument("-M", type=_positive_int, metavar="N", help="use only the top N docs per query")
    p.add_argument("-J", action="store_true", help="evaluate over judged documents only")
    return p


def format_line(measure: MeasureInfo, qid: str, value: float | str) -> str:
    """One output line exactly as trec_eval prints it."""
    # trec_eval: printf("%-22s\t%s\t%6.4f\n"), integers with %ld, relstring quoted.
    if measure.family == "relstring":
        text = f"'{value}'"
    elif measure.family == "runid":
        text = str(value)
    elif measure.integer:
        text = str(int(value))
    else:
        text = f"{value:6.4f}"
    return f"{measure.name:<22}\t{qid}\t{text}\n"


def _render_eval(args: argparse.Namespace) -> str:
    measures = trec_eval_measures(args.m or ["official"], args.l, args.J)
    requested = normalize_measures(measures, first_params_win=True)
    layout = resolve_measures(requested)
    qrels = read_qrels(args.qrels, args.qrels_format)
    run, runid = read_run_with_runid(args.run)
    per_query = compute_metrics(
        qrels, run, requested, args.l, args.J, max_docs_per_query=args.M, complete=args.c
    )
    if not per_query:
        raise ValueError("no queries with both results and relevance info")
    strings: Mapping[str, str] = {}
    for m in layout:
        if m.family == "relstring":
            length = int(float(m.name.partition("_")[2] or 10))
            strings = relstrings(
                qrels, run, length, args.J, max_docs_per_query=args.M, complete=args.c
            )
    lines = []
    if args.q:
        for qid, row in per_query.items():
            for m in layout:
                if m.per_query:
                    value = strings.get(qid, "") if m.family == "relstring" else row[m.name]
                    lines.append(format_line(m, qid, value))
    if not args.n:
        summary = aggregate(
            per_query, qrels=qrels, complete=args.c, relevance_level=args.l, runid=runid
        )
        for m in layout:
            if m.summary:
                lines.append(format_line(m, "all", summary[m.name]))
    return "".join(lines)


def eval_main(argv: list[str]) -> int:
    """`rankpipe eval QRELS RUN [-q] [-m MEASURE ...] [-l LEVEL] [-c] [-M N] [-J] [-n]
    [--qrels-format F]`."""
    return _run("eval", _eval_parser, _render_eval, argv)


def _render_compare(args: argparse.Namespace) -> str:
    requested = normalize_measures(
        trec_eval_measures(args.m, args.l, args.J), first_params_win=True
    )
    # Only measures with per-query values can be paired.
    names = [m.name for m in resolve_measures(requested) if m.per_query and m.summary]
    if not names:
        raise ValueError(f"no per-query measure among {args.m}")
    qrels = read_qrels(args.qrels, args.qrels_format)
    evaluated = []
    for path in (args.run_a, args.run_b):
        run, runid = read_run_with_runid(path)
        # Every judged query, with trec_eval -c's value (0) where the run lacks it; then the
        # run's own queries are those compute_metrics evaluates without -c.
        per_query = compute_metrics(
            qrels, run, requested, args.l, args.J, max_docs_per_query=args.M, complete=True
        )
        own = {qid for qid, docs in run.items() if docs and qid in per_query}
        evaluated.append((per_query, own, runid))
    (all_a, own_a, runid_a), (all_b, own_b, runid_b) = evaluated
    # As trec_eval averages a run without -c: over the queries it has results for, ignoring
    # qrels queries it lacks and run queries without judgments. Two runs are paired over the
    # queries either has, the other scoring 0 on one it lacks; with -c over every qrels query.
    qids = set(all_a) if args.c else own_a | own_b
    if not qids:
        raise ValueError("no queries with both results and relevance info")
    per_a = {q: all_a[q] for q in sorted(qids)}
    per_b = {q: all_b[q] for q in sorted(qids)}
    result = compare_per_query(per_a, per_b, names, trials=args.trials, seed=args.seed)
    which = "every judged query, -c" if args.c else "judged queries of either run"
    lines = [
        f"# A: {args.run_a} (runid {runid_a})  B: {args.run_b} (runid {runid_b})\n",
        f"# queries: {len(qids)} ({which})  randomization trials: {args.trials}  "
        f"seed: {args.seed}  delta = B - A, win = B better\n",
    ]
    for label, lacking in (("A", qids - own_a), ("B", qids - own_b)):
        if lacking:
            lines.append(
                f"# run {label} has no results for {len(lacking)} of them: 0 there "
                f"({', '.join(sorted(lacking)[:5])}{', ...' if len(lacking) > 5 else ''})\n"
            )
    lines.append(f"{'measure':<22}\tmean_A\tmean_B\tdelta\twin\ttie\tloss\tttest_p\trand_p\n")
    for name in names:
        r = result[name]
        lines.append(
            f"{name:<22}\t{r['mean_a']:.4f}\t{r['mean_b']:.4f}\t{r['mean_delta']:+.4f}\t"
            f"{r['wins']}\t{r['ties']}\t{r['losses']}\t"
            f"{_format_p(r['ttest_p'])}\t{_format_p(r['randomization_p'])}\n"
        )
    return "".join(lines)


def _format_p(p: float) -> str:
    return f"{p:.4f}" if not p < 1e-4 else f"{p:.1e}"  # NaN stays "nan"


def compare_main(argv: list[str]) -> int:
    """`rankpipe compare QRELS RUN_A RUN_B -m MEASURE [-m ...] [-c] [--seed S] [--trials N]
    [--qrels-format F]`."""
    return _run("compare", _compare_parser, _render_compare, argv)


def _run(
    command: str,
    parser: Callable[[], argparse.ArgumentParser],
    render: Callable[[argparse.Namespace], str],
    argv: list[str],
) -> int:
    """Parses `argv`, prints `render(args)`; usage and input errors exit 2 with one line."""
    try:
        args = parser().parse_args(argv)
    except _UsageError as exc:
        print(f"rankpipe {command}: {exc}", file=sys.stderr)
        return 2
    except SystemExit as exc:  # -h
        return int(exc.code or 0)
    try:
        sys.stdout.write(render(args))
    except MalformedLineError as exc:
        print(f"rankpipe {command}: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"rankpipe {command}: cannot read {exc.filename}: {exc.strerror}", file=sys.stderr)
        return 2
    except ValueError as exc:
        print(f"rankpipe {command}: {exc}", file=sys.stderr)
        return 2
    return 0


def main(argv: list[str] | None = None) -> int:
    """Dispatch `eval` / `compare` (what the rankpipe console script does for them)."""
    argv = sys.argv[1:] if argv is None else argv
    commands = {"eval": eval_main, "compare": compare_main}
    if not argv or argv[0] not in commands:
        print("usage: eval_cli {eval,compare} ...", file=sys.stderr)
        return 2
    return commands[argv[0]](argv[1:])


if __name__ == "__main__":
    sys.exit(main())
