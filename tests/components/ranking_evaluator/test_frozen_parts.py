"""A fold model exported as its trained query tower (query_tower.json, complete false) is
scored by the evaluator with the frozen parts of the run's served model: its query vectors are
its own signature's values followed by the rest of the served model's, its documents the served
model's (embedding._LoadedModel.embed). Scored so (scoring.score_split, frozen_from), it ranks
exactly as the same model exported whole; a served model with other frozen parts is refused
(frozen_parts.frozen_parts_model), naming both."""

from __future__ import annotations

import json
import os
from pathlib import Path

import apache_beam as beam
import numpy as np
import pytest
import tensorflow as tf

from components.ranking_evaluator import scoring
from components.ranking_evaluator.frozen_parts import frozen_parts_model
from rankcore import example_format as fmt
from rankcore.constants import EMBED_DOC_SIGNATURE, EMBED_QUERY_SIGNATURE, EMBEDDING_OUTPUT
from rankcore.corpus_vectors import QUERY_TOWER_FILE

VOCAB, WIDTH, OWN, FROZEN = 30, 6, 4, 5  # token ids, their vectors, the own / frozen parts
A, B = np.sqrt(0.7), np.sqrt(0.3)  # the own and frozen parts' scales
_IDS = tf.TensorSpec([None, None], tf.int64, name="ids")


class _Model(tf.Module):
    """A dual encoder with a frozen part: a text's mean token vector through a map per tower,
    L2-normalised. `parts` "whole": query [A own, B frozen], document [A doc, B frozen];
    "own": the query's own part only (what a fold model exports)."""

    def __init__(self, query_seed: int, parts: str):
        super().__init__()
        shared = np.random.default_rng(0)
        self.table = tf.Variable(shared.normal(size=[VOCAB, WIDTH]).astype(np.float32))
        self.doc_map = tf.Variable(shared.normal(size=[WIDTH, OWN]).astype(np.float32))
        self.frozen_map = tf.Variable(shared.normal(size=[WIDTH, FROZEN]).astype(np.float32))
        own = np.random.default_rng(query_seed).normal(size=[WIDTH, OWN])
        self.query_map = tf.Variable(own.astype(np.float32))
        self.parts = parts

    def _tower(self, ids: tf.Tensor, matrix: tf.Variable) -> tf.Tensor:
        mask = tf.cast(ids > 0, tf.float32)[..., None]
        mean = tf.reduce_sum(tf.gather(self.table, ids) * mask, 1) / tf.maximum(
            tf.reduce_sum(mask, 1), 1.0
        )
        return tf.math.l2_normalize(tf.matmul(mean, matrix), axis=-1)

    @tf.function(input_signature=[_IDS])
    def embed_query_ids(self, ids: tf.Tensor) -> dict[str, tf.Tensor]:
        own = A * self._tower(ids, self.query_map)
        if self.parts == "own":
            return {EMBEDDING_OUTPUT: own}
        return {EMBEDDING_OUTPUT: tf.concat([own, B * self._tower(ids, self.frozen_map)], -1)}

    @tf.function(input_signature=[_IDS])
    def embed_doc_ids(self, ids: tf.Tensor) -> dict[str, tf.Tensor]:
        doc = A * self._tower(ids, self.doc_map)
        return {EMBEDDING_OUTPUT: tf.concat([doc, B * self._tower(ids, self.frozen_map)], -1)}


def _save(module: _Model, directory: Path, complete: bool | None, identity: str = "same") -> str:
    signatures = {EMBED_QUERY_SIGNATURE: module.embed_query_ids}
    if complete is not False:
        signatures[EMBED_DOC_SIGNATURE] = module.embed_doc_ids
    tf.saved_model.save(module, str(directory), signatures=signatures)
    if complete is not None:
        tower = {"own_dims": OWN, "complete": complete, "frozen_identity": identity}
        tower["frozen"] = [{"checkpoint_dir": "/ckpt/frozen", "max_length": 8, "scale": B}]
        (directory / QUERY_TOWER_FILE).write_text(json.dumps(tower))
    return str(directory)


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """ "served": the run's served model (whole, its own query tower seed 1); "fold": a fold
    model (query tower seed 2) exported as its tower; "fold_whole": the same fold model
    exported whole; "other": a served model with other frozen parts; "plain": a model without
    query_tower.json."""
    root = tmp_path_factory.mktemp("frozen-parts")
    return {
        "served": _save(_Model(1, "whole"), root / "served", True),
        "fold": _save(_Model(2, "own"), root / "fold", False),
        "fold_whole": _save(_Model(2, "whole"), root / "fold_whole", True),
        "other": _save(_Model(1, "whole"), root / "other", True, identity="other"),
        "plain": _save(_Model(1, "whole"), root / "plain", None),
    }


def _split(directory: Path) -> str:
    rng = np.random.default_rng(3)
    split = directory / "Split-test"
    split.mkdir(parents=True)
    with tf.io.TFRecordWriter(str(split / "data-00000-of-00001.gz"), options="GZIP") as writer:
        for q in range(5):
            query = rng.integers(1, VOCAB, size=rng.integers(1, 4)).tolist()
            for rank in range(1, 5):
                doc = rng.integers(1, VOCAB, size=rng.integers(1, 7)).tolist()
                writer.write(
                    fmt.serialize_group(
                        f"q{q}", [f"d{q}-{rank}"], query, [doc], [0.0], [1], [1.0 / rank], [rank]
                    )
                )
    return str(split)


def test_a_fold_model_ranks_with_the_served_models_frozen_parts_as_if_whole(
    models: dict[str, str], tmp_path: Path
) -> None:
    split = _split(tmp_path / "examples")
    runs, how = scoring.score_split(
        beam.Pipeline,
        [split],
        {"fold": models["fold"], "fold_whole": models["fold_whole"], "served": models["served"]},
        batch_size=3,
        scores_prefix=os.path.join(tmp_path, "scores"),
        frozen_from={"fold": frozen_parts_model(models["fold"], models["served"])},
    )
    assert set(how.values()) == {scoring.EMBED_ONCE}
    assert runs["fold"].keys() == runs["fold_whole"].keys() and len(runs["fold"]) == 5
    for qid, docs in runs["fold_whole"].items():
        np.testing.assert_allclose(
            [runs["fold"][qid][d] for d in docs], list(docs.values()), rtol=0, atol=1e-6
        )
    # The served model's own query tower is another: its scores differ (the test can fail).
    assert any(
        abs(runs["served"][q][d] - s) > 1e-3
        for q, docs in runs["fold"].items()
        for d, s in docs.items()
    )


def test_only_a_partial_model_takes_frozen_parts_and_only_the_same_ones(
    models: dict[str, str],
) -> None:
    assert frozen_parts_model(models["fold"], models["served"]) == models["served"]
    for whole in ("served", "fold_whole", "plain"):
        assert frozen_parts_model(models[whole], models["served"]) is None
    with pytest.raises(ValueError, match="other frozen parts") as error:
        frozen_parts_model(models["fold"], models["other"])
    assert models["fold"] in str(error.value) and models["other"] in str(error.value)
    with pytest.raises(ValueError, match="no complete query_tower.json"):
        frozen_parts_model(models["fold"], models["plain"])
    with pytest.raises(ValueError, match="scored by embedding"):
        scoring.score_split(
            beam.Pipeline,
            [],
            {"fold": models["fold"]},
            batch_size=3,
            scores_prefix="unused",
            embed=False,
            frozen_from={"fold": models["served"]},
        )
