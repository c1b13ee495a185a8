"""The corpus-vectors format: encoder identity, the shard records, the meta written last, and
the document tower composed as the dual encoder serves it."""

from __future__ import annotations

import math
import os

import numpy as np
import pytest
import tensorflow as tf

from rankcore import corpus_vectors as cv
from rankcore.encoders import hf_checkpoint


def _checkpoint(root, name: str, weights: bytes) -> str:
    directory = os.path.join(root, name)
    os.makedirs(directory)
    for file in hf_checkpoint.CHECKPOINT_FILES:
        with open(os.path.join(directory, file), "wb") as f:
            f.write(weights if file == "model.safetensors" else file.encode())
    return directory


def _write(uri: str, key: str, rows: list[tuple[str, tuple[int, ...], np.ndarray]]) -> None:
    os.makedirs(os.path.join(uri, key))
    path = os.path.join(uri, key, f"{cv.SHARD_PREFIX}-00000-of-00001{cv.SHARD_SUFFIX}")
    with tf.io.TFRecordWriter(path, tf.io.TFRecordOptions(compression_type="GZIP")) as w:
        for docid, ids, vector in rows:
            w.write(cv.to_example(docid, ids, vector))


def test_key_follows_the_files_not_the_path(tmp_path):
    a = _checkpoint(tmp_path, "a", b"weights")
    same = _checkpoint(tmp_path, "copy", b"weights")
    other = _checkpoint(tmp_path, "b", b"other weights")
    assert cv.EncoderSpec(a, 256).key() == cv.EncoderSpec(same, 256).key()
    assert cv.EncoderSpec(a, 256).key() != cv.EncoderSpec(other, 256).key()
    assert cv.EncoderSpec(a, 256).key() != cv.EncoderSpec(a, 128).key()
    assert cv.EncoderSpec(a, 256).key() != cv.EncoderSpec(a, 256, "mixed_bfloat16").key()


def test_meta_is_required_and_names_the_cause(tmp_path):
    with pytest.raises(FileNotFoundError, match="corpus_vectors.json"):
        cv.read_meta(str(tmp_path))
    cv.write_meta(str(tmp_path), cv.CorpusMeta())
    with pytest.raises(KeyError, match="no vectors of encoder abc"):
        cv.read_table(str(tmp_path), "abc")


def test_tower_composes_as_the_dual_encoder_serves(tmp_path):
    own_dir = _checkpoint(tmp_path, "own", b"own")
    companion_dir = _checkpoint(tmp_path, "companion", b"companion")
    own, companion = cv.EncoderSpec(own_dir, 8), cv.EncoderSpec(companion_dir, 8)
    rng = np.random.default_rng(0)
    docs = {"d1": (3, 4, 5), "d2": (6,), "d3": (7, 8)}
    vectors = {
        own.key(): {d: rng.normal(size=4).astype(np.float32) for d in docs},
        companion.key(): {d: rng.normal(size=6).astype(np.float32) for d in docs},
    }
    uri = str(tmp_path / "vectors")
    for key, by_doc in vectors.items():
        # d3 was cut differently for the companion: never a wrong vector, a miss
        ids = {d: (ids if (d, key) != ("d3", companion.key()) else (7,)) for d, ids in docs.items()}
        _write(uri, key, [(d, ids[d], v) for d, v in sorted(by_doc.items(), reverse=True)])
    cv.write_meta(
        uri,
        cv.CorpusMeta(
            tuple(
                cv.EncodedMeta(s.key(), s.checkpoint_dir, 8, "float32", 3, n)
                for s, n in ((own, 4), (companion, 6))
            )
        ),
    )
    table = cv.read_table(uri, own.key())
    assert table.docids == ("d1", "d2", "d3") and table.ids[0] == (3, 4, 5)

    tower = cv.DocumentTower.with_companion(own, companion, 0.3)
    model_dir = str(tmp_path / "model")
    os.makedirs(model_dir)
    tower.write(model_dir)
    parts = cv.DocumentTower.read(model_dir)
    assert parts == ((own.key(), math.sqrt(0.7)), (companion.key(), math.sqrt(0.3)))
    got = cv.vectors_by_ids(uri, parts)
    assert set(got) == {(3, 4, 5), (6,)}
    for docid in ("d1", "d2"):
        # trainer_module/models/dual_encoder.py _with_companion, in TensorFlow
        want = tf.concat(
            [
                math.sqrt(0.7) * tf.cast(vectors[own.key()][docid], tf.float32),
                math.sqrt(0.3) * tf.constant(vectors[companion.key()][docid]),
            ],
            axis=-1,
        ).numpy()
        np.testing.assert_array_equal(got[docs[docid]], want)

    alone_tower = cv.DocumentTower.with_companion(own, None, 0.0)
    assert alone_tower.parts == ((own, 1.0),)
    alone = cv.vectors_by_ids(uri, [(own.key(), 1.0)])
    np.testing.assert_array_equal(alone[(6,)], vectors[own.key()]["d2"])
    assert cv.DocumentTower.read(str(tmp_path)) is None
