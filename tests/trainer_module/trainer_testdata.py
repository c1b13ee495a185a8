"""Tiny real artifacts for Trainer tests: a TransformGraph and an Examples directory.

The data has a learnable signal: relevant documents contain the query's words, non-relevant
documents do not. All token ids come from the TransformGraph itself, so serving-time
tokenization matches the training examples exactly.
"""

from __future__ import annotations

import os
import random
import tempfile
import types

import tensorflow as tf

WORDS = [f"w{i:02d}" for i in range(60)]
RESERVED = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def write_vocab(path: str) -> str:
    with open(path, "w") as f:
        f.write("\n".join(RESERVED + WORDS + ["##s"]) + "\n")
    return path


def build_transform_graph(output_dir: str, vocab_file: str) -> str:
    """Runs tf.Transform (Beam DirectRunner) with RankingDataGen's preprocessing_fn."""
    import apache_beam as beam
    import tensorflow_transform.beam as tft_beam
    from tensorflow_transform.tf_metadata import dataset_metadata, schema_utils

    from components.ranking_datagen.tokenization import RAW_FEATURE_SPEC, make_preprocessing_fn

    metadata = dataset_metadata.DatasetMetadata(
        schema_utils.schema_from_feature_spec(RAW_FEATURE_SPEC)
    )
    data = [{"text": " ".join(WORDS[i : i + 5])} for i in range(0, 60, 5)]
    with beam.Pipeline() as p, tft_beam.Context(temp_dir=tempfile.mkdtemp()):
        raw = p | beam.Create(data)
        transform_fn = (raw, metadata) | tft_beam.AnalyzeDataset(make_preprocessing_fn(vocab_file))
        _ = transform_fn | tft_beam.WriteTransformFn(output_dir)
    return output_dir


def tokenize(transform_graph_dir: str, texts: list[str]) -> list[list[int]]:
    import tensorflow_transform as tft

    layer = tft.TFTransformOutput(transform_graph_dir).transform_features_layer()
    sparse = layer({"text": tf.constant(texts)})["token_ids"]
    ragged = tf.RaggedTensor.from_sparse(sparse)
    return [list(map(int, row)) for row in ragged.to_list()]


def _feature(values, kind: str) -> tf.train.Feature:
    if kind == "bytes":
        return tf.train.Feature(bytes_list=tf.train.BytesList(value=[v.encode() for v in values]))
    if kind == "int":
        return tf.train.Feature(int64_list=tf.train.Int64List(value=values))
    return tf.train.Feature(float_list=tf.train.FloatList(value=values))


def group_example(
    qid: str,
    query_ids: list[int],
    docids: list[str],
    docs: list[list[int]],
    labels: list[float],
    judged: list[int],
) -> bytes:
    n = len(docids)
    feats = {
        "qid": _feature([qid], "bytes"),
        "docids": _feature(docids, "bytes"),
        "query_ids": _feature(query_ids, "int"),
        "doc_ids": _feature([t for d in docs for t in d], "int"),
        "doc_lengths": _feature([len(d) for d in docs], "int"),
        "labels": _feature(labels, "float"),
        "judged": _feature(judged, "int"),
        "first_stage_scores": _feature([float(n - i) for i in range(n)], "float"),
        "first_stage_ranks": _feature(list(range(1, n + 1)), "int"),
    }
    return tf.train.Example(features=tf.train.Features(feature=feats)).SerializeToString()


def _write_shards(split_dir: str, records: list[bytes], shards: int) -> None:
    os.makedirs(split_dir, exist_ok=True)
    for s in range(shards):
        path = os.path.join(split_dir, f"data_tfrecord-{s:05d}-of-{shards:05d}.gz")
        with tf.io.TFRecordWriter(path, options="GZIP") as w:
            for r in records[s::shards]:
                w.write(r)


