"""BERT cross-encoder from a (tiny, hand-written) Hugging Face safetensors checkpoint."""

import json
import os
import struct

import bert_testdata
import numpy as np
import pytest
import tensorflow as tf
import trainer_testdata

from rankcore.encoders import hf_checkpoint
from trainer_module.models import build_model
from trainer_module.optimization import split_variables
from trainer_module.run_fn import run_fn

# [CLS] / [SEP] away from the learned vocabulary's ids 2 / 3, as in real BERT vocabularies.
VOCAB = ["[PAD]", "[unused0]", "[UNK]", "a", "[CLS]", "[SEP]", "[MASK]"] + [
    f"t{i}" for i in range(25)
]
CLS_ID, SEP_ID = VOCAB.index("[CLS]"), VOCAB.index("[SEP]")


def _config(checkpoint_dir: str, **bert):
    return trainer_testdata.small_config(
        model="bert", bert={"checkpoint_dir": checkpoint_dir, **bert}
    )


def test_safetensors_reader_reads_the_binary_layout(tmp_path):
    path = str(tmp_path / "x.safetensors")
    arrays = {
        "a": np.arange(6, dtype=np.float32).reshape(2, 3) / 7,
        "half": np.array([1.5, -2.25], np.float16),
        "ids": np.array([[0, 1, 2**40]], np.int64),
    }
    bert_testdata.write_safetensors(path, arrays, {"half": "F16", "ids": "I64"})
    got = hf_checkpoint.read_safetensors(path)
    assert sorted(got) == ["a", "half", "ids"]  # __metadata__ skipped
    np.testing.assert_array_equal(got["a"], arrays["a"])
    assert got["half"].dtype == np.float16 and got["half"].tolist() == [1.5, -2.25]
    assert got["ids"].tolist() == [[0, 1, 2**40]]

    # bfloat16: the high 16 bits of a float32.
    bf16 = (np.array([1.0, -3.5], np.float32).view(np.uint32) >> 16).astype("<u2")
    header = json.dumps({"b": {"dtype": "BF16", "shape": [2], "data_offsets": [0, 4]}}).encode()
    data = struct.pack("<Q", len(header)) + header + bf16.tobytes()
    assert hf_checkpoint.parse_safetensors(data)["b"].tolist() == [1.0, -3.5]

    bad = json.dumps({"b": {"dtype": "F32", "shape": [2], "data_offsets": [0, 4]}}).encode()
    with pytest.raises(ValueError, match=r"tensor b: data_offsets \[0, 4\] do not hold F32"):
        hf_checkpoint.parse_safetensors(struct.pack("<Q", len(bad)) + bad + b"\0" * 8)
    bad = json.dumps({"b": {"dtype": "F32", "shape": [2]}}).encode()
    with pytest.raises(ValueError, match="tensor b: malformed header entry"):
        hf_checkpoint.parse_safetensors(struct.pack("<Q", len(bad)) + bad)
    with pytest.raises(ValueError, match="header size"):
        hf_checkpoint.parse_safetensors(struct.pack("<Q", 999) + b"{}")


@pytest.mark.parametrize("prefix, pooler", [("", True), ("bert.", False)])
def test_loaded_variables_equal_checkpoint(prefix, pooler, tmp_path):
    tensors = bert_testdata.write_checkpoint(
        str(tmp_path), VOCAB, pooler=pooler, prefix=prefix, seed=1
    )
    model = build_model(_config(str(tmp_path)), len(VOCAB), 8, 16, vocab=VOCAB)
    mapping = model.checkpoint_variables()
    assert set(mapping) == set(tensors)  # every checkpoint weight, position_ids aside
    for name, (variable, transpose) in mapping.items():
        want = tensors[name].T if transpose else tensors[name]
        np.testing.assert_array_equal(variable.numpy(), want, err_msg=name)
    # The whole pretrained encoder is the "encoder" group (encoder_learning_rate); only the
    # new head is not: score, plus the pooler when the checkpoint has none.
    groups = split_variables(model.trainable_variables, ["embedding", "encoder"], [])
    loaded = {v.ref() for v, _ in mapping.values()}
    assert {v.ref() for v in groups.encoder} == loaded
    head = sorted(v.name for v in groups.rest)
    new_pooler = [] if pooler else ["bert/pooler/bias:0", "bert/pooler/kernel:0"]
    assert head == new_pooler + ["bert/score/bias:0", "bert/score/kernel:0"]


