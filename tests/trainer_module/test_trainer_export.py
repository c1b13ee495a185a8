import json
import os

import numpy as np
import pytest
import tensorflow as tf
import tfx.v1 as tfx
import trainer_testdata

from pipelines import console
from trainer_module import inputs
from trainer_module import run_fn as run_fn_module
from trainer_module.checkpointing import checkpoint_dir, run_fingerprint
from trainer_module.export import export_serving_model
from trainer_module.run_fn import run_fn

QUERIES = ["w01 w02 w03", "W10 w11", "w20", "w30 w31 w32 w33 w34 w35 w36 w37 w38 w39", "zzz w05"]
DOCS = [
    "w01 w02 w50 w51",
    "w12 w13 w14",
    "w20 w20 w21 w22 w23 w24 w25 w26 w27 w28 w29 w40 w41 w42 w43 w44 w45 w46 w47",
    "w30",
    "unknownword w05s",
]


def _pad(rows: list[list[int]], width: int) -> tf.Tensor:
    rows = [r[:width] for r in rows]
    longest = max(1, max(len(r) for r in rows))
    return tf.constant([r + [0] * (longest - len(r)) for r in rows], tf.int64)


@pytest.fixture(scope="module", params=["knrm", "conv_knrm", "transformer", "bert"])
def exported(request, examples_dir, transform_graph, tmp_path_factory):
    work = tmp_path_factory.mktemp(f"export_{request.param}")
    if request.param == "bert":  # 5 steps too, trained once for the BERT tests
        controller = request.getfixturevalue("trained_bert")[0]
    else:
        cfg = trainer_testdata.small_config(model=request.param, train_steps=5, validate_every=0)
        controller = trainer_testdata.make_controller(cfg, examples_dir, transform_graph, str(work))
        controller.train()
    serving_dir = str(work / "model" / "Format-Serving")
    os.makedirs(serving_dir)  # an existing target is replaced, not merged into
    export_serving_model(
        controller.model,
        transform_graph,
        trainer_testdata.MAX_Q,
        trainer_testdata.MAX_D,
        serving_dir,
    )
    assert not [p for p in os.listdir(work / "model") if ".tmp-" in p]
    return controller, tf.saved_model.load(serving_dir)


def test_serving_default_matches_training_scores(exported, transform_graph):
    controller, loaded = exported
    got = loaded.signatures["serving_default"](
        query=tf.constant(QUERIES), document=tf.constant(DOCS)
    )["score"].numpy()
    q = _pad(trainer_testdata.tokenize(transform_graph, QUERIES), trainer_testdata.MAX_Q)
    d = _pad(trainer_testdata.tokenize(transform_graph, DOCS), trainer_testdata.MAX_D)
    want = controller.score(q, d).numpy()
    assert got.shape == (len(QUERIES),)
    np.testing.assert_allclose(got, want, atol=1e-5)


def test_score_examples_matches_training_scores(exported, examples_dir):
    controller, loaded = exported
    records = trainer_testdata.read_records(trainer_testdata.split_pattern(examples_dir, "dev")[0])[
        :40
    ]
    got = loaded.signatures["score_examples"](examples=tf.constant(records))["score"].numpy()
    parsed = [
        inputs.parse_group(tf.constant(r), trainer_testdata.MAX_Q, trainer_testdata.MAX_D)
        for r in records
    ]
    q = _pad([list(p["query"].numpy()) for p in parsed], trainer_testdata.MAX_Q)
    d = _pad([list(p["docs"][0].numpy()) for p in parsed], trainer_testdata.MAX_D)
    np.testing.assert_allclose(got, controller.score(q, d).numpy(), atol=1e-5)


