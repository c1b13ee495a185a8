"""The `rankpipe` command line.

rankpipe run CONFIG [--set key=value ...] [-v]   run the pipeline locally (LocalDagRunner)
rankpipe compile CONFIG [--output FILE] [--format yaml|vertex]   write the Kubeflow spec
rankpipe submit CONFIG --host URL [--experiment E] [--run-name R] [--pipeline-root URI]
                [--namespace NS] [--param NAME=VALUE] [--service-account SA]
                                                 compile and start a run on a KFP v2 API
rankpipe config show CONFIG [--set ...]          print the resolved config
rankpipe data demo OUT_DIR [--seed N]            write the demo collection
rankpipe eval QRELS RUN [trec_eval flags]        trec_eval-compatible metrics
rankpipe compare QRELS RUN_A RUN_B -m MEASURE    paired significance tests
rankpipe rerank MODEL RUN --queries Q --documents D [--output OUT] [--depth K]
                                                 rerank a TREC run with a pushed model
rankpipe runs [PIPELINE]                         past runs of a pipeline, from its MLMD store
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
import warnings
from typing import Any

import yaml

from components.ranking_evaluator.constants import MAIN_METRIC, METRICS_FILE
from pipelines.interrupts import InterruptGuard
from rankcore.config_loader import ConfigError


def _load(args: argparse.Namespace, check_inputs: bool = True):
    from pipelines.config import load_config

    return load_config(args.config, args.set, check_inputs=check_inputs)


def _latest_artifact(store, type_name: str):
    artifacts = store.get_artifacts_by_type(type_name)
    return max(artifacts, key=lambda a: a.id) if artifacts else None


def run_summary(config) -> str:
    """Where the pushed model and the report are, and the headline metrics, from MLMD."""
    from ml_metadata import metadata_store
    from tfx import v1 as tfx

    from components.ranking_evaluator.report import where

    store = metadata_store.MetadataStore(
        tfx.orchestration.metadata.sqlite_metadata_connection_config(config.runner.metadata_path)
    )
    evaluation = _latest_artifact(store, "ModelEvaluation")
    pushed = _latest_artifact(store, "PushedModel")
    lines = [f"rankpipe: pipeline {config.runner.pipeline_name!r} finished."]
    if evaluation is not None:
        with open(os.path.join(evaluation.uri, METRICS_FILE)) as f:
            metrics = json.load(f)
        main = metrics[MAIN_METRIC]
        agg = metrics["aggregate"]
        lines.append(
            f"Evaluation ({where(metrics)}, {metrics['num_queries']} queries): "
            f"{'BLESSED' if metrics['blessed'] else 'NOT BLESSED'}"
        )
        shown = [m for m in (main, "map", "recip_rank", "P_10") if m in agg["candidate"]]
        # With first-stage fusion the candidate (what the blessing judges) is the fused
        # ranking and "reranker" the reranker alone (the evaluator's metrics.json contract).
        fusion = metrics.get("fusion")
        columns = [("first stage", "first_stage")]
        if fusion and "reranker" in agg:
            # With cross-validation each fold's model has its own alpha.
            alpha = "per fold" if "alphas" in fusion else f"a={fusion['alpha']:.2f}"
            columns += [("reranker", "reranker"), (f"fused {alpha}", "candidate")]
        else:
            columns.append(("reranker", "candidate"))
        lines.append(f"  {'measure':<14}" + "".join(f"{title:>16}" for title, _ in columns))
        for m in dict.fromkeys(shown):
            lines.append(f"  {m:<14}" + "".join(f"{agg[s][m]:>16.4f}" for _, s in columns))
        lines += [f"  not blessed: {r}" for r in metrics["reasons"]]
        if metrics.get("baseline_skipped"):
            lines.append(f"  no baseline: {metrics['baseline_skipped']}")
        lines.append(f"Report: {os.path.join(evaluation.uri, 'report.md')}")
    if pushed is not None and pushed.custom_properties["pushed"].int_value == 1:
        lines.append(f"Pushed model: {pushed.custom_properties['pushed_destination'].string_value}")
    else:
        lines.append("Pushed model: none (the model was not blessed)")
    return "\n".join(lines)


def cmd_run(args: argparse.Namespace) -> int:
    from pipelines import interrupts

    # SIGINT (Ctrl-C) and SIGTERM stop the run and exit 130 / 143, the interrupted execution
    # cancelled and its partial outputs removed (pipelines/interrupts.py).
    with InterruptGuard(end_children=True) as guard:
        try:
            return _run_pipeline(args, guard)
        except KeyboardInterrupt:  # outside the runner: loading the config, or after the run
            with guard.quiet():
                print(interrupts.message(guard.component, guard.signal_name), file=sys.stderr)
            return guard.exit_code


def _run_pipeline(args: argparse.Namespace, guard: InterruptGuard) -> int:
    """`rankpipe run` under the interrupt guard: the console, the runner, the summary."""
    from pipelines import console as console_lib
    from pipelines import interrupts

    start = time.time()
    with console_lib.EarlyCapture(enabled=not args.verbose) as early:
        try:
            config = _load(args)
        except ConfigError as e:
            error = e
        else:
            error = None
    if error is not None:  # raised outside the capture, for main() to print (exit 2)
        raise error
    log_path = console_lib.log_path_for(config.runner.pipeline_root)
    block, code, runner = None, 0, None
    with console_lib.RunConsole(
        log_path,
        verbose=args.verbose,
        metadata_path=config.runner.metadata_path,
        preamble=early.text,
        check=guard.check,
    ) as console:
        guard.where = lambda: console.current.name if console.current else None
        console.print(
            f"rankpipe: running pipeline {config.runner.pipeline_name!r} ({config.source})"
        )
        # TFX's Beam executors parse sys.argv with absl's flags (base_beam_executor), where
        # `-v` is absl's --verbosity: rankpipe's own arguments must not reach them.
        argv, sys.argv = sys.argv, sys.argv[:1]
        try:
            from pipelines import local_runner

            runner = local_runner.IrKeepingDagRunner()
            local_runner.run(config, console=console, runner=runner)
            guard.check()  # a signal whose exception the last component swallowed
        except (Exception, KeyboardInterrupt) as e:  # noqa: BLE001  (reported, then exit 1)
            with guard.quiet():  # a signal now would cut the report short
                if guard.interrupted or isinstance(e, KeyboardInterrupt):
                    block = interrupts.after_interrupt(guard, console, runner, config, log_path, e)
                    code = guard.exit_code
                else:
                    component = console.fail()
                    console_lib.log_exception(e)
                    if isinstance(e, ConfigError):  # a config problem found by a component
                        block, code = _config_error_block(str(e)), 2
                    else:
                        block = console_lib.error_block(component, e, log_path, args.verbose)
                        code = 1
        finally:
            sys.argv = argv
        with guard.quiet():  # the run has finished: a signal now only skips the summary
            summary = run_summary(config) if code == 0 else None
    if block is None and guard.interrupted:
        block, code = interrupts.message(None, guard.signal_name, finished=True), guard.exit_code
    if block is not None:
        print(block, file=sys.stderr)
        return code
    print(summary)
    print(f"Log: {log_path}")
    print(f"Total time: {time.time() - start:.0f}s; artifacts under {config.runner.pipeline_root}")
    return 0


def _config_error_block(message: str) -> str:
    from pipelines.console import config_fix

    # Several problems come one a line: each under the first, aligned.
    problems = message.replace("\n", "\n                       ")
    return f"rankpipe: config error: {problems}\n  fix:   {config_fix(message)}"


def cmd_init(args: argparse.Namespace) -> int:
    from pipelines import init_collection

    try:
        result = init_collection.init(
            args.dir,
            args.collection,
            name=args.name,
            force=args.force,
            overrides={k: getattr(args, k) for k in ("documents", "queries", "qrels")},
            recipe=args.recipe,
        )
    except init_collection.InitError as e:
        print(f"rankpipe: {e}", file=sys.stderr)
        return 2
    layout = result.layout
    print(f"rankpipe: {args.collection}: a {layout.kind} collection")
    print(f"  documents  {layout.documents} ({layout.documents_format})")
    print(f"  queries    {layout.queries} ({layout.queries_format})")
    print(f"  qrels      {layout.qrels} ({layout.qrels_format})")
    for note in layout.notes:
        print(f"  {note}")
    if not result.pretrained and args.recipe == "scratch":
        print("  recipe: KNRM from scratch (--recipe scratch)")
    elif not result.pretrained:
        print(
            "  recipe: KNRM from scratch: the pretrained checkpoints are not installed, and the "
            "shipped recipe needs them (`make pretrained`, then `rankpipe init --force ...`)"
        )
    else:
        print("  recipe: the shipped one (MiniLM dual encoder + MPNet companion, feedback, fusion)")
    print(f"Wrote {result.config_path}\nRun it:  rankpipe run {result.config_path}")
    return 0


def cmd_runs(args: argparse.Namespace) -> int:
    from pipelines import runs

    # pipelines.config.PATH_DEFAULTS' default, not imported from there: that module loads
    # TensorFlow (seconds, and its start-up lines) for a command that only reads SQLite.
    default = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "outputs")
    outputs = os.environ.get("RANKPIPE_OUTPUTS", default)
    if args.pipeline is None:
        names = runs.pipelines_under(outputs)
        if not names:
            print(f"rankpipe: no pipeline has run under {outputs}/pipelines", file=sys.stderr)
            return 1
        stores = [(n, os.path.join(outputs, "pipelines", n, "metadata.sqlite")) for n in names]
    elif os.path.isfile(args.pipeline):
        stores = [(args.pipeline, args.pipeline)]
    elif os.path.isdir(args.pipeline):
        stores = [(args.pipeline, os.path.join(args.pipeline, "metadata.sqlite"))]
    else:
        stores = [
            (args.pipeline, os.path.join(outputs, "pipelines", args.pipeline, "metadata.sqlite"))
        ]
    for i, (name, path) in enumerate(stores):
        try:
            rows = runs.list_runs(runs.open_store(path), os.path.dirname(os.path.abspath(path)))
        except FileNotFoundError as e:
            known = ", ".join(runs.pipelines_under(outputs)) or "none"
            print(f"rankpipe: {e}; pipelines under {outputs}: {known}", file=sys.stderr)
            return 1
        print(("\n" if i else "") + f"{name}: {len(rows)} run(s), newest first ({path})")
        print(runs.format_table(rows))
    return 0


def cmd_compile(args: argparse.Namespace) -> int:
    from pipelines import kubeflow_runner

    config = _load(args, check_inputs=False)
    output = args.output or (
        f"{config.runner.pipeline_name}.{'json' if args.format == 'vertex' else 'yaml'}"
    )
    kubeflow_runner.compile_pipeline(config, output, args.format)
    what = "Vertex AI PipelineJob" if args.format == "vertex" else "KFP v2 pipeline spec"
    print(f"Wrote the {what} to {output}")
    return 0


def _run_parameters(settings: list[str]) -> dict[str, Any]:
    """`--param NAME=VALUE` settings as the run's pipeline parameters, each converted to its
    type; a name the pipeline does not have or a value of the wrong type is a ConfigError."""
    import yaml

    from pipelines.kubeflow_runner import PIPELINE_PARAMETERS

    known = {p.name: p for p in PIPELINE_PARAMETERS}
    result: dict[str, Any] = {}
    for setting in settings:
        name, sep, text = setting.partition("=")
        if not sep or name not in known:
            raise ConfigError(
                f"--param {setting!r}: write NAME=VALUE, NAME one of {', '.join(known)}"
            )
        ptype = known[name].ptype
        value = text if ptype is str else yaml.safe_load(text)
        ok = isinstance(value, ptype) or (ptype is float and isinstance(value, int))
        if not ok or isinstance(value, bool):
            raise ConfigError(
                f"--param {name}: {text!r} is not {ptype.__name__} (the default: "
                f"{known[name].config_key})"
            )
        result[name] = ptype(value)
    return result


def cmd_submit(args: argparse.Namespace) -> int:
    from pipelines import kfp_submit

    if args.pipeline_root:  # the same as --set, so it is checked (and compiled) the same way
        args.set = [*args.set, f"runner.pipeline_root={args.pipeline_root}"]
    config = _load(args, check_inputs=False)
    try:
        parameters = _run_parameters(args.param)
    except ConfigError as e:
        print(f"rankpipe: {e}", file=sys.stderr)
        return 2
    try:
        run = kfp_submit.submit_run(
            config,
            args.host,
            args.experiment,
            args.run_name,
            args.namespace,
            parameters=parameters,
            service_account=args.service_account,
        )
    except kfp_submit.SubmitError as e:
        print(f"rankpipe: {e}", file=sys.stderr)
        return 1
    print(
        f"Submitted run {run.run_name!r} ({run.run_id}) of {config.runner.pipeline_name!r} "
        f"to {args.host}, experiment {run.experiment!r}\n"
        f"Pipeline root: {run.pipeline_root}\n"
        f"Run details: {run.url}"
    )
    return 0


def cmd_config_show(args: argparse.Namespace) -> int:
    import dataclasses

    config = _load(args)
    print(f"# resolved from {config.source}")
    print(yaml.safe_dump(dataclasses.asdict(config), sort_keys=False), end="")
    return 0


def cmd_data_demo(args: argparse.Namespace) -> int:
    from pipelines import demo_data

    try:
        paths = demo_data.generate(args.out_dir, args.seed, args.num_documents, args.num_queries)
    except demo_data.NotADemoDirectory as e:
        print(f"rankpipe: {e}", file=sys.stderr)
        return 1
    for name, path in paths.items():
        print(f"{name}: {path}")
    return 0


def cmd_rerank(args: argparse.Namespace) -> int:
    from components.ranking_evaluator import rerank

    try:
        ranked = rerank.rerank_run(
            args.model,
            args.run,
            args.queries,
            args.documents,
            queries_format=args.queries_format,
            documents_format=args.documents_format,
            depth=args.depth,
            scores=args.scores,
        )
        text = rerank.format_run(ranked, args.runid)
    except OSError as e:
        where = f"cannot read {e.filename}: {e.strerror}" if e.filename else str(e)
        print(f"rankpipe rerank: {where}", file=sys.stderr)
        return 2
    except ValueError as e:  # bad input lines (file:line), texts missing, a bad format name
        print(f"rankpipe rerank: {e}", file=sys.stderr)
        return 2
    if args.output is None:
        sys.stdout.write(text)
        return 0
    from rankcore.file_io import write_text_atomic

    write_text_atomic(args.output, text)
    documents = sum(len(docs) for docs in ranked.values())
    print(f"rankpipe rerank: {len(ranked)} queries, {documents} documents -> {args.output}")
    return 0


def _version() -> str:
    """The installed project's version (pyproject.toml's, through the package metadata)."""
    from importlib import metadata

    try:
        return metadata.version("rankpipe")
    except metadata.PackageNotFoundError:  # run from a checkout that was never installed
        return "unknown (not installed)"


def quiet_start_up() -> None:
    """Keeps what a user cannot act on out of every command but `run` (which sends it to its
    log file): TensorFlow's C++ start-up lines (CUDA, cuFFT/cuDNN/cuBLAS, oneDNN, TensorRT) and
    the FutureWarnings google-api-core and google-auth print when Beam or TensorFlow import them
    (this Python version's and grpcio's support notices). Set before anything imports
    TensorFlow; a TF_CPP_MIN_LOG_LEVEL of the user's own is kept."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    warnings.filterwarnings("ignore", category=FutureWarning, module=r"google\.")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="rankpipe", description=__doc__.split("\n\n")[0])
    parser.add_argument("--version", action="version", version=f"rankpipe {_version()}")
    sub = parser.add_subparsers(dest="command", required=True)

    def with_config(p: argparse.ArgumentParser) -> None:
        p.add_argument("config", help="config file, or a name in pipelines/configs/ (demo, ...)")
        p.add_argument(
            "--set",
            action="append",
            default=[],
            metavar="KEY=VALUE",
            help="override a config key, e.g. --set trainer.learning_rate=3e-4 (repeatable)",
        )

    p = sub.add_parser("run", help="run the pipeline locally with LocalDagRunner")
    with_config(p)
    p.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="every log line on the console (default: one line per component; the full log "
        "goes to a file under the pipeline root either way)",
    )
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("compile", help="compile the pipeline for Kubeflow Pipelines or Vertex AI")
    with_config(p)
    p.add_argument(
        "--output", help="file to write (default: <runner.pipeline_name>.yaml, or .json)"
    )
    p.add_argument(
        "--format",
        choices=("yaml", "vertex"),
        default="yaml",
        help="yaml: a KFP v2 PipelineSpec for the KFP UI and `kfp` CLI (default); "
        "vertex: a Vertex AI PipelineJob JSON",
    )
    p.set_defaults(func=cmd_compile)

    p = sub.add_parser(
        "submit",
        help="compile and start a run on Kubeflow Pipelines v2 (kfp.Client), root included",
    )
    with_config(p)
    p.add_argument(
        "--host",
        required=True,
        help="the KFP API, e.g. http://localhost:8080 (kubectl port-forward -n kubeflow "
        "svc/ml-pipeline-ui 8080:80)",
    )
    p.add_argument("--experiment", help="experiment (made if missing; default: the pipeline name)")
    p.add_argument("--run-name", help="run name (default: the pipeline name and the time)")
    p.add_argument(
        "--pipeline-root",
        metavar="URI",
        help="where the run's artifacts go (gs://, s3://, minio://); the same as "
        "--set runner.pipeline_root=URI. Sent with the run: KFP ignores the spec's own root",
    )
    p.add_argument(
        "--namespace",
        help="Kubeflow profile namespace (multi-user Kubeflow); default: the kfp client's",
    )
    p.add_argument(
        "--param",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a pipeline parameter of this run (train_steps, learning_rate, push_destination; "
        "default: the config's value); repeatable",
    )
    p.add_argument(
        "--service-account",
        help="Kubernetes service account the run's pods use (e.g. one with Workload Identity "
        "for gs://); default: the namespace's pipeline runner",
    )
    p.set_defaults(func=cmd_submit)

    p = sub.add_parser("config", help="config commands")
    config_sub = p.add_subparsers(dest="config_command", required=True)
    p = config_sub.add_parser("show", help="print the resolved config")
    with_config(p)
    p.set_defaults(func=cmd_config_show)

    p = sub.add_parser("data", help="data commands")
    data_sub = p.add_subparsers(dest="data_command", required=True)
    p = data_sub.add_parser("demo", help="write the synthetic demo collection")
    p.add_argument("out_dir")
    p.add_argument("--seed", type=int, default=13)
    p.add_argument("--num-documents", type=int, default=600)
    p.add_argument("--num-queries", type=int, default=60)
    p.set_defaults(func=cmd_data_demo)

    # eval and compare keep trec_eval's flag syntax: main() hands them their arguments before
    # argparse; these entries are for `rankpipe --help` (and `rankpipe eval --help` goes on).
    for name, text in (
        ("eval", "trec_eval-compatible metrics of a TREC run: rankpipe eval QRELS RUN [flags]"),
        ("compare", "paired t-test and randomization test: rankpipe compare QRELS A B -m M"),
    ):
        sub.add_parser(name, help=text, add_help=False)

    p = sub.add_parser(
        "init",
        help="write DIR/rankpipe.yaml for a collection (BEIR, TREC, MS MARCO TSV, Cranfield), "
        "recognised by its files",
    )
    p.add_argument("dir", help="where the config goes (a new directory outside the collection)")
    p.add_argument("--collection", required=True, metavar="PATH", help="the collection's folder")
    p.add_argument("--name", help="the collection's label in reports (default: its folder name)")
    p.add_argument("--force", action="store_true", help="write DIR/rankpipe.yaml again")
    p.add_argument(
        "--recipe",
        choices=("auto", "shipped", "scratch"),
        default="auto",
        help="shipped: MiniLM dual encoder + MPNet companion (needs `make pretrained`); "
        "scratch: KNRM trained from scratch; auto (default): shipped where installed",
    )
    for key in ("documents", "queries", "qrels"):
        p.add_argument(f"--{key}", metavar="FILE", help=f"the {key} file, where init cannot tell")
    p.set_defaults(func=cmd_init)

    p = sub.add_parser(
        "rerank",
        help="rerank a TREC run with a pushed model: rankpipe rerank MODEL RUN --queries Q "
        "--documents D",
        description="Rerank each query's candidates in a TREC run with a pushed model and "
        "write the new TREC run (to stdout unless --output). The scores are the model's "
        "rank_candidates signature's: the reranker fused with the run's scores as the Trainer "
        "chose, the ranking the RankingEvaluator blessed (--scores reranker: the model alone).",
    )
    p.add_argument(
        "model",
        help="a pushed SavedModel (<pusher.destination>/<version>) or a push destination "
        "(its newest version)",
    )
    p.add_argument("run", help="the TREC run to rerank (qid Q0 docid rank score runid)")
    p.add_argument("--queries", required=True, help="queries file or glob")
    p.add_argument("--documents", required=True, help="documents file or glob")
    p.add_argument(
        "--queries-format",
        help="beir_queries, trec_topics, msmarco_tsv or cranfield (default: from the first lines)",
    )
    p.add_argument(
        "--documents-format",
        help="beir_corpus, trec_sgml, msmarco_tsv or cranfield (default: from the first lines)",
    )
    p.add_argument("--output", help="write the run here (atomically: a temp file, then a rename)")
    p.add_argument(
        "--depth",
        type=int,
        help="rerank each query's top K candidates (trec_eval's order) and leave the rest "
        "out (default: all)",
        metavar="K",
    )
    p.add_argument("--runid", default="rankpipe", help="the run's runid column [rankpipe]")
    p.add_argument(
        "--scores",
        choices=("fused", "reranker"),
        default="fused",
        help="fused [default]: as the evaluator ranks (fusion, feedback as chosen); "
        "reranker: the model's own scores",
    )
    p.set_defaults(func=cmd_rerank)

    p = sub.add_parser("runs", help="past runs of a pipeline (newest first), from its MLMD store")
    p.add_argument(
        "pipeline",
        nargs="?",
        help="pipeline name (outputs/pipelines/NAME), pipeline root or metadata.sqlite; "
        "default: every pipeline under outputs/",
    )
    p.set_defaults(func=cmd_runs)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] != ["run"]:
        quiet_start_up()
    # eval/compare keep trec_eval's own flag syntax, so they bypass argparse here.
    if argv and argv[0] in ("eval", "compare"):
        from components.ranking_evaluator import eval_cli

        return (eval_cli.eval_main if argv[0] == "eval" else eval_cli.compare_main)(argv[1:])
    args = _parser().parse_args(argv)
    if args.command not in ("run", "runs"):  # `run` sets up its own console and log file
        # Each command prints its result alone: the libraries' INFO lines (TFX's "Using Any for
        # unsupported type", "tensorflow_io is not available", ...) are nothing a user can act
        # on; warnings and errors still show.
        logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(message)s")
    try:
        return args.func(args)
    except ConfigError as e:
        print(_config_error_block(str(e)), file=sys.stderr)
        return 2


def entry() -> None:
    """The `rankpipe` command (and `python -m pipelines.cli`): main(), then the exit.

    After `rankpipe run` the process ends with os._exit once its output and log are flushed:
    the interpreter's teardown after a pipeline run (finalizing TensorFlow's functions and
    models, Beam's and TFX's threads and caches) took 2.6 to 2.9 s of every run and did nothing
    a user needs: every artifact, MLMD record and log line is written before (docs/speed.md,
    "The pipeline's own cost"). Other commands exit normally."""
    argv = sys.argv[1:]
    code = main(argv)
    if argv[:1] == ["run"]:
        sys.stdout.flush()
        sys.stderr.flush()
        logging.shutdown()
        os._exit(code)
    sys.exit(code)


if __name__ == "__main__":
    entry()