def synthetic_texts(num_queries: int, seed: int):
    """Yields (qid, query, [(docid, text, label)]) with relevant docs echoing the query."""
    rng = random.Random(seed)
    for q in range(num_queries):
        qwords = rng.sample(WORDS, 3)
        others = [w for w in WORDS if w not in qwords]
        cands = []
        for r in range(2):
            text = qwords[: 2 + r] + rng.sample(others, 5)
            rng.shuffle(text)
            cands.append((f"q{q}-rel{r}", " ".join(text), float(1 + r)))
        for j in range(4):
            cands.append((f"q{q}-neg{j}", " ".join(rng.sample(others, 4 + j)), 0.0))
        yield f"q{q}", " ".join(qwords), cands


def make_examples(
    root: str,
    transform_graph_dir: str,
    group_size: int = 2,
    train_queries: int = 64,
    dev_queries: int = 12,
    seed: int = 0,
    train_lists: bool = False,
) -> str:
    """Writes <root>/Split-train, Split-dev, Split-test as gzip TFRecord shards (with
    train_lists, the train split holds every candidate, one per group, as dev and test do:
    datagen.sampling.mode lists)."""
    rng = random.Random(seed)
    splits = {"train": train_queries, "dev": dev_queries, "test": dev_queries}
    for offset, (split, num) in enumerate(splits.items()):
        data = list(synthetic_texts(num, seed + 1000 * offset))
        texts = [q for _, q, _ in data] + [t for _, _, c in data for _, t, _ in c]
        ids = iter(tokenize(transform_graph_dir, texts))
        q_ids = [next(ids) for _ in data]
        records = []
        for number, ((qid, _, cands), qi) in enumerate(zip(data, q_ids)):
            cand_ids = [(docid, next(ids), label) for docid, _, label in cands]
            if split == "train" and train_lists:  # lists of 4 to 6 candidates (both relevant)
                cand_ids = cand_ids[: len(cand_ids) - number % 3]
            if split == "train" and not train_lists:
                pos = [c for c in cand_ids if c[2] > 0]
                neg = [c for c in cand_ids if c[2] == 0]
                for p in pos:
                    group = [p] + rng.sample(neg, group_size - 1)
                    records.append(
                        group_example(
                            qid,
                            qi,
                            [g[0] for g in group],
                            [g[1] for g in group],
                            [g[2] for g in group],
                            [1] * group_size,
                        )
                    )
            else:
                for k, (docid, d, label) in enumerate(cand_ids):
                    judged = 0 if k == len(cand_ids) - 1 else 1  # one unjudged candidate
                    records.append(
                        group_example(qid, qi, [docid], [d], [label if judged else 0.0], [judged])
                    )
        _write_shards(os.path.join(root, f"Split-{split}"), records, 2)
    return root


def split_pattern(examples: str, split: str) -> list[str]:
    """The Trainer's view of a split: fn_args.train_files / eval_files style glob patterns."""
    return [os.path.join(examples, f"Split-{split}", "*")]


def read_records(pattern: str) -> list[bytes]:
    out = []
    for path in sorted(tf.io.gfile.glob(pattern)):
        out.extend(r.numpy() for r in tf.data.TFRecordDataset(path, compression_type="GZIP"))
    return out


# --------------------------------------------------------------------------- trainer helpers

MAX_Q, MAX_D = 8, 16


def fn_args(
    root, examples: str, transform_graph: str, cfg, steps: int, execution: int = 1, real=True
):
    """FnArgs as the Trainer component hands them to run_fn: the testdata's train and dev
    splits, `cfg` (a TrainerConfig) at the testdata's lengths, and execution `execution`'s
    serving and model_run directories in TFX's layout under `root`/Trainer (the checkpoints go
    beside them, trainer_module/checkpointing.py). `real=False`: a SimpleNamespace with the same
    attributes, for a subprocess that should not pay tfx's import (about 20 s)."""
    trainer = os.path.join(str(root), "Trainer")
    args = dict(
        working_dir=os.path.join(str(root), "work"),
        train_files=split_pattern(examples, "train"),
        eval_files=split_pattern(examples, "dev"),
        train_steps=steps,
        transform_graph_path=transform_graph,
        serving_model_dir=os.path.join(trainer, "model", str(execution), "Format-Serving"),
        model_run_dir=os.path.join(trainer, "model_run", str(execution)),
        custom_config={
            "trainer": cfg.to_dict(),
            "max_query_length": MAX_Q,
            "max_doc_length": MAX_D,
        },
    )
    if not real:
        return types.SimpleNamespace(**args)
    import tfx.v1 as tfx

    return tfx.components.FnArgs(**args)


