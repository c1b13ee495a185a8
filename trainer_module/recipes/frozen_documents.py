"""frozen_documents: a dual encoder's query tower trained against fixed document vectors (ADORE,
Zhan et al. 2021; docs/trainer.md "Frozen documents").

The documents keep the checkpoint's vectors (a frozen second copy of the encoder embeds them,
and with `recipe.frozen_documents.companion_checkpoint_dir` a second sentence encoder's are
appended, trainer_module/models/dual_encoder.py), so each distinct document is embedded once:
from the corpus-vectors artifact when the pipeline has a CorpusEncoder (run_fn prefills the
cache, rankcore/corpus_vectors.py), else by the model. Each train query's whole candidate list
(datagen.sampling.mode: lists) is scored at once, softmax over cosine * in_batch_scale: the
tower's own cosine, or with `train_score: served` the score the model serves (its cosine mixed
with the frozen companion's), so the tower learns what the companion misses.
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import replace
from typing import TYPE_CHECKING

from trainer_module.config_rules import require
from trainer_module.models.registry import offers_towers
from trainer_module.recipes.base import DocCache, Recipe

if TYPE_CHECKING:
    from collections.abc import Callable

    import numpy as np
    import tensorflow as tf
    import tf_keras as keras

    from rankcore.corpus_vectors import DocumentTower, QueryTower
    from trainer_module.config import TrainerConfig
    from trainer_module.inputs import CandidateLists


class FrozenDocuments(Recipe):
    name = "frozen_documents"
    train_data = "lists"

    @classmethod
    def check(cls, cfg: TrainerConfig) -> None:
        require(
            offers_towers(cfg.model) and cfg.loss == "listwise_softmax",
            "recipe.type",
            "frozen_documents needs model=dual_encoder and loss=listwise_softmax (it scores "
            f"each train query's whole candidate list), got model={cfg.model}, loss={cfg.loss}",
        )

    def checkpoint_dirs(self) -> dict[str, str]:
        companion = self.cfg.recipe.frozen_documents.companion_checkpoint_dir
        key = "recipe.frozen_documents.companion_checkpoint_dir"
        return {key: companion} if companion else {}

    def describe(self) -> list[str]:
        lines = [
            f"recipe `{self.name}`: the query tower trained against the checkpoint's document "
            "vectors (each train query's whole candidate list)"
        ]
        own = self.cfg.recipe.frozen_documents
        if own.companion_checkpoint_dir:
            w = own.companion_weight
            lines.append(
                f"companion encoder `{own.companion_checkpoint_dir}`, used as it is: every "
                f"vector is the model's and the companion's concatenated, a score {1 - w:.2f} "
                f"* the model's cosine + {w:.2f} * the companion's"
            )
            trained = "that served score" if self.served else "the model's own cosine"
            lines.append(f"the list loss trained on {trained}")
        return lines

    @property
    def served(self) -> bool:
        """Whether the loss scores what the model serves (train_score: served)."""
        return self.cfg.recipe.frozen_documents.train_score == "served"

    def build_model(
        self, vocab_size: int, max_query_length: int, max_doc_length: int, vocab: list[str] | None
    ) -> keras.Model:
        """The dual encoder with its frozen document tower (and companion), its variables
        created and loaded by build_dual_encoder in the caller's scope."""
        from trainer_module.models.dual_encoder import build_dual_encoder

        own = self.cfg.recipe.frozen_documents
        return build_dual_encoder(
            self.cfg.dual_encoder,
            self.cfg.seed,
            vocab_size,
            vocab,
            max_query_length,
            max_doc_length,
            frozen_documents=True,
            companion_checkpoint_dir=own.companion_checkpoint_dir,
            companion_weight=own.companion_weight,
        )

    def document_tower(self, max_doc_length: int, precision: str | None = None) -> DocumentTower:
        """The tower DualEncoder.embed_doc computes with frozen documents: the checkpoint's
        vector, [sqrt(1 - w) own, sqrt(w) companion] with a companion, under `precision` (the
        Trainer's policy name; None: the policy hardware.precision_policy chooses for the
        config under the default strategy, as the Trainer does without TPU or several
        workers, so the pipeline's encoder keys and the Trainer's agree)."""
        from rankcore.corpus_vectors import DocumentTower, EncoderSpec

        if precision is None:
            import tensorflow as tf

            from trainer_module import hardware

            precision = hardware.precision_policy(self.cfg, tf.distribute.get_strategy())
        own = self.cfg.recipe.frozen_documents
        companion = own.companion_checkpoint_dir
        return DocumentTower.with_companion(
            EncoderSpec(self.cfg.dual_encoder.checkpoint_dir, max_doc_length, precision),
            EncoderSpec(companion, max_doc_length, precision) if companion else None,
            own.companion_weight,
        )

    def query_tower(
        self, own_dims: int, max_query_length: int, precision: str, complete: bool = True
    ) -> QueryTower:
        """DualEncoder.embed_query's vector: the trained tower's, then with a companion the
        companion's over the query's ids cut as the query's, times sqrt(w)."""
        from rankcore.corpus_vectors import EncoderSpec, QueryTower

        own = self.cfg.recipe.frozen_documents
        frozen = ()
        if own.companion_checkpoint_dir:
            spec = EncoderSpec(own.companion_checkpoint_dir, max_query_length, precision)
            frozen = ((spec, math.sqrt(own.companion_weight)),)
        return QueryTower(own_dims, frozen, complete)

    def companion_weights(self) -> tuple[float, ...]:
        return tuple(self.cfg.recipe.frozen_documents.companion_weights)

    def at_companion_weight(
        self, weight: float, own_dims: int
    ) -> tuple[FrozenDocuments, Callable[[np.ndarray], np.ndarray]]:
        """This recipe at companion weight `weight`, and the map from a served vector at this
        recipe's weight w, [sqrt(1 - w) own, sqrt(w) companion] with `own_dims` own values,
        to the same model's at `weight`: no encoder runs again."""
        import numpy as np

        own = self.cfg.recipe.frozen_documents
        cfg = replace(
            self.cfg,
            recipe=replace(self.cfg.recipe, frozen_documents=replace(own, companion_weight=weight)),
        )
        scales = (
            np.float32(math.sqrt((1.0 - weight) / (1.0 - own.companion_weight))),
            np.float32(math.sqrt(weight / own.companion_weight)),
        )

        def rescale(vector: np.ndarray) -> np.ndarray:
            return np.concatenate([scales[0] * vector[:own_dims], scales[1] * vector[own_dims:]])

        return FrozenDocuments(cfg), rescale

    def prepare_export(self, model: keras.Model) -> None:
        # The weight enters the served vectors as a constant when the export traces them
        # (DualEncoder._with_companion); training never read it (train_score: own).
        model.companion_weight = self.cfg.recipe.frozen_documents.companion_weight

    def document_cache(self) -> DocCache:
        return {}

    def build_inputs(
        self,
        strategy: tf.distribute.Strategy,
        file_patterns: list[str],
        lengths: tuple[int, int],
        embed_doc: object | None = None,
        doc_cache: DocCache | None = None,
        embed_query: object | None = None,
    ) -> tf.distribute.DistributedDataset:
        """Whole candidate lists, every document embedded once by `embed_doc` (the ones not
        already in `doc_cache`, which keeps them); with train_score: served, each train query's
        served vector before training too (`embed_query`: its companion part stays fixed)."""
        from trainer_module import inputs

        group_size = inputs.peek_group_size(file_patterns)
        if group_size != 1:
            raise ValueError(
                "trainer config: recipe.type frozen_documents trains on each query's whole "
                "candidate list, one candidate per group (datagen.sampling.mode: lists); "
                f"the train split's groups hold {group_size} documents"
            )
        lists = self.candidate_lists(file_patterns, lengths, embed_doc, doc_cache)
        extra = {}
        if self.served:
            extra["query_vectors"] = self.query_vectors(lists.queries, embed_query)
        batch_size = self.cfg.batch_size
        return strategy.distribute_datasets_from_function(
            lambda ctx: inputs.make_list_dataset(
                lists, self.cfg, ctx.get_per_replica_batch_size(batch_size), ctx, extra
            )
        )

    def query_vectors(self, queries: np.ndarray, embed_query: object) -> np.ndarray:
        """The served vectors [Q, H + H'] of the train queries' padded ids [Q, Lq]."""
        import numpy as np

        from trainer_module import validation

        if embed_query is None:
            raise ValueError("train_score: served needs the model's query tower (embed_query)")
        texts = {("q", str(row)): [int(t) for t in ids if t] for row, ids in enumerate(queries)}
        vectors = validation.embed_texts({"q": embed_query}, texts, self.cfg.eval_batch_size)
        return np.stack([vectors[("q", str(row))] for row in range(len(queries))])

    def candidate_lists(
        self,
        file_patterns: list[str],
        lengths: tuple[int, int],
        embed_doc: object,
        doc_cache: DocCache | None,
    ) -> CandidateLists:
        """The candidate lists (inputs.CandidateLists) of every train query with a relevant
        candidate (a list without one teaches nothing), each list in first-stage order; every
        distinct document embedded once and held once, as a row of the lists' table."""
        import numpy as np

        from trainer_module import validation
        from trainer_module.inputs import CandidateLists

        t0 = time.monotonic()
        cands = validation.read_candidates(file_patterns, self.cfg.eval_batch_size, *lengths)
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
                "recipe.type frozen_documents has nothing to learn from"
            )
        n = max(len(lists[q]) for q in qids)
        width = max(1, max(len(cands.texts[("q", q)]) for q in qids))
        docids = sorted({d for q in qids for d in lists[q]})
        row_of = {docid: row for row, docid in enumerate(docids, 1)}  # row 0: padding
        documents = np.zeros([len(docids) + 1, len(next(iter(vectors.values())))], np.float32)
        for docid, row in row_of.items():
            documents[row] = vectors[("d", docid)]
        queries = np.zeros([len(qids), width], np.int64)
        doc_index = np.zeros([len(qids), n], np.int32)
        labels = np.zeros([len(qids), n], np.float32)
        mask = np.zeros([len(qids), n], bool)
        for row, qid in enumerate(qids):
            ids = cands.texts[("q", qid)]
            queries[row, : len(ids)] = ids
            for col, docid in enumerate(lists[qid]):
                doc_index[row, col] = row_of[docid]
                labels[row, col] = max(cands.labels[qid][docid], 0.0)
                mask[row, col] = True
        embedded = len(doc_cache) - cached if doc_cache is not None else len(docs)
        logging.info(
            "frozen documents: %d train queries' candidate lists (up to %d candidates; %d "
            "queries without a relevant candidate left out) over %d documents, %d of them "
            "embedded now (the rest from the corpus vectors or cached), in %.1fs",
            len(qids),
            n,
            len(lists) - len(qids),
            len(docs),
            embedded,
            time.monotonic() - t0,
        )
        return CandidateLists(queries, doc_index, documents, labels, mask)

    def forward(self, model: keras.Model, batch: dict, training: bool) -> dict[str, tf.Tensor]:
        """Each query against its whole list of fixed document vectors: scores [b, n]."""
        import tensorflow as tf

        query = tf.cast(model.own_query(batch["query"], training=training), tf.float32)
        # The lists hold the vectors the model serves (with a companion encoder's appended,
        # trainer_module/models/dual_encoder.py); training scores its own tower's, or with
        # train_score: served the served query vector with this step's own part.
        if self.served:
            query = model.with_own(batch["query_vectors"], query)
            documents = batch["doc_vectors"]
        else:
            documents = model.own_vectors(batch["doc_vectors"])
        cosine = tf.einsum("bh,bnh->bn", query, documents)
        padding = tf.constant(-1e9, tf.float32)
        return {"scores": tf.where(batch["mask"], cosine * self.cfg.in_batch_scale, padding)}
