"""Dual encoder from a tiny pretrained checkpoint, the in-batch loss, zero-shot export, fusion."""

import json
import os

import apache_beam as beam
import bert_testdata
import numpy as np
import pytest
import tensorflow as tf
import tensorflow_text  # noqa: F401  (registers the ops the exported tokenizer graph uses)
import trainer_testdata
from apache_beam.metrics.metric import MetricsFilter

from components.ranking_evaluator import (
    embed_once,
    embedding,
    eval_examples,
    scoring,
)
from rankcore import corpus_vectors, feedback, fusion
from rankcore.constants import MODEL_DESCRIPTION_FILE, TRAIN_RESULTS_FILE
from rankcore.encoders import hf_checkpoint
from rankcore.metrics import aggregate, compute_metrics, rank_documents
from trainer_module import losses, validation
from trainer_module.models import build_model
from trainer_module.run_fn import read_vocab, run_fn

QUERIES = ["alpha beta", "gamma", "delta epsilon zeta", ""]
DOCS = ["alpha beta gamma", "gamma gamma delta", "zeta", "omega"]


FEEDBACK_TUNED = {"feedback": {"mode": "tuned"}}  # the trainer.ranking section


def _config(checkpoint_dir: str, **overrides):
    return trainer_testdata.small_config(
        model="dual_encoder", dual_encoder={"checkpoint_dir": checkpoint_dir}, **overrides
    )


def test_in_batch_softmax_equals_a_hand_computation():
    rng = np.random.default_rng(3)
    b, n, scale = 3, 2, 20.0
    sim = rng.uniform(-1, 1, size=(b, b * n))
    labels = np.array([[2.0, 0.0], [1.0, 0.0], [0.0, 0.0]])  # group 2 has no positive
    same = np.array([[1, 1, 0], [1, 1, 0], [0, 0, 1]], bool)  # groups 0 and 1: one query
    got = losses.in_batch_softmax(
        tf.constant(sim, tf.float32), tf.constant(labels, tf.float32), tf.constant(same), scale
    ).numpy()
    want = []
    for i in range(b):
        keep = [g * n + j for g in range(b) for j in range(n) if g == i or not same[i, g]]
        logits = scale * sim[i, keep]
        log_p = logits - np.log(np.exp(logits - logits.max()).sum()) - logits.max()
        target = np.zeros(b * n)
        target[i * n : (i + 1) * n] = labels[i] / labels[i].sum() if labels[i].sum() else 0
        want.append(-(target[keep] * log_p).sum())
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    assert got[2] == 0.0
    # Group 1's documents are masked for query 0 (same query), not counted as negatives.
    unmasked = losses.in_batch_softmax(
        tf.constant(sim, tf.float32),
        tf.constant(labels, tf.float32),
        tf.constant(np.eye(b, dtype=bool)),
        scale,
    ).numpy()
    assert not np.isclose(unmasked[0], got[0])


def test_dual_encoder_loads_the_checkpoint_and_scores_cosine(bert_checkpoint, transform_graph):
    vocab = read_vocab(transform_graph)
    cfg = _config(bert_checkpoint)
    model = build_model(cfg, len(vocab), trainer_testdata.MAX_Q, trainer_testdata.MAX_D, vocab)
    ckpt = hf_checkpoint.read_checkpoint(bert_checkpoint)
    for name, (variable, transpose) in model.checkpoint_variables().items():
        want = ckpt.tensors[name].T if transpose else ckpt.tensors[name]
        np.testing.assert_array_equal(variable.numpy(), want)
    assert all(v.name.startswith("dual_encoder/encoder/") for v in model.trainable_variables)
    config = json.loads(open(os.path.join(bert_checkpoint, "config.json")).read())
    q_ids = trainer_testdata.tokenize(transform_graph, QUERIES)
    d_ids = trainer_testdata.tokenize(transform_graph, DOCS)
    width = max(len(x) for x in q_ids + d_ids) + 3  # extra padding must not change scores
    pad = [x + [0] * (width - len(x)) for x in q_ids + d_ids]
    scores = model(
        (tf.constant(pad[: len(QUERIES)], tf.int64), tf.constant(pad[len(QUERIES) :], tf.int64))
    ).numpy()
    want = [
        bert_testdata.reference_embedding(ckpt.tensors, config, q, model.cls_id, model.sep_id)
        @ bert_testdata.reference_embedding(ckpt.tensors, config, d, model.cls_id, model.sep_id)
        for q, d in zip(q_ids, d_ids)
    ]
    np.testing.assert_allclose(scores, want, atol=1e-5)


