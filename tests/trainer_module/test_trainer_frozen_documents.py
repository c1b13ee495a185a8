"""Frozen document vectors (trainer recipe.type frozen_documents, ADORE): only the query tower
trains, each train query against its whole candidate list of the checkpoint's document vectors;
the export embeds documents with the checkpoint and queries with the trained tower."""

import json
import os

import bert_testdata
import numpy as np
import pytest
import tensorflow as tf
import tensorflow_text  # noqa: F401  (registers the ops the exported tokenizer graph uses)
import trainer_testdata

from rankcore import corpus_vectors
from rankcore.encoders import hf_checkpoint
from rankcore.encoders.bert import BertEncoder
from trainer_module import run_fn, validation
from trainer_module.recipes import recipe_for

STEPS = 12


def _config(checkpoint_dir: str, **overrides):
    base = {"train_steps": STEPS, "checkpoint_every": STEPS, "log_every": 1}
    return trainer_testdata.frozen_documents_config(checkpoint_dir, **{**base, **overrides})


@pytest.fixture(scope="module")
def frozen(bert_checkpoint, lists_examples_dir, transform_graph, tmp_path_factory):
    """(controller, its query encoder's weights before training) after STEPS steps."""
    cfg = _config(bert_checkpoint)
    work = str(tmp_path_factory.mktemp("frozen"))
    controller = trainer_testdata.make_controller(cfg, lists_examples_dir, transform_graph, work)
    before = {n: v.numpy().copy() for n, (v, _) in controller.model.checkpoint_variables().items()}
    controller.train()
    return controller, before


def _checkpoint(bert_checkpoint: str):
    ckpt = hf_checkpoint.read_checkpoint(bert_checkpoint)
    config = json.loads(open(os.path.join(bert_checkpoint, "config.json")).read())
    return ckpt.tensors, config


def test_only_the_query_tower_trains(frozen, bert_checkpoint):
    controller, before = frozen
    model = controller.model
    names = [v.name for v in model.trainable_variables]
    assert names and all(n.startswith("dual_encoder/encoder/") for n in names)
    tensors, _ = _checkpoint(bert_checkpoint)
    # The document tower is the checkpoint, to the bit, after training.
    for name, (variable, transpose) in model.document_encoder.checkpoint_variables().items():
        want = tensors[name].T if transpose else tensors[name]
        np.testing.assert_array_equal(variable.numpy(), want, err_msg=name)
    moved = [
        n
        for n, (v, _) in model.checkpoint_variables().items()
        if not np.array_equal(v.numpy(), before[n])
    ]
    assert len(moved) > len(before) // 2, moved
    loss = [h[1] for h in controller.history]
    assert len(loss) == STEPS and all(np.isfinite(loss))
    assert np.mean(loss[-4:]) < np.mean(loss[:4]), loss