def small_config(**overrides):
    """A TrainerConfig sized for CPU tests (tiny models, few steps)."""
    from trainer_module.config import TrainerConfig

    base = {
        "model": "knrm",
        "knrm": {"embedding_dim": 16},
        "conv_knrm": {"embedding_dim": 16, "filters": 16, "max_ngram": 2},
        "transformer": {
            "hidden_size": 32,
            "num_layers": 1,
            "num_heads": 2,
            "intermediate_size": 64,
        },
        "batch_size": 8,
        "eval_batch_size": 32,
        "learning_rate": 1e-2,
        "encoder_learning_rate": 1e-2,
        "train_steps": 20,
        "shuffle_buffer": 64,
        "checkpoint_every": 10,
        "validate_every": 10,
        "log_every": 10,
    }
    for key, value in overrides.items():
        if isinstance(value, dict) and isinstance(base.get(key), dict):
            base[key] = {**base[key], **value}
        else:
            base[key] = value
    return TrainerConfig.from_dict(base)


def frozen_documents_config(checkpoint_dir: str, **overrides):
    """small_config of the frozen-documents recipe: a dual encoder on `checkpoint_dir` without
    dropout, the list loss, learning rates 1e-2, no validation; `overrides` replace keys whole
    (a `recipe` given names its type too)."""
    base = {
        "model": "dual_encoder",
        "dual_encoder": {
            "checkpoint_dir": checkpoint_dir,
            "hidden_dropout": 0.0,
            "attention_dropout": 0.0,
        },
        "recipe": {"type": "frozen_documents"},
        "loss": "listwise_softmax",
        "validate_every": 0,
        "learning_rate": 1e-2,
        "encoder_learning_rate": 1e-2,
    }
    return small_config(**{**base, **overrides})


def vocab_size(transform_graph_dir: str) -> int:
    from trainer_module.run_fn import read_vocab

    return len(read_vocab(transform_graph_dir))


def make_controller(
    cfg,
    examples: str,
    transform_graph_dir: str,
    work_dir: str,
    strategy=None,
    doc_cache: dict | None = None,
):
    """A Controller over the test Examples; checkpoints under work_dir/ckpt. `doc_cache`: the
    frozen document vectors it starts with (run_fn prefills them from the corpus vectors)."""
    from trainer_module.task import RankingTask
    from trainer_module.training import Controller

    strategy = strategy or tf.distribute.get_strategy()
    task = RankingTask(cfg, vocab_size(transform_graph_dir), MAX_Q, MAX_D)
    return Controller(
        task,
        strategy,
        [os.path.join(examples, "Split-train", "*")],
        [os.path.join(examples, "Split-dev", "*")],
        os.path.join(work_dir, "ckpt"),
        os.path.join(work_dir, "model_run"),
        cfg.train_steps,
        doc_cache,
    )


def export_and_embed(model, transform_graph: str, tmp_path):
    """(the model exported with its tower signatures and loaded, two texts' ids as lists and
    padded, their document and query vectors through its embed signatures)."""
    from rankcore.constants import EMBED_DOC_SIGNATURE, EMBED_QUERY_SIGNATURE, EMBEDDING_OUTPUT
    from trainer_module.export import export_serving_model

    out = str(tmp_path / "serving")
    export_serving_model(model, transform_graph, MAX_Q, MAX_D, out, towers=True)
    loaded = tf.saved_model.load(out)
    texts = tokenize(transform_graph, ["w01 w02 w03", "w04 w05"])
    width = max(len(t) for t in texts)
    ids = tf.constant([t + [0] * (width - len(t)) for t in texts], tf.int64)
    docs = loaded.signatures[EMBED_DOC_SIGNATURE](ids=ids)[EMBEDDING_OUTPUT].numpy()
    queries = loaded.signatures[EMBED_QUERY_SIGNATURE](ids=ids)[EMBEDDING_OUTPUT].numpy()
    return loaded, texts, ids, docs, queries