def test_in_batch_recipe_requires_the_dual_encoder_and_owns_its_loss():
    with pytest.raises(ValueError, match="recipe.type in_batch needs a model with separate"):
        trainer_testdata.small_config(recipe={"type": "in_batch"})
    with pytest.raises(ValueError, match="loss in_batch_softmax is now recipe.type: in_batch"):
        trainer_testdata.small_config(loss="in_batch_softmax")
    with pytest.raises(ValueError, match="train_steps must be >= 1"):
        trainer_testdata.small_config(train_steps=0)


def test_dual_encoder_in_batch_training_lowers_the_loss(
    bert_checkpoint, listwise_examples_dir, transform_graph, tmp_path
):
    cfg = trainer_testdata.small_config(
        model="dual_encoder",
        dual_encoder={"checkpoint_dir": bert_checkpoint, "hidden_dropout": 0.0},
        recipe={"type": "in_batch"},
        train_steps=30,
        validate_every=0,
        log_every=1,
        learning_rate=1e-2,
        encoder_learning_rate=1e-2,
    )
    controller = trainer_testdata.make_controller(
        cfg, listwise_examples_dir, transform_graph, str(tmp_path)
    )
    task, batch = controller.task, next(iter(controller.dataset))

    def batch_loss() -> float:
        outputs = task.forward(controller.model, batch, training=False)
        return float(tf.reduce_mean(task.build_losses(batch, outputs)))

    before = batch_loss()
    controller.train()
    loss = [h[1] for h in controller.history]
    assert len(loss) == 30 and all(np.isfinite(loss))
    assert np.mean(loss[-10:]) < 0.85 * np.mean(loss[:10]), loss
    assert batch_loss() < 0.85 * before


@pytest.fixture(scope="module")
def zero_shot(bert_checkpoint, examples_dir, transform_graph, tmp_path_factory):
    """run_fn with train_steps 0: the checkpoint exported as it is, fusion tuned on dev."""
    cfg = _config(bert_checkpoint, train_steps=0)
    args = trainer_testdata.fn_args(
        tmp_path_factory.mktemp("zs"), examples_dir, transform_graph, cfg, 0
    )
    return args, run_fn(args)


def test_zero_shot_export_equals_numpy_mean_pooled_cosine(
    zero_shot, bert_checkpoint, transform_graph
):
    args, result = zero_shot
    assert result.steps == 0 and result.final_metric is not None
    parts = ("setup", "train", "dev_scoring", "fusion", "export")  # no dev vectors written
    assert set(result.seconds) == {*parts, "total"}
    assert sum(result.seconds[p] for p in parts) <= result.seconds["total"]
    loaded = tf.saved_model.load(args.serving_model_dir)
    got = (
        loaded.signatures["serving_default"](
            query=tf.constant(QUERIES), document=tf.constant(DOCS)
        )["score"]
        .numpy()
        .astype(np.float64)
    )
    ckpt = hf_checkpoint.read_checkpoint(bert_checkpoint)
    config = json.loads(open(os.path.join(bert_checkpoint, "config.json")).read())
    vocab = read_vocab(transform_graph)
    cls_id, sep_id = vocab.index("[CLS]"), vocab.index("[SEP]")
    q_ids = trainer_testdata.tokenize(transform_graph, QUERIES)
    d_ids = trainer_testdata.tokenize(transform_graph, DOCS)
    want = [
        bert_testdata.reference_embedding(
            ckpt.tensors, config, q[: trainer_testdata.MAX_Q], cls_id, sep_id
        )
        @ bert_testdata.reference_embedding(
            ckpt.tensors, config, d[: trainer_testdata.MAX_D], cls_id, sep_id
        )
        for q, d in zip(q_ids, d_ids)
    ]
    np.testing.assert_allclose(got, want, atol=1e-5)


