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
import logging
import os
import sys
import warnings

from pipelines.commands import (
    cmd_compile,
    cmd_config_show,
    cmd_data_demo,
    cmd_init,
    cmd_rerank,
    cmd_run,
    cmd_runs,
    cmd_submit,
    config_error_block,
)
from rankcore.config_loader import ConfigError


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

    p = sub.add_parser(
        "runs",
        help="past runs of a pipeline (newest first), from its MLMD store",
        description="One row per run; `wrote` is what the run's own executions wrote (their "
        "artifacts). To free the disk, remove a pipeline's directory whole: its runs, cache and "
        "metadata go together (removing one run's artifacts would leave the cache pointing at "
        "files that are gone).",
    )
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
        print(config_error_block(str(e)), file=sys.stderr)
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
