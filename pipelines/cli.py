"""The `rankpipe` command line.

rankpipe run CONFIG [--set key=value ...]        run the pipeline locally (LocalDagRunner)
rankpipe compile CONFIG --output FILE            write the Kubeflow PipelineSpec
rankpipe config show CONFIG [--set ...]          print the resolved config
rankpipe data demo OUT_DIR [--seed N]            write the demo collection
rankpipe eval QRELS RUN [trec_eval flags]        trec_eval-compatible metrics
rankpipe compare QRELS RUN_A RUN_B -m MEASURE    paired significance tests
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time

import yaml

from pipelines.config_loader import ConfigError


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

    store = metadata_store.MetadataStore(
        tfx.orchestration.metadata.sqlite_metadata_connection_config(config.runner.metadata_path)
    )
    evaluation = _latest_artifact(store, "ModelEvaluation")
    pushed = _latest_artifact(store, "PushedModel")
    lines = [f"rankpipe: pipeline {config.runner.pipeline_name!r} finished."]
    if evaluation is not None:
        with open(os.path.join(evaluation.uri, "metrics.json")) as f:
            metrics = json.load(f)
        main = metrics["main_metric"]
        agg = metrics["aggregate"]
        lines.append(
            f"Evaluation ({metrics['split']} split, {metrics['num_queries']} queries): "
            f"{'BLESSED' if metrics['blessed'] else 'NOT BLESSED'}"
        )
        shown = [m for m in (main, "map", "recip_rank", "P_10") if m in agg["candidate"]]
        lines.append(f"  {'measure':<14}{'first stage':>12}{'reranker':>12}")
        for m in dict.fromkeys(shown):
            lines.append(f"  {m:<14}{agg['first_stage'][m]:>12.4f}{agg['candidate'][m]:>12.4f}")
        lines += [f"  not blessed: {r}" for r in metrics["reasons"]]
        lines.append(f"Report: {os.path.join(evaluation.uri, 'report.md')}")
    if pushed is not None and pushed.custom_properties["pushed"].int_value == 1:
        lines.append(f"Pushed model: {pushed.custom_properties['pushed_destination'].string_value}")
    else:
        lines.append("Pushed model: none (the model was not blessed)")
    return "\n".join(lines)


def cmd_run(args: argparse.Namespace) -> int:
    from pipelines import local_runner

    config = _load(args)
    start = time.time()
    local_runner.run(config)
    print(run_summary(config))
    print(f"Total time: {time.time() - start:.0f}s; artifacts under {config.runner.pipeline_root}")
    return 0


def cmd_compile(args: argparse.Namespace) -> int:
    from pipelines import kubeflow_runner

    config = _load(args, check_inputs=False)
    kubeflow_runner.compile_pipeline(config, args.output)
    print(f"Wrote Kubeflow pipeline spec to {args.output}")
    return 0


def cmd_config_show(args: argparse.Namespace) -> int:
    import dataclasses

    config = _load(args)
    print(f"# resolved from {config.source}")
    print(yaml.safe_dump(dataclasses.asdict(config), sort_keys=False), end="")
    return 0


def cmd_data_demo(args: argparse.Namespace) -> int:
    from pipelines import demo_data

    paths = demo_data.generate(args.out_dir, args.seed, args.num_documents, args.num_queries)
    for name, path in paths.items():
        print(f"{name}: {path}")
    return 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="rankpipe", description=__doc__.split("\n\n")[0])
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
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("compile", help="compile the pipeline for Kubeflow")
    with_config(p)
    p.add_argument("--output", required=True, help="pipeline spec file to write")
    p.set_defaults(func=cmd_compile)

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
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    # eval/compare keep trec_eval's own flag syntax, so they bypass argparse here.
    if argv and argv[0] in ("eval", "compare"):
        from components.ranking_evaluator import eval_cli

        return (eval_cli.eval_main if argv[0] == "eval" else eval_cli.compare_main)(argv[1:])
    args = _parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    try:
        return args.func(args)
    except ConfigError as e:
        print(f"rankpipe: config error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