def test_tuned_alpha_is_the_dev_grid_argmax(zero_shot, examples_dir):
    """Recomputed from the EXPORTED model's scores of the dev examples, not the Trainer's."""
    args, result = zero_shot
    with open(os.path.join(args.model_run_dir, "train_results.json")) as f:
        written = json.load(f)["fusion"]
    assert written == result.fusion and result.fusion["mode"] == "tuned"
    loaded = tf.saved_model.load(args.serving_model_dir)
    records = trainer_testdata.read_records(trainer_testdata.split_pattern(examples_dir, "dev")[0])
    scores = loaded.signatures["score_examples"](examples=tf.constant(records))["score"].numpy()
    run, first, qrels = {}, {}, {}
    for record, score in zip(records, scores):
        f = tf.train.Example.FromString(record).features.feature
        qid, docid = f["qid"].bytes_list.value[0].decode(), f["docids"].bytes_list.value[0].decode()
        run.setdefault(qid, {})[docid] = float(score)
        first.setdefault(qid, {})[docid] = float(f["first_stage_scores"].float_list.value[0])
        if f["judged"].int64_list.value[0]:
            qrels.setdefault(qid, {})[docid] = int(round(f["labels"].float_list.value[0]))

    def metric(r):
        per_query = compute_metrics(qrels, r, ["ndcg_cut_10"])
        return aggregate(per_query)["ndcg_cut_10"]

    grid = {a: metric(fusion.fuse_run(run, first, a)) for a in fusion.ALPHA_GRID}
    best = max(grid.values())
    assert result.fusion["alpha"] == max(a for a, v in grid.items() if np.isclose(v, best))
    for a, v in grid.items():
        assert result.fusion["dev_grid"][f"{a:.2f}"] == pytest.approx(v, abs=1e-9)
    on_disk = fusion.read_fusion(args.serving_model_dir)
    assert on_disk["alpha"] == result.fusion["alpha"]


def test_rank_candidates_fuses_as_the_trainer_chose(zero_shot):
    args, result = zero_shot
    loaded = tf.saved_model.load(args.serving_model_dir)
    first = np.array([3.0, 1.0, 2.5, 0.5], np.float32)
    out = loaded.signatures["rank_candidates"](
        query=tf.constant(QUERIES[0]),
        documents=tf.constant(DOCS),
        first_stage_scores=tf.constant(first),
    )
    single = loaded.signatures["serving_default"](
        query=tf.constant([QUERIES[0]] * len(DOCS)), document=tf.constant(DOCS)
    )["score"].numpy()
    np.testing.assert_allclose(out["reranker_score"].numpy(), single, atol=1e-6)
    want = fusion.fuse(single, first, result.fusion["alpha"])
    np.testing.assert_allclose(out["fused_score"].numpy(), want, atol=1e-6)


def test_fusion_alpha_0_and_1_reproduce_each_ranking():
    rng = np.random.default_rng(0)
    reranker = {f"q{i}": {f"d{j}": float(rng.normal()) for j in range(30)} for i in range(5)}
    first = {q: {d: float(rng.uniform(5, 25)) for d in docs} for q, docs in reranker.items()}
    first["q0"]["d3"] = first["q0"]["d4"]  # a tie stays a tie (trec_eval breaks it by docno)

    def order(run):
        return {q: rank_documents(docs) for q, docs in run.items()}

    assert order(fusion.fuse_run(reranker, first, 0.0)) == order(first)
    assert order(fusion.fuse_run(reranker, first, 1.0)) == order(reranker)
    # Equal scores in a list normalise to 0 rather than dividing by zero.
    assert fusion.minmax(np.array([2.0, 2.0])).tolist() == [0.0, 0.0]
    with pytest.raises(ValueError, match="no first-stage score"):
        fusion.fuse_run({"q": {"a": 1.0}}, {"q": {}}, 0.5)


def test_tune_alpha_ties_go_to_the_larger_alpha():
    values = {0.0: 0.5, 0.5: 0.7, 0.75: 0.7, 1.0: 0.6}
    alpha, grid = fusion.tune_alpha({}, {}, lambda run: 0.0, grid=tuple(values))
    assert alpha == 1.0 and set(grid) == set(values)  # all equal: the largest
    calls = iter(values.values())
    alpha, _ = fusion.tune_alpha({}, {}, lambda run: next(calls), grid=tuple(values))
    assert alpha == 0.75


def test_embedded_dev_scoring_equals_pairwise_scoring(
    bert_checkpoint, examples_dir, transform_graph, tmp_path
):
    cfg = _config(bert_checkpoint, train_steps=1)
    controller = trainer_testdata.make_controller(cfg, examples_dir, transform_graph, str(tmp_path))
    fast = controller.score_dev()  # dual encoder: each distinct text embedded once
    slow = validation.score_dev(
        controller.score,
        controller.eval_files,
        7,
        trainer_testdata.MAX_Q,
        trainer_testdata.MAX_D,
    )
    assert fast.qrels == slow.qrels and fast.first_stage == slow.first_stage
    assert fast.run.keys() == slow.run.keys()
    for qid, docs in slow.run.items():
        assert fast.run[qid] == pytest.approx(docs, abs=1e-5)


