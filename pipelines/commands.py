"""The `rankpipe` commands: what each subcommand of pipelines/cli.py does (its `cmd_*`).

Each takes the parsed arguments and returns the exit code. Each imports the libraries it needs
(TFX, TensorFlow, Beam, MLMD) itself, so a command loads only its own.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import TYPE_CHECKING, Any

import yaml

from components.ranking_evaluator.constants import MAIN_METRIC, METRICS_FILE
from pipelines.interrupts import InterruptGuard
from rankcore.config_loader import ConfigError

if TYPE_CHECKING:
    from pipelines.config import PipelineConfig


def _load(args: argparse.Namespace, check_inputs: bool = True) -> PipelineConfig:
    from pipelines.config import load_config

    return load_config(args.config, args.set, check_inputs=check_inputs)


def _latest_artifact(store, type_name: str):
    artifacts = store.get_artifacts_by_type(type_name)
    return max(artifacts, key=lambda a: a.id) if artifacts else None


def run_summary(config: PipelineConfig) -> str:
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
                        block, code = config_error_block(str(e)), 2
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


def config_error_block(message: str) -> str:
    """A ConfigError's message as the block `rankpipe` prints (exit 2): the problems, then the
    fix."""
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
        root = os.path.dirname(os.path.abspath(path))
        try:
            store = runs.open_store(path)
        except FileNotFoundError as e:
            known = ", ".join(runs.pipelines_under(outputs)) or "none"
            print(f"rankpipe: {e}; pipelines under {outputs}: {known}", file=sys.stderr)
            return 1
        sizes = runs.tree_sizes(root)  # one walk: the header's total and every run's artifacts
        rows = runs.list_runs(store, root, sizes)
        on_disk = runs.human_size(sizes.get(os.path.normpath(root), 0))
        print(
            ("\n" if i else "")
            + f"{name}: {len(rows)} run(s), newest first ({path}; {on_disk} under {root})"
        )
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
