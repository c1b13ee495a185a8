"""The loop's parts on their own: the progress window (training._Progress), the dual encoder's
towers (towers.py) and the checkpoint models' shared opening (models/encoder_model.py)."""

from __future__ import annotations

import logging

import pytest
import tensorflow as tf
import tf_keras as keras
import trainer_testdata

from trainer_module import towers
from trainer_module.models.encoder_model import open_model_checkpoint
from trainer_module.recipes import recipe_for
from trainer_module.training import _Progress


def _out(loss: float, examples: int) -> dict[str, tf.Tensor]:
    return {
        "loss": tf.constant(loss),
        "grad_norm": tf.constant(1.5),
        "examples": tf.constant(examples),
    }


def test_progress_logs_each_window_and_excludes_the_first_step_from_throughput(caplog):
    progress = _Progress(start=4, total_steps=10, writer=tf.summary.create_noop_writer())
    caplog.set_level(logging.INFO)
    for loss in (1.0, 3.0):  # steps 5 and 6
        progress.add(_out(loss, 8))
    progress.log(6, _out(3.0, 8), {"learning_rate": tf.constant(0.01)})
    progress.add(_out(5.0, 8))
    progress.log(7, _out(5.0, 8), {"learning_rate": 0.01})
    # Each point is the mean loss of the steps since the previous one.
    assert progress.loss_history == [[6, 2.0], [7, 5.0]]
    # The first step of the session (tracing) is left out of the throughput.
    assert progress.steady_examples == 16
    assert progress.examples_per_sec(progress.steady_t0 - 1.0) == 0.0
    assert progress.examples_per_sec(progress.steady_t0 + 2.0) == pytest.approx(8.0)
    records = [r for r in caplog.records if hasattr(r, "rankpipe_progress")]
    assert [r.rankpipe_progress["step"] for r in records] == [6, 7]
    assert records[0].rankpipe_progress["total"] == 10
    assert records[0].getMessage().startswith("step 6/10 loss=3.0000 grad_norm=1.500 ")
    assert "learning_rate=0.01 " in records[0].getMessage()


def test_a_model_without_towers_has_no_embed_functions_nor_frozen_tower():
    model = keras.Sequential([keras.layers.Dense(1)])
    assert towers.embed_fns(model, "knrm") is None  # the registry says knrm has no towers
    cfg = trainer_testdata.small_config()
    assert recipe_for(cfg).document_tower(trainer_testdata.MAX_D) is None
    assert recipe_for(cfg).document_cache() is None


@pytest.mark.parametrize("model", ["bert", "dual_encoder"])
def test_a_checkpoint_model_needs_its_checkpoint_dir(model):
    cfg = getattr(trainer_testdata.small_config(), model)
    with pytest.raises(ValueError, match=f"trainer config: {model}.checkpoint_dir is required"):
        open_model_checkpoint(model, cfg, 10, None, 8)


def test_the_corpus_vectors_uri_is_no_part_of_the_run_fingerprint():
    """A Trainer retried after the CorpusEncoder ran again (another artifact URI, the same
    vectors) resumes the killed run's checkpoints; any other custom_config change does not."""
    from trainer_module.checkpointing import CORPUS_VECTORS_URI, run_fingerprint

    custom = {"trainer": {"model": "knrm"}, "max_doc_length": 8}
    base = run_fingerprint(["t"], "tg", custom, 5)
    assert run_fingerprint(["t"], "tg", {**custom, CORPUS_VECTORS_URI: "/a"}, 5) == base
    assert run_fingerprint(["t"], "tg", {**custom, "max_doc_length": 9}, 5) != base