def _shared_document_examples(transform_graph: str, directory: str) -> dict:
    """A test split where every query retrieved the same documents (as BM25 candidates of
    different queries overlap), one empty, some longer than MAX_D, in shards of mixed order."""
    queries = {"qa": "w01 w02", "qb": "w03 w04 w05 w06 w07 w08 w09 w10 w11 w12", "qc": "w01"}
    docs = {
        f"d{i}": " ".join(f"w{(i * 7 + j) % 60:02d}" for j in range(3 + 4 * i)) for i in range(5)
    }
    docs["empty"] = ""
    ids = trainer_testdata.tokenize(transform_graph, [*queries.values(), *docs.values()])
    q_ids, d_ids = dict(zip(queries, ids)), dict(zip(docs, ids[len(queries) :]))
    records = [
        trainer_testdata.group_example(q, q_ids[q], [d], [d_ids[d]], [1.0], [1])
        for q in queries
        for d in docs
    ]
    trainer_testdata._write_shards(os.path.join(directory, "Split-test"), records, 3)
    return {
        "texts": len(queries) + len(docs),
        "documents": len(docs),
        "pairs": len(records),
        "records": records,
    }


def _old_export(model_dir: str, directory: str) -> str:
    """The model re-saved with the pair signatures only, as exports before embed_* were."""
    loaded = tf.saved_model.load(model_dir)
    old = ("serving_default", "score_examples", "rank_candidates")
    tf.saved_model.save(loaded, directory, signatures={k: loaded.signatures[k] for k in old})
    return directory


def test_evaluator_embeds_each_text_once_and_scores_as_per_pair(
    zero_shot, transform_graph, tmp_path
):
    """The RankingEvaluator's dual-encoder path (scoring.score_split, as the executor calls it):
    each distinct text embedded once, every pair's score the per-pair signature's to 1e-5, in
    the same pass as a model without the embedding signatures (scored per pair)."""
    args, _ = zero_shot
    data = _shared_document_examples(transform_graph, str(tmp_path / "examples"))
    split_uri = str(tmp_path / "examples" / "Split-test")
    dual = args.serving_model_dir
    assert embedding.embeds(dual)
    old = _old_export(dual, str(tmp_path / "old_model"))
    assert not embedding.embeds(old)

    # Reference: the score_examples signature on each example directly (no Beam).
    loaded = tf.saved_model.load(dual)
    want = loaded.signatures["score_examples"](examples=tf.constant(data["records"]))["score"]
    reference: dict = {}
    for record, score in zip(data["records"], want.numpy()):
        qid, docid = eval_examples.example_key(record)
        reference.setdefault(qid, {})[docid] = float(score)

    models = {"candidate": dual, "baseline": old, "again": dual}
    phases: dict = {}
    runs, how = scoring.score_split(
        beam.Pipeline,
        [split_uri],
        models,
        batch_size=4,
        scores_prefix=str(tmp_path / "s" / "p"),
        phases=phases,
    )
    assert how == {"candidate": "embed_once", "baseline": "per_pair", "again": "embed_once"}
    # One worker (in_memory), many bundles and batches: each SavedModel loaded once, the two
    # embedded ones by EmbedAndScore, the third by RunInference (docs/speed.md).
    assert phases["saved_model_loads"] == 3
    assert phases["model_load_seconds"] > 0 and phases["model_seconds"] > 0
    assert phases["pass_seconds"] >= phases["model_load_seconds"] + phases["beam_seconds"]
    per_pair, how_pp = scoring.score_split(
        beam.Pipeline, [split_uri], {"candidate": dual}, 4, str(tmp_path / "pp" / "p"), embed=False
    )
    assert how_pp == {"candidate": "per_pair"}
    for run in (runs["candidate"], runs["baseline"], runs["again"], per_pair["candidate"]):
        assert run.keys() == reference.keys()
        for qid, docs in reference.items():
            assert run[qid].keys() == docs.keys()
            np.testing.assert_allclose(
                [run[qid][d] for d in docs], list(docs.values()), rtol=0, atol=1e-5
            )

    # Each distinct text is embedded once per model, whatever the number of pairs.
    p = beam.Pipeline()
    _ = (
        p
        | beam.Create(data["records"])
        | embed_once.EmbedAndScore([dual, dual], batch_size=2)
        | beam.Map(lambda row: row)
    )
    result = p.run()
    result.wait_until_finish()
    counters = {
        c.key.metric.name: c.committed
        for c in result.metrics().query(MetricsFilter().with_namespace("rankpipe"))["counters"]
    }
    assert counters == {
        "texts_embedded": data["texts"],
        embedding.DOCUMENTS_EMBEDDED: data["documents"],
        "pairs_scored": data["pairs"],
    }