def test_each_train_query_is_scored_against_its_whole_list(
    frozen, bert_checkpoint, lists_examples_dir
):
    controller, _ = frozen
    task, model = controller.task, controller.model
    pattern = trainer_testdata.split_pattern(lists_examples_dir, "train")
    cands = validation.read_candidates(pattern, 32, task.max_query_length, task.max_doc_length)
    lengths = (task.max_query_length, task.max_doc_length)
    got = task.recipe.candidate_lists(pattern, lengths, controller._embed_fns["d"], None)
    queries, doc_vectors, labels, mask = got.queries, got.doc_vectors(), got.labels, got.mask
    # Each distinct listed document is one row of the table (row 0: padding, all zeros).
    assert len(got.documents) == 1 + len({d for _, d in cands.pairs})
    assert not got.documents[0].any() and (got.doc_index[~mask] == 0).all()
    lists: dict[str, list[str]] = {}
    for qid, docid in cands.pairs:
        lists.setdefault(qid, []).append(docid)
    assert queries.shape[0] == len(lists) == 64  # every synthetic query has a positive
    assert {len(d) for d in lists.values()} == {4, 5, 6}  # lists of different lengths
    assert mask.shape[1] == 6 and (~mask).any()
    tensors, config = _checkpoint(bert_checkpoint)
    by_query = {tuple(int(t) for t in row if t): i for i, row in enumerate(queries)}
    for qid, docids in lists.items():
        row = by_query[tuple(cands.texts[("q", qid)])]
        assert mask[row].sum() == len(docids)  # the whole list, nothing sampled
        want_labels = [max(cands.labels[qid][d], 0.0) for d in docids]
        np.testing.assert_array_equal(labels[row, : len(docids)], want_labels)
        for col, docid in enumerate(docids[:2]):  # the checkpoint's own document vectors
            ids = cands.texts[("d", docid)]
            want = bert_testdata.reference_embedding(
                tensors, config, ids, model.cls_id, model.sep_id
            )
            np.testing.assert_allclose(doc_vectors[row, col], want, atol=1e-5)
    # The step's scores: scale * cosine of the trained query with each listed document; the
    # loss: softmax cross-entropy over the list only (padding never counts).
    batch = next(iter(controller.dataset))
    outputs = task.forward(model, batch, training=False)
    query = model.embed_query(batch["query"]).numpy()
    # The batch's queries are cut to its longest (inputs.trim_query_padding): the padding cut
    # is masked, so the vectors equal those of the queries padded to the train split's widest.
    assert (batch["query"].numpy()[:, -1] != 0).any()
    assert batch["query"].shape[1] <= queries.shape[1]
    padded = tf.pad(batch["query"], [[0, 0], [0, 4]])
    np.testing.assert_allclose(model.embed_query(padded).numpy(), query, atol=1e-6)
    cosine = np.einsum("bh,bnh->bn", query, batch["doc_vectors"].numpy())
    valid = batch["mask"].numpy()
    assert (~valid).any()  # the batch holds a padded list
    scores = outputs["scores"].numpy()
    np.testing.assert_allclose(scores[valid], 20.0 * cosine[valid], rtol=1e-5, atol=1e-5)
    assert (scores[~valid] <= -1e8).all()
    got = task.build_losses(batch, outputs).numpy()
    for i, keep in enumerate(valid):
        logits = 20.0 * cosine[i, keep]
        gains = batch["labels"].numpy()[i, keep]
        log_p = logits - logits.max() - np.log(np.exp(logits - logits.max()).sum())
        np.testing.assert_allclose(got[i], -(gains / gains.sum() * log_p).sum(), rtol=1e-4)


def test_export_embeds_documents_with_the_checkpoint_and_queries_trained(
    frozen, bert_checkpoint, transform_graph, tmp_path
):
    controller, _ = frozen
    model = controller.model
    loaded, texts, ids, docs, queries = trainer_testdata.export_and_embed(
        model, transform_graph, tmp_path
    )
    tensors, config = _checkpoint(bert_checkpoint)
    for i, t in enumerate(texts):
        reference = bert_testdata.reference_embedding(
            tensors, config, t, model.cls_id, model.sep_id
        )
        np.testing.assert_allclose(docs[i], reference, atol=1e-5)
        assert not np.allclose(queries[i], reference, atol=1e-3)  # the trained tower
    np.testing.assert_allclose(queries, model.embed_query(ids).numpy(), atol=1e-5)
    # A pair's score is the trained query's vector against the checkpoint's document vector.
    score = loaded.signatures["serving_default"](
        query=tf.constant(["w01 w02 w03"]), document=tf.constant(["w04 w05"])
    )["score"].numpy()
    np.testing.assert_allclose(score, [queries[0] @ docs[1]], atol=1e-5)


def test_resume_continues_the_list_batches_exactly(
    bert_checkpoint, lists_examples_dir, transform_graph, tmp_path
):
    cfg = _config(bert_checkpoint, train_steps=6, checkpoint_every=3)
    straight = trainer_testdata.make_controller(
        cfg, lists_examples_dir, transform_graph, str(tmp_path / "a")
    )
    straight.train()
    first = trainer_testdata.make_controller(
        cfg, lists_examples_dir, transform_graph, str(tmp_path / "b")
    )
    first.train(stop_at=3)
    resumed = trainer_testdata.make_controller(
        cfg, lists_examples_dir, transform_graph, str(tmp_path / "b")
    )
    resumed.train()
    assert resumed.resumed_from["step"] == 3
    for a, b in zip(straight.model.trainable_variables, resumed.model.trainable_variables):
        np.testing.assert_array_equal(a.numpy(), b.numpy(), err_msg=a.name)


