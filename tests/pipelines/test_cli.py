"""The `rankpipe` command as a person meets it: --help, the console of a real demo run, the
error blocks (bad record, bad config) and `rankpipe runs`.

The demo runs are the two shared with the evaluator and pusher tests
(tests/components/ranking_evaluator/demo_pipeline.py: `rankpipe run demo` in a subprocess, made
once per test session), so the console checks cost no extra pipeline run.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "components" / "ranking_evaluator"))
from demo_pipeline import DemoRuns, demo_runs  # noqa: E402

COMMANDS = ("run", "compile", "submit", "config", "data", "eval", "compare", "rerank", "runs")


def _rankpipe(*args: str, env: dict | None = None, timeout: int = 600):
    return subprocess.run(
        [sys.executable, "-m", "pipelines.cli", *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


@pytest.fixture(scope="session")
def demo(tmp_path_factory: pytest.TempPathFactory) -> DemoRuns:
    return demo_runs(tmp_path_factory.mktemp("rankpipe-demo-runs"))


def test_help_lists_every_command_with_one_line() -> None:
    result = _rankpipe("--help")
    assert result.returncode == 0
    listed = {}
    for line in result.stdout.splitlines():
        m = re.match(r"^    (\w+) +(\S.*)$", line)
        if m:
            listed[m.group(1)] = m.group(2)
    assert set(COMMANDS) <= set(listed), result.stdout
    # `rankpipe eval --help` still reaches trec_eval's own usage (not argparse's stub).
    eval_help = _rankpipe("eval", "--help")
    assert re.search(r"^  -J +evaluate over judged documents only$", eval_help.stdout, re.M)
    assert "--qrels-format" in eval_help.stdout


def test_config_error_is_a_short_block_with_exit_2(tmp_path: Path) -> None:
    result = _rankpipe("run", "demo", "--set", "trainer.train_steps=many")
    assert result.returncode == 2
    assert result.stdout == ""
    # The value came from the --set, not from demo.yaml: the --set is named.
    assert result.stderr.splitlines() == [
        "rankpipe: config error: --set trainer.train_steps: expected an integer, got str 'many'",
        "  fix:   change the value of --set trainer.train_steps=... (or leave that --set out)",
    ]  # no TensorFlow start-up lines, no traceback


@pytest.mark.e2e
def test_bad_record_fails_with_a_short_block_and_the_fix(tmp_path: Path) -> None:
    from pipelines import demo_data

    paths = demo_data.generate(str(tmp_path / "collection"), 13, 120, 20)
    with open(paths["qrels"], "a") as f:
        f.write("Q1 0 D-NOT-IN-CORPUS 1\n")
    bad_line = len(Path(paths["qrels"]).read_text().splitlines())
    env = dict(os.environ, RANKPIPE_OUTPUTS=str(tmp_path / "outputs"))
    result = _rankpipe(
        "run",
        "demo",
        "--set",
        "runner.pipeline_name=bad-record",
        "--set",
        "runner.beam.direct_running_mode=in_memory",
        "--set",
        "collection.demo.enabled=false",  # a collection of the user's: read, never generated
        *[
            x
            for key in ("documents", "queries", "qrels")
            for x in ("--set", f"collection.{key}={paths[key]}")
        ],
        env=env,
    )
    assert result.returncode == 1, result.stderr
    lines = result.stderr.splitlines()
    assert lines[0] == "rankpipe: the run FAILED in RankingDataGen."
    assert lines[1].startswith(f"  error: BadRecordError: {paths['qrels']}:{bad_line}: ")
    assert "D-NOT-IN-CORPUS" in lines[1]
    assert lines[2].startswith("  fix:   ") and lines[2].endswith(
        "--set datagen.on_bad_record=skip"
    )
    log = re.fullmatch(r"  log:   (\S+) \(full traceback\)", lines[3])
    assert log and len(lines) == 4
    assert "Traceback" not in result.stdout + result.stderr
    assert result.stdout.splitlines()[-1].split()[1:3] == ["RankingDataGen", "FAILED"]
    text = Path(log.group(1)).read_text()
    assert "Traceback (most recent call last)" in text and "BadRecordError" in text


@pytest.mark.e2e
def test_demo_run_console_is_short_and_the_log_is_full(demo: DemoRuns) -> None:
    out = demo.first.stdout.splitlines()
    summary_at = next(i for i, line in enumerate(out) if line.startswith("rankpipe: pipeline "))
    before = out[:summary_at]
    assert len(before) < 40, "\n".join(before)
    assert demo.first.stderr == ""  # TF, absl, Beam: all in the log file
    components = re.findall(r"^ *\[\d+/(\d+)\] (\w+) +running$", "\n".join(before), re.M)
    total = int(components[0][0])
    names = [name for _, name in components]
    assert len(names) == total and {"RankingDataGen", "Trainer", "RankingEvaluator"} <= set(names)
    ends = {
        m.group(1): m.group(2)
        for m in re.finditer(
            r"^ *\[\d+/\d+\] (\w+) +done +[\d.]+s(?:  (.*))?$", "\n".join(before), re.M
        )
    }
    assert set(ends) == set(names)
    assert re.match(
        r"[\d,]+ examples written \(train [\d,]+, dev [\d,]+, test [\d,]+\)", ends["RankingDataGen"]
    )
    assert re.match(
        r"dev ndcg_cut_10 0\.\d{4} \(best 0\.\d{4} at step \d+\), 120 steps", ends["Trainer"]
    )
    main = demo.first.metrics["main_metric"]
    assert ends["RankingEvaluator"].startswith(f"{main} ") and "BLESSED" in ends["RankingEvaluator"]
    pushed = demo.first.pushed.custom_properties["pushed_version"]
    assert ends["Pusher"] == f"pushed version {pushed.int_value or pushed.string_value}"
    assert any(re.match(r" +Trainer step 120/120  loss \d", line) for line in before)

    log_line = next(line for line in out if line.startswith("Log: "))
    log = Path(log_line[len("Log: ") :])
    assert log.parent == demo.pipeline_root / "logs"
    text = log.read_text()
    assert "Component Pusher is finished." in text  # TFX's own records
    assert "cpu_feature_guard" in text or "tensorflow/core" in text  # TensorFlow's C++ log
    assert "step 120/120 loss=" in text  # the Trainer's full log line


@pytest.mark.e2e
def test_runs_lists_both_demo_runs_newest_first(demo: DemoRuns) -> None:
    env = dict(os.environ, RANKPIPE_OUTPUTS=str(demo.outputs))
    result = _rankpipe("runs", demo.pipeline_root.name, env=env)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith(f"{demo.pipeline_root.name}: ") and "run(s)" in lines[0]
    header, rows = lines[1], lines[2:]
    assert header.split()[:2] == ["when", "collection"]
    # Newest first: run 2 (121 steps) above run 1 (120 steps); other tests may add later runs.
    second = next(i for i, r in enumerate(rows) if "knrm, 121 steps" in r)
    first_row = next(i for i, r in enumerate(rows) if "knrm, 120 steps" in r)
    assert second < first_row
    for row, run in ((rows[second], demo.second), (rows[first_row], demo.first)):
        main = run.metrics["main_metric"]
        cand = run.metrics["aggregate"]["candidate"][main]
        first = run.metrics["aggregate"]["first_stage"][main]
        assert f"{main} {cand:.4f} vs {first:.4f}" in row
        assert " demo " in f" {row} "
        assert ("not blessed" not in row) == run.metrics["blessed"]
        version = run.pushed.custom_properties["pushed_version"]
        assert str(version.int_value or version.string_value) in row
    # What each run's own executions wrote: the first wrote every artifact, the second (its
    # RankingDataGen cached) only the Trainer's and what follows it.
    assert header.split()[-1] == "wrote"
    sizes = [_bytes(rows[i].rsplit(None, 2)[-2:]) for i in (first_row, second)]
    assert sizes[0] > sizes[1] > 0
    usage = " ".join(_rankpipe("runs", "--help", env=env).stdout.split())  # argparse wraps it
    assert "remove a pipeline's directory whole" in usage
    # The same table from the store's path.
    by_path = _rankpipe("runs", str(demo.pipeline_root / "metadata.sqlite"), env=env)
    assert by_path.stdout.splitlines()[1:] == lines[1:]


def _bytes(cells: list[str]) -> float:
    """A `wrote` cell ("2.2 MB", split in two) as bytes."""
    value, unit = cells
    return float(value) * 1024 ** ["B", "KB", "MB", "GB"].index(unit)


def test_version_is_the_installed_projects() -> None:
    from importlib import metadata

    result = _rankpipe("--version")
    assert (result.returncode, result.stderr) == (0, "")
    assert result.stdout == f"rankpipe {metadata.version('rankpipe')}\n"


def test_config_show_is_quick_and_quiet() -> None:
    """`config show` loads the config alone: no TensorFlow, Beam or TFX import (they took 11 s
    and printed 21 lines of start-up noise), no warning lines."""
    probe = (
        "import sys; from pipelines import cli; code = cli.main(['config', 'show', 'demo']); "
        "heavy = [m for m in ('tensorflow', 'apache_beam', 'tfx') if m in sys.modules]; "
        "print('heavy:', heavy, file=sys.stderr); sys.exit(code)"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr == "heavy: []\n"
    start = time.monotonic()
    result = _rankpipe("config", "show", "demo")
    seconds = time.monotonic() - start
    assert result.returncode == 0 and result.stderr == ""
    assert result.stdout.startswith("# resolved from ") and "collection:" in result.stdout
    assert not [line for line in result.stdout.splitlines() if "Warning" in line]
    assert seconds < 10, f"rankpipe config show demo took {seconds:.1f} s"  # about 1 s idle


def test_other_commands_print_no_library_noise(shared_data: Path, tmp_path: Path) -> None:
    ref = shared_data / "trec_eval"
    env = dict(os.environ, RANKPIPE_OUTPUTS=str(tmp_path))
    for argv, code in (
        (["--help"], 0),
        (["eval", "-m", "nDCG@10", str(ref / "qrels.test"), str(ref / "results.test")], 0),
        (["compare", str(ref / "qrels.test"), str(ref / "results.test"),
          str(ref / "results.trunc"), "-m", "AP"], 0),
        (["rerank", "--help"], 0),
        (["runs"], 1),  # no pipeline has run under the empty outputs: one line, no noise
    ):  # fmt: skip
        result = _rankpipe(*argv, env=env)
        assert result.returncode == code, (argv, result.stderr)
        noise = [
            line
            for line in (result.stdout + result.stderr).splitlines()
            if "Warning" in line or "tensorflow/" in line or line.startswith("WARNING")
        ]
        assert noise == [], argv
        if code == 0:
            assert result.stderr == "", argv