def _signature_vectors(model_dir: str, records: list[bytes]) -> dict:
    """{(kind, id): vector} of every text of the examples, through the model's own embedding
    signatures, one text at a time (no batch shared with the scoring pass)."""
    loaded = tf.saved_model.load(model_dir)
    vectors = {}
    for qid, docid, query, doc in map(eval_examples.example_pair, records):
        for key, ids, signature in (
            (("q", qid), query, "embed_query_ids"),
            (("d", docid), doc, "embed_doc_ids"),
        ):
            if key not in vectors:
                batch = tf.constant([list(ids) or [0]], tf.int64)
                vectors[key] = loaded.signatures[signature](ids=batch)["embedding"].numpy()[0]
    return vectors


@pytest.mark.parametrize(
    "mode", ["in_memory", "multi_processing"], ids=["in_process", "two_worker_processes"]
)
def test_evaluator_ranks_each_list_with_feedback_inside_beam(
    zero_shot, transform_graph, tmp_path, mode
):
    """A model with feedback in the evaluator's scoring pass (score_split, as the executor
    calls it): each query's list is ranked as rankcore/feedback.py's rescore ranks it from the
    model's own vectors and the first stage (feedback from the fused first pass, so the alpha
    counts; a candidate the first stage did not score goes last), on one worker or two worker
    processes; a model without feedback in the same pass keeps its dot products."""
    args, _ = zero_shot
    data = _shared_document_examples(transform_graph, str(tmp_path / "examples"))
    dual = args.serving_model_dir
    setting = feedback.setting(
        docs=2, weight=1.0, neighbours=2, neighbour_weight=0.5, source="fused"
    )
    # Two tied first-stage scores in qa; qa's empty document has none.
    first_stage = {
        q: {f"d{i}": float((i * (3 + n)) % 5) for i in range(5)}
        for n, q in enumerate(["qa", "qb", "qc"])
    }
    first_stage["qb"]["empty"] = -1.0
    first_stage["qc"]["empty"] = 0.5
    first_stage["other split"] = {"d0": 1.0}
    options = beam.options.pipeline_options.PipelineOptions(
        direct_running_mode=mode, direct_num_workers=2 if mode == "multi_processing" else 1
    )
    runs, how = scoring.score_split(
        lambda: beam.Pipeline(options=options),
        [str(tmp_path / "examples" / "Split-test")],
        {"candidate": dual, "plain": dual},
        batch_size=4,
        scores_prefix=str(tmp_path / "s" / "p"),
        feedbacks={"candidate": (setting, 0.6)},
        first_stage=first_stage,
    )
    assert how == {"candidate": "embed_once", "plain": "embed_once"}
    vectors = _signature_vectors(dual, data["records"])
    plain = {
        qid: {d: float(vectors[("q", qid)] @ vectors[("d", d)]) for d in docs}
        for qid, docs in runs["plain"].items()
    }
    want = feedback.rescore(plain, first_stage, vectors, setting, 0.6)
    assert want.keys() == runs["candidate"].keys() == {"qa", "qb", "qc"}
    for qid, docs in want.items():
        assert runs["candidate"][qid] == pytest.approx(docs, abs=1e-5)
        assert runs["plain"][qid] == pytest.approx(plain[qid], abs=1e-5)
        assert any(abs(docs[d] - plain[qid][d]) > 1e-3 for d in docs)  # feedback moved it
    with pytest.raises(ValueError, match="only dual encoders can rank with feedback"):
        scoring.score_split(
            beam.Pipeline,
            [str(tmp_path / "examples" / "Split-test")],
            {"candidate": dual},
            4,
            str(tmp_path / "pp" / "p"),
            embed=False,
            feedbacks={"candidate": (setting, 0.6)},
        )


