import json
import os

import numpy as np
import pytest
import tensorflow as tf
import trainer_testdata

from trainer_module.train_results import write_results
from trainer_module.training import DivergenceError


def _weights(controller) -> list[np.ndarray]:
    opt_vars = []
    for opt in controller.optimizer.checkpoint_items().values():
        opt_vars += [v.numpy() for v in opt.variables]
    return [v.numpy() for v in controller.model.variables] + opt_vars


@pytest.mark.parametrize(
    "loss, fixture",
    [("pairwise_hinge", "examples_dir"), ("listwise_softmax", "listwise_examples_dir")],
)
def test_loss_falls_and_validation_runs(loss, fixture, request, transform_graph, tmp_path):
    examples = request.getfixturevalue(fixture)
    cfg = trainer_testdata.small_config(loss=loss, train_steps=40, validate_every=20)
    controller = trainer_testdata.make_controller(cfg, examples, transform_graph, str(tmp_path))
    result = controller.train()
    losses = [loss for _, loss, _ in controller.history]
    assert len(losses) == 40
    assert np.mean(losses[-8:]) < 0.8 * np.mean(losses[:8])
    assert result.steps == 40 and result.best_step in (20, 40)
    assert 0.0 < result.best_metric <= 1.0 and result.final_metric is not None
    assert os.listdir(tmp_path / "model_run" / "train")  # TensorBoard events
    path = write_results(result, str(tmp_path / "model_run"))
    with open(path) as f:
        data = json.load(f)
    assert {
        "steps",
        "best_step",
        "best_metric",
        "final_metric",
        "examples_per_sec",
        "peak_host_rss_mb",
    } <= set(data)
    # The curves the evaluation report draws: the mean loss of each log_every (10) window and
    # the dev metric of each validation (every 20 steps).
    assert [step for step, _ in data["loss_history"]] == [10, 20, 30, 40]
    for i, (_, mean_loss) in enumerate(data["loss_history"]):
        assert mean_loss == pytest.approx(np.mean(losses[10 * i : 10 * (i + 1)]))
    assert [step for step, _ in data["validation_history"]] == [20, 40]
    assert data["validation_history"][-1][1] == pytest.approx(result.final_metric)


def test_divergence_guard_names_step_and_loss(examples_dir, transform_graph, tmp_path):
    cfg = trainer_testdata.small_config(max_loss=1e-6)
    controller = trainer_testdata.make_controller(cfg, examples_dir, transform_graph, str(tmp_path))
    with pytest.raises(DivergenceError, match=r"step 1: loss [\d.e-]+ > max_loss 1e-06"):
        controller.train()
    assert controller.manager.latest_checkpoint is None  # nothing saved after divergence


def test_divergence_guard_catches_nan(examples_dir, transform_graph, tmp_path):
    cfg = trainer_testdata.small_config()
    controller = trainer_testdata.make_controller(cfg, examples_dir, transform_graph, str(tmp_path))
    original = controller.task.recipe.build_losses

    def nan_at_step_3(batch, outputs):
        return original(batch, outputs) * tf.where(controller.step >= 2, float("nan"), 1.0)

    controller.task.recipe.build_losses = nan_at_step_3
    with pytest.raises(DivergenceError, match="step 3: loss is nan"):
        controller.train()


@pytest.mark.parametrize("model", ["transformer"])  # knrm: see test_trainer_kill_resume
def test_resume_is_exact(model, examples_dir, transform_graph, tmp_path):
    """Killed after step 12 (last checkpoint at 10), re-run -> same weights as never killed."""
    cfg = trainer_testdata.small_config(
        model=model, train_steps=16, checkpoint_every=5, validate_every=8
    )
    straight = trainer_testdata.make_controller(
        cfg, examples_dir, transform_graph, str(tmp_path / "a")
    )
    result_a = straight.train()

    first = trainer_testdata.make_controller(
        cfg, examples_dir, transform_graph, str(tmp_path / "b")
    )
    first.train(stop_at=12)
    assert first.manager.latest_checkpoint.endswith("ckpt-10")
    second = trainer_testdata.make_controller(
        cfg, examples_dir, transform_graph, str(tmp_path / "b")
    )
    result_b = second.train()
    assert [s for s, *_ in second.history] == list(range(11, 17))
    for a, b in zip(_weights(straight), _weights(second), strict=True):
        np.testing.assert_array_equal(a, b)
    assert (result_a.best_step, result_a.best_metric) == (result_b.best_step, result_b.best_metric)


def test_early_stopping_and_best_model(examples_dir, transform_graph, tmp_path):
    cfg = trainer_testdata.small_config(
        train_steps=40,
        validate_every=2,
        early_stopping_patience=2,
        learning_rate=1e-9,
        encoder_learning_rate=1e-9,
    )
    controller = trainer_testdata.make_controller(cfg, examples_dir, transform_graph, str(tmp_path))
    result = controller.train()
    assert result.stopped_early and result.best_step == 2 and result.steps == 6
    assert controller.restore_best()


def test_grad_accumulation_matches_large_batch(examples_dir, transform_graph, tmp_path):
    """batch 4 x 2 accumulated micro-batches == batch 8 in one pass (same 8 groups/step)."""
    runs = []
    for name, batch, accum in (("big", 8, 1), ("accum", 4, 2)):
        cfg = trainer_testdata.small_config(
            batch_size=batch, grad_accumulation_steps=accum, train_steps=5, validate_every=0
        )
        c = trainer_testdata.make_controller(
            cfg, examples_dir, transform_graph, str(tmp_path / name)
        )
        c.train()
        runs.append(c)
    # Same loss and gradient at step 1 (same weights). Later steps are not compared: Adam's
    # g / (|g| + eps) turns float-rounding differences of near-zero gradients into +-lr.
    (_, loss_a, norm_a), (_, loss_b, norm_b) = runs[0].history[0], runs[1].history[0]
    assert loss_b == pytest.approx(loss_a, rel=1e-6)
    assert norm_b == pytest.approx(norm_a, rel=1e-5)
    losses = [[loss for _, loss, _ in c.history] for c in runs]
    np.testing.assert_allclose(losses[1], losses[0], rtol=1e-3)