def _write_corpus_vectors(uri: str, spec, vectors: dict[str, tuple[list[int], np.ndarray]]):
    """A corpus-vectors artifact of one encoder, as the CorpusEncoder writes it."""
    shard = corpus_vectors.shard_pattern(uri, spec.key()).replace("*", "-00000-of-00001")
    os.makedirs(os.path.dirname(shard))
    with tf.io.TFRecordWriter(shard, tf.io.TFRecordOptions(compression_type="GZIP")) as writer:
        for docid, (ids, vector) in sorted(vectors.items()):
            writer.write(corpus_vectors.to_example(docid, ids, vector))
    dim = len(next(iter(vectors.values()))[1])
    entry = corpus_vectors.EncodedMeta(
        spec.key(), spec.checkpoint_dir, spec.max_length, spec.precision, len(vectors), dim
    )
    corpus_vectors.write_meta(uri, corpus_vectors.CorpusMeta((entry,)))


def test_with_corpus_vectors_the_recipe_embeds_no_document(
    frozen, bert_checkpoint, lists_examples_dir, transform_graph, tmp_path
):
    """run_fn prefills the document cache from the corpus-vectors artifact (every document of
    the collection, embedded once by the CorpusEncoder): a Trainer then embeds no document,
    neither for its training lists nor for dev scoring, and trains on the artifact's vectors.
    Without the artifact, it embeds them itself (the cache starts empty)."""
    first, _ = frozen
    cfg = _config(bert_checkpoint, train_steps=2)
    recipe = recipe_for(cfg)
    tower = recipe.document_tower(trainer_testdata.MAX_D, "float32")
    spec = corpus_vectors.EncoderSpec(bert_checkpoint, trainer_testdata.MAX_D, "float32")
    # The tower is what DualEncoder.embed_doc computes: the checkpoint's own vector alone.
    assert tower == corpus_vectors.DocumentTower.with_companion(spec, None, 0.5)
    texts: dict[str, list[int]] = {}
    for split in ("train", "dev"):
        pattern = trainer_testdata.split_pattern(lists_examples_dir, split)
        cands = validation.read_candidates(
            pattern, 32, trainer_testdata.MAX_Q, trainer_testdata.MAX_D
        )
        # The synthetic splits reuse docids for other texts: one artifact row per split's.
        texts.update({f"{split}/{k[1]}": ids for k, ids in cands.texts.items() if k[0] == "d"})
    model_vectors = first.doc_cache  # what the model embeds (the `frozen` Trainer's)
    uri = str(tmp_path / "corpus_vectors")
    _write_corpus_vectors(
        uri, spec, {d: (ids, model_vectors[tuple(ids)]) for d, ids in texts.items()}
    )
    taken, cache = run_fn.corpus_documents(recipe, tower, uri)
    assert taken == tower and len(cache) == len(set(map(tuple, texts.values())))
    prefilled = dict(cache)
    controller = trainer_testdata.make_controller(
        cfg, lists_examples_dir, transform_graph, str(tmp_path / "work"), doc_cache=cache
    )
    controller.train()
    controller.score_dev()
    assert controller.doc_cache is cache and cache.keys() == prefilled.keys()
    assert all(cache[k] is prefilled[k] for k in cache)  # none embedded again
    # A Trainer under another precision than the CorpusEncoder's (a compiled pipeline
    # resolves `auto` where it compiles, a pod where it runs) takes the vectors as they are,
    # and names them as its tower (the export's document_tower.json, which the evaluator reads).
    bfloat16 = recipe.document_tower(trainer_testdata.MAX_D, "mixed_bfloat16")
    assert bfloat16 != tower
    taken, again = run_fn.corpus_documents(recipe, bfloat16, uri)
    assert taken == tower and again.keys() == prefilled.keys()
    # No artifact (no CorpusEncoder), or one without this tower's encoder at its cut: an empty
    # cache, the tower as the recipe gave it.
    assert run_fn.corpus_documents(recipe, tower, None) == (tower, {})
    other = corpus_vectors.DocumentTower.with_companion(
        corpus_vectors.EncoderSpec(bert_checkpoint, trainer_testdata.MAX_D + 1), None, 0.5
    )
    assert run_fn.corpus_documents(recipe, other, uri) == (other, {})