def test_embedding_signatures_match_the_pair_signatures(zero_shot, transform_graph):
    args, _ = zero_shot
    loaded = tf.saved_model.load(args.serving_model_dir)
    texts = QUERIES + DOCS
    from_text = loaded.signatures["embed_texts"](text=tf.constant(texts))["embedding"].numpy()
    np.testing.assert_allclose(np.linalg.norm(from_text, axis=1), 1.0, atol=1e-5)
    ids = trainer_testdata.tokenize(transform_graph, texts)
    padded = tf.constant([x + [0] * (20 - len(x)) for x in ids], tf.int64)
    doc_vectors = loaded.signatures["embed_doc_ids"](ids=padded)["embedding"].numpy()
    np.testing.assert_allclose(from_text, doc_vectors, atol=1e-5)
    query_vectors = loaded.signatures["embed_query_ids"](ids=padded)["embedding"].numpy()
    pair = loaded.signatures["serving_default"](
        query=tf.constant(texts), document=tf.constant(texts[::-1])
    )["score"].numpy()
    np.testing.assert_allclose((query_vectors * doc_vectors[::-1]).sum(axis=1), pair, atol=1e-5)
    # The query signature truncates at the query length: a long text differs from embed_texts.
    long = [i for i, x in enumerate(ids) if len(x) > trainer_testdata.MAX_Q]
    assert not long or not np.allclose(query_vectors[long], doc_vectors[long], atol=1e-3)


def _frozen_run(tmp_path, examples_dir, transform_graph, bert_checkpoint, name, dev, seed):
    """run_fn with frozen document vectors, validating on split `dev`; its FnArgs."""
    cfg = trainer_testdata.frozen_documents_config(
        bert_checkpoint, train_steps=2, checkpoint_every=2, seed=seed
    )
    args = trainer_testdata.fn_args(tmp_path / name, examples_dir, transform_graph, cfg, 2)
    args.eval_files = trainer_testdata.split_pattern(examples_dir, dev)
    run_fn(args)
    return args


def test_a_frozen_tower_is_named_beside_the_export(
    zero_shot, bert_checkpoint, lists_examples_dir, transform_graph, tmp_path
):
    """A frozen-documents model writes its document tower (the encoders' keys and scales)
    beside the SavedModel, so the evaluator takes its documents from the corpus vectors, and
    its recipe's description for the model card; a zero-shot model has no frozen tower. No
    dev vectors are written into the ModelRun any more (the corpus vectors replace them)."""
    args = _frozen_run(
        tmp_path, lists_examples_dir, transform_graph, bert_checkpoint, "a", "dev", 1
    )
    spec = corpus_vectors.EncoderSpec(bert_checkpoint, trainer_testdata.MAX_D, "float32")
    assert corpus_vectors.DocumentTower.read(args.serving_model_dir) == ((spec.key(), 1.0),)
    with open(os.path.join(args.serving_model_dir, MODEL_DESCRIPTION_FILE)) as f:
        description = json.load(f)
    assert description[0].startswith("recipe `frozen_documents`")
    with open(os.path.join(args.model_run_dir, TRAIN_RESULTS_FILE)) as f:
        assert json.load(f)["recipe"] == description
    assert not any("embedding" in name for name in os.listdir(args.model_run_dir))
    zero_shot_args, _ = zero_shot
    assert corpus_vectors.DocumentTower.read(zero_shot_args.serving_model_dir) is None
    with open(os.path.join(zero_shot_args.serving_model_dir, MODEL_DESCRIPTION_FILE)) as f:
        assert json.load(f)[0].startswith("recipe `zero_shot`")


def _unit32(v: np.ndarray) -> np.ndarray:
    return (v / np.linalg.norm(v)).astype(np.float32)


def _dev_scores(lists: dict) -> validation.DevScores:
    """DevScores from {qid: (query vector, {docid: (vector, first-stage score, label)})}; the
    model's run is the dot product."""
    qrels, run, first, vectors = {}, {}, {}, {}
    for qid, (query, docs) in lists.items():
        vectors[("q", qid)] = query
        for docid, (vector, score, label) in docs.items():
            vectors[("d", docid)] = vector
            first.setdefault(qid, {})[docid] = float(score)
            qrels.setdefault(qid, {})[docid] = label
            run.setdefault(qid, {})[docid] = float(
                query.astype(np.float64) @ vector.astype(np.float64)
            )
    return validation.DevScores(qrels, run, first, {k: ([], v) for k, v in vectors.items()})