def test_run_fn_end_to_end_and_resume(examples_dir, transform_graph, tmp_path, monkeypatch):
    cfg = trainer_testdata.small_config(train_steps=10, validate_every=5, checkpoint_every=5)

    def fn_args(execution: int) -> tfx.components.FnArgs:
        return trainer_testdata.fn_args(tmp_path, examples_dir, transform_graph, cfg, 10, execution)

    args = fn_args(7)
    custom = args.custom_config
    ckpts = checkpoint_dir(
        args.model_run_dir, run_fingerprint(args.train_files, transform_graph, custom, 10)
    )
    assert ckpts.startswith(str(tmp_path / "Trainer" / "checkpoints"))
    result = run_fn(args)
    assert result.steps == 10
    assert tf.saved_model.contains_saved_model(args.serving_model_dir)
    with open(os.path.join(args.model_run_dir, "train_results.json")) as f:
        assert json.load(f)["best_step"] == result.best_step
    # A finished Trainer keeps its SavedModel and results, not its checkpoints.
    assert not tf.io.gfile.exists(ckpts)

    # An execution that fails after training (here: in its export) keeps them...
    def failing_export(*_args, **_kwargs):
        raise OSError("disk full")

    with monkeypatch.context() as m:
        m.setattr(run_fn_module, "export_serving_model", failing_export)
        with pytest.raises(OSError, match="disk full"):
            run_fn(fn_args(8))
    assert tf.train.latest_checkpoint(ckpts).endswith("ckpt-10")

    # ...and its retry (new id, same inputs) resumes: nothing left to train, same model.
    retry = fn_args(9)
    again = run_fn(retry)
    assert again.steps == 10 and again.best_step == result.best_step
    assert again.best_metric == result.best_metric
    # ...and it resumed rather than retrained (retraining from step 0 gives the same weights):
    # from the final checkpoint, with Adam's iteration count restored, and no batch re-read.
    assert result.resumed_from is None
    assert again.resumed_from is not None, "the retry retrained from step 0"
    assert again.resumed_from["step"] == 10
    assert again.resumed_from["checkpoint"] == "ckpt-10"
    iterations = again.resumed_from["optimizer_iterations"]
    assert iterations and set(iterations.values()) == {10}, iterations
    assert again.loss_history == [] and again.validation_history == []
    with open(os.path.join(retry.model_run_dir, "train_results.json")) as f:
        assert json.load(f)["resumed_from"] == again.resumed_from
    assert not tf.io.gfile.exists(ckpts)  # finished now
    scores = [
        tf.saved_model.load(a.serving_model_dir)
        .signatures["serving_default"](query=tf.constant(QUERIES), document=tf.constant(DOCS))[
            "score"
        ]
        .numpy()
        for a in (args, retry)
    ]
    np.testing.assert_array_equal(scores[0], scores[1])


def test_keep_finished_checkpoints_keeps_them(examples_dir, transform_graph, tmp_path):
    cfg = trainer_testdata.small_config(
        train_steps=4, validate_every=0, checkpoint_every=4, keep_finished_checkpoints=True
    )
    args = trainer_testdata.fn_args(tmp_path, examples_dir, transform_graph, cfg, 4)
    custom = args.custom_config
    run_fn(args)
    ckpts = checkpoint_dir(
        args.model_run_dir, run_fingerprint(args.train_files, transform_graph, custom, 4)
    )
    assert tf.train.latest_checkpoint(ckpts).endswith("ckpt-4")


def test_run_fn_divergence_exports_nothing(examples_dir, transform_graph, tmp_path):
    cfg = trainer_testdata.small_config(max_loss=1e-6)
    args = trainer_testdata.fn_args(tmp_path, examples_dir, transform_graph, cfg, 5)
    with pytest.raises(Exception, match="step 1") as info:
        run_fn(args)
    # What `rankpipe run` prints for it: the error named, and the learning-rate fix.
    name, _, fix = console.describe_error(info.value)
    assert name == "DivergenceError"
    assert fix and "lower trainer.learning_rate" in fix
    assert not os.path.exists(args.serving_model_dir)