def test_frozen_documents_refuse_sampled_groups_and_other_settings(
    bert_checkpoint, listwise_examples_dir, transform_graph, tmp_path
):
    with pytest.raises(ValueError, match="one candidate per group .* hold 4 documents"):
        trainer_testdata.make_controller(
            _config(bert_checkpoint), listwise_examples_dir, transform_graph, str(tmp_path)
        )
    with pytest.raises(ValueError, match="needs model=dual_encoder and loss=listwise_softmax"):
        _config(bert_checkpoint, loss="pairwise_hinge")


def test_zero_shot_is_the_same_frozen_model_at_step_0(
    frozen, bert_checkpoint, lists_examples_dir, transform_graph, tmp_path
):
    """train_steps 0 of the frozen-documents recipe: the same dual encoder with its frozen
    document tower, no step run, its query vectors the checkpoint's (the baseline training is
    measured against, and the Tuner's `train_steps: 0`)."""
    cfg = _config(bert_checkpoint, train_steps=0)
    controller = trainer_testdata.make_controller(
        cfg, lists_examples_dir, transform_graph, str(tmp_path)
    )
    assert controller.train().steps == 0
    _, before = frozen
    now = {n: v.numpy() for n, (v, _) in controller.model.checkpoint_variables().items()}
    assert now.keys() == before.keys()
    for name, value in now.items():
        np.testing.assert_array_equal(value, before[name])
    assert recipe_for(cfg).document_tower(trainer_testdata.MAX_D, "float32") is not None


# ------------------------------------------------------------------------------------------
# A companion encoder (recipe.frozen_documents.companion_checkpoint_dir): an MPNet checkpoint
# run as it is beside the model, its vectors appended to every vector the model serves.
# ------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def mpnet_companion(bert_checkpoint, tmp_path_factory):
    """A tiny MPNet checkpoint whose WordPiece vocabulary is the model's vocab.txt."""
    vocab = hf_checkpoint.read_vocab_file(bert_checkpoint)
    directory = str(tmp_path_factory.mktemp("mpnet"))
    tensors = bert_testdata.write_mpnet_checkpoint(directory, vocab, seed=7)
    return directory, tensors


@pytest.fixture(scope="module")
def with_companion(
    frozen, mpnet_companion, bert_checkpoint, lists_examples_dir, transform_graph, tmp_path_factory
):
    """The `frozen` recipe again, with the MPNet companion at weight 0.3."""
    directory, _ = mpnet_companion
    cfg = _config(bert_checkpoint)
    cfg.recipe.frozen_documents.companion_checkpoint_dir = directory
    cfg.recipe.frozen_documents.companion_weight = 0.3
    work = str(tmp_path_factory.mktemp("companion"))
    controller = trainer_testdata.make_controller(cfg, lists_examples_dir, transform_graph, work)
    controller.train()
    return controller


def test_a_companion_leaves_training_as_it_was(frozen, with_companion):
    """Training scores the model's own tower against the checkpoint's document vectors: the
    losses and the trained query tower are those of the same recipe without a companion, and
    the companion is frozen (not trainable, the checkpoint to the bit)."""
    plain, _ = frozen
    np.testing.assert_allclose(
        [h[1] for h in with_companion.history], [h[1] for h in plain.history], rtol=1e-4
    )
    trained = plain.model.checkpoint_variables()
    for name, (variable, _) in with_companion.model.checkpoint_variables().items():
        np.testing.assert_allclose(variable.numpy(), trained[name][0].numpy(), atol=1e-4)
    names = [v.name for v in with_companion.model.trainable_variables]
    assert names and all(n.startswith("dual_encoder/encoder/") for n in names)