@pytest.mark.parametrize("pooler", [True, False])
def test_forward_matches_numpy_reference(pooler, tmp_path):
    tensors = bert_testdata.write_checkpoint(str(tmp_path), VOCAB, pooler=pooler, seed=2)
    model = build_model(_config(str(tmp_path)), len(VOCAB), 8, 16, vocab=VOCAB)
    # A head with non-trivial values, so the comparison covers pooler and score too.
    rng = np.random.default_rng(3)
    model.score.kernel.assign(rng.normal(0, 0.5, (32, 1)).astype(np.float32))
    model.score.bias.assign([0.25])
    head = {"score.kernel": model.score.kernel.numpy(), "score.bias": model.score.bias.numpy()}
    if not pooler:
        # The new pooler's initializer is unseeded: set it too, or the figure compared (and
        # whether it is far enough from 0, asserted below) changes from run to run.
        model.pooler.kernel.assign(rng.normal(0, 0.2, (32, 32)).astype(np.float32))
        model.pooler.bias.assign(rng.normal(0, 0.1, 32).astype(np.float32))
        head["pooler.dense.weight"] = model.pooler.kernel.numpy().T
        head["pooler.dense.bias"] = model.pooler.bias.numpy()
    queries = [[7, 8, 9], [10], [11, 3, 12, 13]]
    docs = [[14, 15, 16, 17, 18], [19, 20], [21]]
    # Batch padding puts [PAD]s inside [CLS] q [SEP] d [SEP]: scores must not see them.
    q = tf.constant([r + [0] * (6 - len(r)) for r in queries], tf.int64)
    d = tf.constant([r + [0] * (7 - len(r)) for r in docs], tf.int64)
    got = model((q, d), training=False).numpy()
    want = bert_testdata.reference_scores(
        tensors, bert_testdata.TINY_CONFIG, head, CLS_ID, SEP_ID, queries, docs
    )
    assert np.abs(want).max() > 0.1  # not a degenerate (all ~0) comparison
    np.testing.assert_allclose(got, want, atol=1e-5)

    # Hidden states at every real position, not just the score.
    hidden, mask, _ = model.encode(q[:1], d[:1])
    tokens = [CLS_ID, *queries[0], SEP_ID, *docs[0], SEP_ID]
    ref = bert_testdata.reference_hidden(
        tensors, bert_testdata.TINY_CONFIG, tokens, [0] * 5 + [1] * 6
    )
    real = tf.boolean_mask(hidden[0], mask[0]).numpy()
    np.testing.assert_allclose(real, ref, atol=1e-5)


def test_vocabulary_must_be_the_checkpoints(tmp_path):
    bert_testdata.write_checkpoint(str(tmp_path), VOCAB)
    with pytest.raises(ValueError, match=r"has 40 tokens, the checkpoint's vocab.txt has 32"):
        build_model(_config(str(tmp_path)), 40, 8, 16)
    other = VOCAB[:3] + ["b"] + VOCAB[4:]
    with pytest.raises(ValueError, match=r"at id 3 \('b' vs 'a'\).*datagen.vocab.vocab_file"):
        build_model(_config(str(tmp_path)), len(VOCAB), 8, 16, vocab=other)
    with pytest.raises(ValueError, match="max_position_embeddings 64"):
        build_model(_config(str(tmp_path)), len(VOCAB), 32, 40)
    with pytest.raises(ValueError, match="bert.checkpoint_dir is required"):
        trainer_testdata.small_config(model="bert")


def test_run_fn_rejects_a_transform_graph_of_another_vocabulary(
    examples_dir, transform_graph, tmp_path
):
    ckpt = str(tmp_path / "ckpt")
    bert_testdata.write_checkpoint(ckpt, VOCAB)
    cfg = _config(ckpt)
    args = trainer_testdata.fn_args(tmp_path, examples_dir, transform_graph, cfg, 2)
    n = trainer_testdata.vocab_size(transform_graph)
    with pytest.raises(ValueError, match=f"TransformGraph's vocabulary has {n} tokens"):
        run_fn(args)
    assert not os.path.exists(tmp_path / "Trainer")  # failed before any training


def test_training_updates_encoder_at_encoder_learning_rate(trained_bert):
    controller, result, before = trained_bert
    assert result.steps == 5 and len(controller.history) == 5
    assert all(np.isfinite(loss) and loss > 0 for _, loss, _ in controller.history)
    assert 0.0 < result.final_metric <= 1.0  # dev validation at the last step ran
    groups = controller.optimizer.groups
    assert {v.ref() for v in groups.encoder} == {
        v.ref() for v, _ in controller.model.checkpoint_variables().values()
    }
    lrs = {k: float(v) for k, v in controller.optimizer.learning_rates().items()}
    # Linear decay over 5 steps: the 5th step (index 4) ran at peak * 1/5.
    assert lrs == pytest.approx({"encoder_learning_rate": 1e-3 / 5, "learning_rate": 1e-2 / 5})
    after = controller.model.checkpoint_variables()
    moved = {n for n, (v, _) in after.items() if not np.array_equal(v.numpy(), before[n])}
    assert {"encoder.layer.1.output.dense.weight", "embeddings.word_embeddings.weight"} <= moved