def _feedback_dev(seed: int = 0) -> validation.DevScores:
    """Dev queries where the first stage's top 3 are relevant and point (in vector space) at
    the query's other relevant documents, which the query's own vector ranks last and the
    first stage below 3 irrelevant ones: feedback finds them, fusion alone cannot."""
    rng = np.random.default_rng(seed)
    lists = {}
    for q in range(8):
        qid = f"q{q}"
        query, topic = rng.normal(size=16), rng.normal(size=16)
        docs = {}
        for i in range(3):  # first stage's top 3: relevant, on the topic
            docs[f"{qid}-top{i}"] = (_unit32(topic + 0.3 * rng.normal(size=16)), 30 - i, 1)
        for i in range(3):  # next: irrelevant, close to the query
            docs[f"{qid}-near{i}"] = (_unit32(query + 0.3 * rng.normal(size=16)), 20 - i, 0)
        for i in range(4):  # last: relevant, on the topic, away from the query
            docs[f"{qid}-far{i}"] = (_unit32(topic - 0.6 * query), 10 - i, 1)
        lists[qid] = (_unit32(query), docs)
    return _dev_scores(lists)


def _fused_feedback_dev(seed: int = 0) -> validation.DevScores:
    """Dev queries whose first stage ranks 9 irrelevant documents first; the query's own
    vector finds 3 relevant ones between the query and its topic, and 4 more sit on the topic
    alone, last in both rankings: feedback from the fused first pass (the 3) finds the 4,
    feedback from the first stage's top moves the query towards noise."""
    rng = np.random.default_rng(seed)
    lists = {}
    for q in range(8):
        qid = f"q{q}"
        query, topic = _unit32(rng.normal(size=16)), _unit32(rng.normal(size=16))
        docs = {}
        for i in range(9):  # first stage's top: irrelevant, anywhere
            docs[f"{qid}-junk{i}"] = (_unit32(rng.normal(size=16)), 30 - i, 0)
        for i in range(3):  # next: relevant, between the query and the topic
            docs[f"{qid}-core{i}"] = (
                _unit32(query + topic + 0.2 * rng.normal(size=16)),
                20 - i,
                1,
            )
        for i in range(4):  # last: relevant, on the topic
            docs[f"{qid}-far{i}"] = (_unit32(topic + 0.2 * rng.normal(size=16)), 10 - i, 1)
        lists[qid] = (query, docs)
    return _dev_scores(lists)


@pytest.mark.parametrize("source", feedback.SOURCES)
def test_feedback_is_chosen_with_alpha_on_the_dev_queries_where_it_helps(bert_checkpoint, source):
    """Either source of feedback documents; from the fused first pass, each alpha tried
    rescores with that alpha."""
    from trainer_module.run_fn import choose_fusion
    from trainer_module.train_results import TrainResult

    dev = _feedback_dev() if source == "first_stage" else _fused_feedback_dev()
    stored = {k: v for k, (_, v) in dev.vectors.items()}

    def metric(run):
        return aggregate(compute_metrics(dev.qrels, run, ["ndcg_cut_10"]))["ndcg_cut_10"]

    def result():
        return TrainResult(0, 0, None, None, "ndcg_cut_10", 0.0, False, 0.0, None, 0.0)

    plain = choose_fusion(_config(bert_checkpoint, train_steps=0), dev, result())
    assert "feedback" not in plain
    tuned_from = {"feedback": {"mode": "tuned", "source": source}}
    cfg = _config(bert_checkpoint, train_steps=0, ranking=tuned_from)
    tuned = choose_fusion(cfg, dev, result())
    # The argmax over every (feedback setting, alpha), ties to no feedback, then larger alpha.
    table = {}
    for setting in feedback.grid(source):
        for alpha in fusion.ALPHA_GRID:
            run = feedback.rescore(dev.run, dev.first_stage, stored, setting, alpha)
            table[(*setting.values(), alpha)] = metric(fusion.fuse_run(run, dev.first_stage, alpha))
    best = max(table.values())
    assert feedback.is_on(tuned["feedback"]) and tuned["feedback"]["from"] == source
    chosen_run = feedback.rescore(
        dev.run, dev.first_stage, stored, tuned["feedback"], tuned["alpha"]
    )
    assert tuned["dev_reranker"] == pytest.approx(metric(chosen_run), abs=1e-12)
    assert tuned["dev_fused"] == pytest.approx(best, abs=1e-12)
    chosen = (*tuned["feedback"].values(), tuned["alpha"])
    assert table[chosen] == pytest.approx(best, abs=1e-12)
    assert tuned["dev_fused"] > plain["dev_fused"] + 0.02
    if source == "fused":  # where the first stage's top is noise, the fused first pass helps
        cfg = _config(bert_checkpoint, train_steps=0, ranking=FEEDBACK_TUNED)
        assert tuned["dev_fused"] > choose_fusion(cfg, dev, result())["dev_fused"] + 0.05
    assert tuned["dev_reranker_without_feedback"] == pytest.approx(metric(dev.run))
    # Feedback that cannot help (every document the same distance from everything) stays off.
    flat = dev._replace(vectors={k: ([], np.full(16, 0.25, np.float32)) for k in dev.vectors})
    flat = flat._replace(run={q: {d: 1.0 for d in docs} for q, docs in dev.run.items()})
    off = choose_fusion(
        _config(bert_checkpoint, train_steps=0, ranking=FEEDBACK_TUNED), flat, result()
    )
    assert off["feedback"] == feedback.OFF