def test_train_score_served_trains_what_the_model_serves(
    with_companion, mpnet_companion, bert_checkpoint, lists_examples_dir, transform_graph, tmp_path
):
    """train_score: served scores each list as the model serves it, 0.7 * the trained tower's
    cosine + 0.3 * the frozen companion's (its query part fixed before training), so training
    differs from the own-cosine recipe's; without a companion the key is refused."""
    directory, _ = mpnet_companion
    cfg = _config(bert_checkpoint)
    cfg.recipe.frozen_documents.companion_checkpoint_dir = directory
    cfg.recipe.frozen_documents.companion_weight = 0.3
    cfg.recipe.frozen_documents.train_score = "served"
    controller = trainer_testdata.make_controller(
        cfg, lists_examples_dir, transform_graph, str(tmp_path)
    )
    task, model = controller.task, controller.model
    batch = next(iter(controller.dataset))
    served_queries = model.embed_query(batch["query"]).numpy()
    np.testing.assert_allclose(batch["query_vectors"].numpy(), served_queries, atol=1e-5)
    scores = task.forward(model, batch, training=False)["scores"].numpy()
    want = np.einsum("bh,bnh->bn", served_queries, batch["doc_vectors"].numpy())
    mask = batch["mask"].numpy()
    np.testing.assert_allclose(scores[mask], (want * cfg.in_batch_scale)[mask], atol=1e-3)
    own = model.own_query(batch["query"]).numpy()
    own_cosine = np.einsum("bh,bnh->bn", own, model.own_vectors(batch["doc_vectors"]).numpy())
    assert not np.allclose(want[mask], own_cosine[mask], atol=1e-3)
    controller.train()
    served_loss = [h[1] for h in controller.history]
    own_loss = [h[1] for h in with_companion.history]
    assert len(served_loss) == STEPS and np.all(np.isfinite(served_loss))
    assert not np.allclose(served_loss, own_loss, rtol=1e-3)
    assert "the list loss trained on that served score" in task.recipe.describe()
    with pytest.raises(ValueError, match="recipe.frozen_documents.train_score.*companion"):
        _config(
            bert_checkpoint,
            recipe={"type": "frozen_documents", "frozen_documents": {"train_score": "served"}},
        )
    with pytest.raises(ValueError, match="did you mean served"):
        _config(
            bert_checkpoint,
            recipe={"type": "frozen_documents", "frozen_documents": {"train_score": "serve"}},
        )


def test_served_vectors_append_the_companions_and_export_keeps_them(
    frozen, with_companion, mpnet_companion, bert_checkpoint, transform_graph, tmp_path
):
    """Every served vector is [sqrt(0.7) own, sqrt(0.3) MPNet's] (transformers' MPNet forward
    in numpy, on the ids + 4 of its vocab.txt); the SavedModel embeds the same and its pair
    score is 0.7 * the own cosine + 0.3 * the companion's."""
    _, mpnet_tensors = mpnet_companion
    model = with_companion.model
    loaded, texts, ids, docs, queries = trainer_testdata.export_and_embed(
        model, transform_graph, tmp_path
    )
    tensors, config = _checkpoint(bert_checkpoint)
    own_queries = model.own_query(ids).numpy()
    assert docs.shape == queries.shape == (2, 64)
    for i, t in enumerate(texts):
        own_doc = bert_testdata.reference_embedding(tensors, config, t, model.cls_id, model.sep_id)
        other = bert_testdata.reference_mpnet_embedding(
            mpnet_tensors, bert_testdata.TINY_MPNET_CONFIG, [i + 4 for i in t]
        )
        np.testing.assert_allclose(
            docs[i], np.concatenate([np.sqrt(0.7) * own_doc, np.sqrt(0.3) * other]), atol=1e-5
        )
        np.testing.assert_allclose(
            queries[i],
            np.concatenate([np.sqrt(0.7) * own_queries[i], np.sqrt(0.3) * other]),
            atol=1e-5,
        )
    np.testing.assert_allclose(np.linalg.norm(queries, axis=1), 1.0, atol=1e-5)
    score = loaded.signatures["serving_default"](
        query=tf.constant(["w01 w02 w03"]), document=tf.constant(["w04 w05"])
    )["score"].numpy()
    np.testing.assert_allclose(score, [queries[0] @ docs[1]], atol=1e-5)
    # The model's own part of a served vector is its own tower's vector again.
    own = model.own_vectors(tf.constant(queries)).numpy()
    np.testing.assert_allclose(own, own_queries, atol=1e-5)


