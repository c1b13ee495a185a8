"""RankingTask: what to train (model, inputs, loss, one train step); the loop lives in training.py.

Modelled on TF Model Garden's Task: build_model / build_inputs / forward / build_losses /
train_step. `forward` says what the model computes on a training batch (per-group scores
[b, n], or for the in-batch loss the batch's query x document score matrix [b, b * n]);
`build_losses` turns that into per-example losses; `train_step` only differentiates and applies.
"""

from __future__ import annotations

import logging
import time

import numpy as np
import tensorflow as tf
import tf_keras as keras

from trainer_module import inputs, losses, validation
from trainer_module.config import TrainerConfig
from trainer_module.models import build_model
from trainer_module.optimization import DualOptimizer


class RankingTask:
    def __init__(
        self,
        cfg: TrainerConfig,
        vocab_size: int,
        max_query_length: int,
        max_doc_length: int,
        vocab: list[str] | None = None,
    ):
        self.cfg = cfg
        self.vocab_size = vocab_size
        self.max_query_length = max_query_length
        self.max_doc_length = max_doc_length
        self.vocab = vocab
        self.loss_fn = losses.get_loss(cfg)
        # Dual encoder with frozen document vectors: trains on whole candidate lists.
        self.frozen_documents = cfg.model == "dual_encoder" and cfg.dual_encoder.frozen_documents

    # -- building blocks (call inside strategy.scope()) -----------------------------------
    def build_model(self) -> keras.Model:
        keras.utils.set_random_seed(self.cfg.seed)  # same initial weights on every (re)run
        return build_model(
            self.cfg, self.vocab_size, self.max_query_length, self.max_doc_length, self.vocab
        )

    def build_optimizer(self, model: keras.Model, total_steps: int) -> DualOptimizer:
        return DualOptimizer(self.cfg, model.trainable_variables, total_steps)

    def build_inputs(
        self,
        strategy: tf.distribute.Strategy,
        file_patterns: list[str],
        embed_doc: validation.EmbedFn | None = None,
        doc_cache: dict | None = None,
    ) -> tf.distribute.DistributedDataset:
        """Per-replica datasets; each replica gets batch_size / replicas groups per micro-batch
        (with frozen_documents: whole candidate lists, documents embedded once by `embed_doc`,
        kept in `doc_cache`)."""
        replicas = strategy.num_replicas_in_sync
        if self.cfg.batch_size % replicas:
            raise ValueError(
                f"trainer config: batch_size={self.cfg.batch_size} is not divisible by the "
                f"{replicas} replicas"
            )
        group_size = inputs.peek_group_size(file_patterns)
        if self.frozen_documents:
            if group_size != 1:
                raise ValueError(
                    "trainer config: dual_encoder.frozen_documents trains on each query's whole "
                    "candidate list, one candidate per group (datagen.sampling.mode: lists); "
                    f"the train split's groups hold {group_size} documents"
                )
            arrays = self.candidate_lists(file_patterns, embed_doc, doc_cache)
            return strategy.distribute_datasets_from_function(
                lambda ctx: inputs.make_list_dataset(
                    *arrays, self.cfg, ctx.get_per_replica_batch_size(self.cfg.batch_size), ctx
                )
            )

        def dataset_fn(ctx: tf.distribute.InputContext) -> tf.data.Dataset:
            return inputs.make_train_dataset(
                file_patterns,
                self.cfg,
                self.max_query_length,
                self.max_doc_length,
                group_size,
                ctx.get_per_replica_batch_size(self.cfg.batch_size),
                ctx,
            )

        return strategy.distribute_datasets_from_function(dataset_fn)

    def candidate_lists(
        self,
        file_patterns: list[str],
        embed_doc: validation.EmbedFn,
        doc_cache: dict | None,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(queries [Q, Lq], doc_vectors [Q, n, H], labels [Q, n], mask [Q, n]) of every train
        query with a relevant candidate (a list without one teaches nothing), each list in
        first-stage order; every distinct document embedded once."""
        t0 = time.monotonic()
        cands = validation.read_candidates(
            file_patterns, self.cfg.eval_batch_size, self.max_query_length, self.max_doc_length
        )
        docs = {k: v for k, v in cands.texts.items() if k[0] == "d"}
        cached = len(doc_cache) if doc_cache is not None else 0
        vectors = validation.embed_texts(
            {"d": embed_doc}, docs, self.cfg.eval_batch_size, doc_cache
        )
        lists: dict[str, list[str]] = {}
        for qid, docid in cands.pairs:
            lists.setdefault(qid, []).append(docid)
        qids = [q for q in lists if any(cands.labels[q][d] > 0 for d in lists[q])]
        if not qids:
            raise ValueError(
                f"no train query of {file_patterns} has a relevant candidate: "
                "dual_encoder.frozen_documents has nothing to learn from"
            )
        n = max(len(lists[q]) for q in qids)
        width = max(1, max(len(cands.texts[("q", q)]) for q in qids))
        dim = len(next(iter(vectors.values())))
        queries = np.zeros([len(qids), width], np.int64)
        doc_vectors = np.zeros([len(qids), n, dim], np.float32)
        labels = np.zeros([len(qids), n], np.float32)
        mask = np.zeros([len(qids), n], bool)
        for row, qid in enumerate(qids):
            ids = cands.texts[("q", qid)]
            queries[row, : len(ids)] = ids
            for col, docid in enumerate(lists[qid]):
                doc_vectors[row, col] = vectors[("d", docid)]
                labels[row, col] = max(cands.labels[qid][docid], 0.0)
                mask[row, col] = True
        embedded = len(doc_cache) - cached if doc_cache is not None else len(docs)
        logging.info(
            "frozen documents: %d train queries' candidate lists (up to %d candidates; %d "
            "queries without a relevant candidate left out) over %d documents, %d of them "
            "embedded now (the rest cached), in %.1fs",
            len(qids),
            n,
            len(lists) - len(qids),
            len(docs),
            embedded,
            time.monotonic() - t0,
        )
        return queries, doc_vectors, labels, mask

    # -- computation ----------------------------------------------------------------------
    @staticmethod
    def score_groups(model: keras.Model, batch: dict, training: bool) -> tf.Tensor:
        """query [b, Lq], docs [b, n, Ld] -> scores [b, n] (float32)."""
        docs = batch["docs"]
        n = tf.shape(docs)[1]
        flat_docs = tf.reshape(docs, [-1, tf.shape(docs)[2]])
        queries = tf.repeat(batch["query"], n, axis=0)
        scores = model((queries, flat_docs), training=training)
        return tf.reshape(tf.cast(scores, tf.float32), [-1, n])

    def forward(self, model: keras.Model, batch: dict, training: bool) -> dict[str, tf.Tensor]:
        """Model outputs on a training batch, as the configured loss needs them."""
        if self.frozen_documents:  # each query against its whole list of fixed doc vectors
            query = tf.cast(model.own_query(batch["query"], training=training), tf.float32)
            # The lists hold the vectors the model serves (with a companion encoder's appended,
            # trainer_module/models/dual_encoder.py); training scores its own tower's.
            documents = model.own_vectors(batch["doc_vectors"])
            cosine = tf.einsum("bh,bnh->bn", query, documents)
            padding = tf.constant(-1e9, tf.float32)
            return {"scores": tf.where(batch["mask"], cosine * self.cfg.in_batch_scale, padding)}
        if self.cfg.loss != "in_batch_softmax":
            return {"scores": self.score_groups(model, batch, training)}
        docs = batch["docs"]
        flat_docs = tf.reshape(docs, [-1, tf.shape(docs)[2]])
        queries = model.embed_query(batch["query"], training=training)  # [b, H], L2-normalised
        documents = model.embed_doc(flat_docs, training=training)  # [b * n, H]
        query = batch["query"]  # padded to one width within the batch
        same_query = tf.reduce_all(tf.equal(query[:, None, :], query[None, :, :]), axis=-1)
        return {
            "scores": tf.matmul(queries, documents, transpose_b=True),  # cosine [b, b * n]
            "same_query": same_query,
        }

    def build_losses(self, batch: dict, outputs: dict[str, tf.Tensor]) -> tf.Tensor:
        """Per-example losses [b] from `forward`'s outputs."""
        if self.cfg.loss == "in_batch_softmax":
            return self.loss_fn(outputs["scores"], batch["labels"], outputs["same_query"])
        return self.loss_fn(outputs["scores"], batch["labels"])

    def train_step(
        self,
        model: keras.Model,
        optimizer: DualOptimizer,
        batch: dict,
        loss_scale: tf.Variable | None = None,
    ) -> dict[str, tf.Tensor]:
        """One optimizer step on this replica's batch (run inside strategy.run).

        The batch is split into grad_accumulation_steps strided micro-batches; each micro loss
        is divided by the GLOBAL example count of the whole step, so the summed (and then
        all-reduced) gradient is the gradient of the mean loss over the effective batch.
        """
        ctx = tf.distribute.get_replica_context()
        variables = optimizer.trainable_variables
        accum = self.cfg.grad_accumulation_steps
        local = tf.shape(batch["labels"])[0]
        global_examples = ctx.all_reduce(tf.distribute.ReduceOp.SUM, local)
        total_loss = tf.constant(0.0)
        grads: list[tf.Tensor] | None = None
        for i in range(accum):
            micro = {k: v[i::accum] for k, v in batch.items()} if accum > 1 else batch
            with tf.GradientTape() as tape:
                outputs = self.forward(model, micro, training=True)
                loss = losses.reduce_loss(self.build_losses(micro, outputs), global_examples)
                scaled = loss * loss_scale if loss_scale is not None else loss
            micro_grads = tape.gradient(scaled, variables)
            micro_grads = [
                tf.zeros_like(v) if g is None else g for g, v in zip(micro_grads, variables)
            ]
            if accum > 1:  # sum densely; IndexedSlices cannot be added in place
                micro_grads = [tf.convert_to_tensor(g) for g in micro_grads]
                grads = (
                    micro_grads if grads is None else [a + b for a, b in zip(grads, micro_grads)]
                )
            else:
                grads = micro_grads
            total_loss += loss
        grads = ctx.all_reduce(tf.distribute.ReduceOp.SUM, grads)
        finite = tf.constant(True)
        if loss_scale is not None:
            grads = [g / loss_scale for g in grads]
            finite = tf.reduce_all(
                [tf.reduce_all(tf.math.is_finite(tf.convert_to_tensor(g))) for g in grads]
            )
            # fp16 overflow: apply zeros this step and shrink the scale (no exact skip).
            grads = [tf.where(finite, tf.convert_to_tensor(g), 0.0) for g in grads]
        norm = optimizer.apply(grads)
        return {"loss": total_loss, "grad_norm": norm, "examples": local, "finite": finite}