@pytest.mark.parametrize("source", feedback.SOURCES)
def test_rank_candidates_ranks_with_feedback_as_the_evaluator_rescores(
    bert_checkpoint, transform_graph, tmp_path, source
):
    """A model exported with feedback: rank_candidates equals rankcore/feedback.py over the
    model's own vectors (what the RankingEvaluator computes), fused at the model's alpha; the
    pair signatures score without feedback. From the fused first pass, its top 2 are not the
    first stage's."""
    from trainer_module.export import export_serving_model

    vocab = read_vocab(transform_graph)
    cfg = _config(bert_checkpoint, train_steps=0)
    model = build_model(cfg, len(vocab), trainer_testdata.MAX_Q, trainer_testdata.MAX_D, vocab)
    setting = feedback.setting(
        docs=2, weight=1.0, neighbours=2, neighbour_weight=0.5, source=source
    )
    directory = str(tmp_path / "model")
    export_serving_model(
        model,
        transform_graph,
        trainer_testdata.MAX_Q,
        trainer_testdata.MAX_D,
        directory,
        fusion={"mode": "tuned", "alpha": 0.7, "feedback": setting},
        towers=True,
    )
    assert fusion.read_fusion(directory)["feedback"] == setting
    loaded = tf.saved_model.load(directory)
    first = np.array([1.0, 3.0, 0.5, 2.0], np.float32)  # feedback: DOCS[1] and DOCS[3]
    query = QUERIES[2]
    out = loaded.signatures["rank_candidates"](
        query=tf.constant(query), documents=tf.constant(DOCS), first_stage_scores=first
    )
    q_ids = trainer_testdata.tokenize(transform_graph, [query])
    q_vec = loaded.signatures["embed_query_ids"](ids=tf.constant(q_ids, tf.int64))["embedding"]
    d_vecs = loaded.signatures["embed_texts"](text=tf.constant(DOCS))["embedding"].numpy()
    vectors = {("q", "q"): q_vec.numpy()[0], **{("d", d): v for d, v in zip(DOCS, d_vecs)}}
    plain = {"q": {d: float(vectors[("q", "q")] @ v) for d, v in zip(DOCS, d_vecs)}}
    first_run = {"q": dict(zip(DOCS, first.tolist()))}
    want = feedback.rescore(plain, first_run, vectors, setting, 0.7)
    want_scores = np.array([want["q"][d] for d in DOCS])
    if source == "fused":  # the test tells the two sources apart
        other = feedback.rescore(plain, first_run, vectors, {**setting, "from": "first_stage"})
        assert not np.allclose(want_scores, [other["q"][d] for d in DOCS], atol=1e-3)
    np.testing.assert_allclose(out["reranker_score"].numpy(), want_scores, atol=1e-5)
    np.testing.assert_allclose(
        out["fused_score"].numpy(), fusion.fuse(want_scores, first, 0.7), atol=1e-5
    )
    assert not np.allclose(want_scores, [plain["q"][d] for d in DOCS], atol=1e-3)
    pair = loaded.signatures["serving_default"](
        query=tf.constant([query] * len(DOCS)), document=tf.constant(DOCS)
    )["score"].numpy()
    np.testing.assert_allclose(pair, [plain["q"][d] for d in DOCS], atol=1e-5)