def test_a_companion_must_read_the_models_ids(bert_checkpoint, tmp_path):
    """A companion whose WordPiece vocabulary is not the model's is refused, naming the id, the
    tokens and the companion's vocab.txt line; without frozen documents it is a config error."""
    from trainer_module.models.dual_encoder import open_companion

    vocab = hf_checkpoint.read_vocab_file(bert_checkpoint)
    other = list(vocab)
    other[7] = "changed"
    bert_testdata.write_mpnet_checkpoint(str(tmp_path / "mpnet"), other)
    model = hf_checkpoint.read_checkpoint(bert_checkpoint)
    with pytest.raises(ValueError, match=r"differ at WordPiece id 7 \(.*'changed'; line 12 of"):
        open_companion(str(tmp_path / "mpnet"), model, 10)
    with pytest.raises(ValueError, match=r"exceeds the companion's 38 positions"):
        bert_testdata.write_mpnet_checkpoint(str(tmp_path / "ok"), vocab)
        open_companion(str(tmp_path / "ok"), model, 40)
    with pytest.raises(ValueError, match="is read by recipe.type: frozen_documents only"):
        _config(
            bert_checkpoint,
            recipe={
                "type": "sampled_groups",
                "frozen_documents": {"companion_checkpoint_dir": "x"},
            },
        )


def test_checkpoints_leave_the_frozen_towers_out(with_companion):
    """A training checkpoint holds what training changes (the query tower, the dropout
    generator, the optimizers); the frozen document tower and the companion are their
    checkpoints' weights at every build, so saving them would only write 530 MB per save on
    Cranfield (MiniLM + MPNet)."""
    latest = tf.train.latest_checkpoint(with_companion.checkpoint_dir)
    names = [name for name, _ in tf.train.list_variables(latest)]
    assert any(n.startswith("model/encoder/") for n in names)
    assert any(n.startswith("model/rng/") for n in names)
    frozen_names = [n for n in names if "document_encoder" in n or "companion" in n]
    assert not frozen_names
    # The model restored from it scores as the trained one.
    model = with_companion.model
    ids = tf.constant([[5, 6, 7, 0]], tf.int64)
    before = model.embed_query(ids).numpy()
    with_companion.checkpoint.restore(latest).assert_existing_objects_matched()
    np.testing.assert_array_equal(model.embed_query(ids).numpy(), before)


def test_export_traces_each_tower_once(frozen, transform_graph, tmp_path, monkeypatch):
    """Every signature calls the two towers' one trace (export.py _traced_once): tracing the
    model again inside tf.saved_model.save stored it twice, a third of a Cranfield fold
    Trainer's export with the MPNet companion and twice the graph for the evaluator to load."""
    traces = []
    call = BertEncoder.call

    def counted(self, *args, **kwargs):
        traces.append(self.name)
        return call(self, *args, **kwargs)

    monkeypatch.setattr(BertEncoder, "call", counted)
    trainer_testdata.export_and_embed(frozen[0].model, transform_graph, tmp_path)
    assert sorted(traces) == ["document_encoder", "encoder"]


def test_the_exported_weights_dev_scores_are_the_last_validations(frozen, monkeypatch):
    """Validated at the last step only, the exported (best = last) weights' dev scores are
    the validation's, not scored a second time; other weights are scored again."""
    controller, _ = frozen
    step, validated = controller._last_dev
    assert step == controller.total_steps == int(controller.best_step.numpy())
    assert controller.exported_dev_scores(controller.restore_best()) is validated
    assert controller.exported_dev_scores(False) is validated  # the last step's weights too
    monkeypatch.setattr(controller, "_last_dev", (step - 1, validated))
    again = controller.exported_dev_scores(True)
    assert again is not validated and again.run.keys() == validated.run.keys()
    for qid, docs in validated.run.items():
        assert again.run[qid] == pytest.approx(docs, abs=1e-6)
