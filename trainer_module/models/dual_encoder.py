"""Dual encoder (bi-encoder) from a pretrained BERT-family checkpoint, used as sentence-transformers
uses all-MiniLM-L6-v2: query and document are encoded separately by the same encoder
(`[CLS] text [SEP]`, token types 0), the final hidden states are mean-pooled over the real tokens
(`[CLS]` and `[SEP]` included, as the sentence-transformers attention mask includes them), L2
normalised, and the score is the cosine similarity of the two vectors (rankcore/encoders/
sentence.py, the one definition of that embedding, shared with RankingDataGen's dense retrieval).

The model keeps the registry's contract ((query ids [B, Lq], doc ids [B, Ld]) -> scores [B]) for
validation, export and evaluation, and exposes `embed_query` / `embed_doc` so the in-batch loss
(trainer_module/losses.py: in_batch_softmax) can score every query of a batch against every
document of it, and export and evaluation can embed each text once.

With `frozen_documents` the model has two towers: documents are embedded by a second, frozen
copy of the checkpoint (`dual_encoder/document_encoder/...`, not trainable, no dropout) and only
the query encoder trains, against the checkpoint's document vectors (ADORE: Zhan et al.,
"Optimizing Dense Retrieval Model Training with Hard Negatives", SIGIR 2021, which trains the
query encoder of a dense retriever against a fixed document index). The documents' vectors then
never change, so the Trainer embeds each document once and trains on every candidate of a
query at once (RankingTask, trainer_module/inputs.py: make_list_dataset).

Variables: the (query) encoder lives under `dual_encoder/encoder/...` (the "encoder" group of
`encoder_patterns`, trained at `encoder_learning_rate`); there are no other trainable variables.
"""

from __future__ import annotations

import tensorflow as tf
import tf_keras as keras

from rankcore.encoders import hf_checkpoint
from rankcore.encoders.bert import BertEncoder
from rankcore.encoders.hf_checkpoint import BertArchitecture
from rankcore.encoders.sentence import frame_single, mean_pool
from trainer_module.config import DualEncoderConfig


class DualEncoder(keras.Model):
    """(query ids [B, Lq], doc ids [B, Ld]) -> cosine similarity [B] (float32)."""

    def __init__(
        self,
        arch: BertArchitecture,
        cfg: DualEncoderConfig,
        cls_id: int,
        sep_id: int,
        seed: int,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.arch = arch
        self.cls_id, self.sep_id = cls_id, sep_id
        self.rng = tf.random.Generator.from_seed(seed)
        hidden, attention = hf_checkpoint.dropout_rates(
            arch, cfg.hidden_dropout, cfg.attention_dropout
        )
        # Mean pooling reads no pooler: the checkpoint's pooler (if any) stays unloaded.
        self.encoder = BertEncoder(arch, hidden, attention, self.rng, False, name="encoder")
        self.document_encoder = None
        if cfg.frozen_documents:
            self.document_encoder = BertEncoder(
                arch, 0.0, 0.0, self.rng, False, name="document_encoder"
            )
            self.document_encoder.trainable = False

    def _embed(self, encoder: BertEncoder, ids: tf.Tensor, training: bool) -> tf.Tensor:
        tokens, types, positions, mask = frame_single(ids, self.cls_id, self.sep_id)
        hidden, _ = encoder(tokens, types, positions, mask, training=training)
        return mean_pool(hidden, mask)

    def embed_query(self, ids: tf.Tensor, training: bool = False) -> tf.Tensor:
        """Right-padded query ids [B, L] -> L2-normalised mean-pooled embeddings [B, H]."""
        return self._embed(self.encoder, ids, training)

    def embed_doc(self, ids: tf.Tensor, training: bool = False) -> tf.Tensor:
        """Right-padded document ids [B, L] -> L2-normalised mean-pooled embeddings [B, H]
        (the frozen document tower's with frozen_documents: never in training mode)."""
        if self.document_encoder is not None:
            return self._embed(self.document_encoder, ids, False)
        return self._embed(self.encoder, ids, training)

    def call(self, inputs: tuple[tf.Tensor, tf.Tensor], training: bool = False) -> tf.Tensor:
        query, doc = inputs
        return tf.reduce_sum(
            self.embed_query(query, training=training) * self.embed_doc(doc, training=training),
            axis=-1,
        )

    def checkpoint_variables(self) -> dict[str, tuple[tf.Variable, bool]]:
        """The trained (query) encoder's variables by Hugging Face tensor name."""
        return self.encoder.checkpoint_variables()


def build_dual_encoder(
    cfg: DualEncoderConfig,
    seed: int,
    vocab_size: int,
    vocab: list[str] | None,
    max_query_length: int,
    max_doc_length: int,
) -> DualEncoder:
    """Reads the checkpoint, checks it fits the data, builds the model and loads the weights."""
    if not cfg.checkpoint_dir:
        raise ValueError(
            "trainer config: dual_encoder.checkpoint_dir is required for model=dual_encoder"
        )
    checkpoint, cls_id, sep_id = hf_checkpoint.open_checkpoint(
        cfg.checkpoint_dir,
        "dual_encoder",
        vocab_size,
        vocab,
        max(max_query_length, max_doc_length) + 2,
    )
    model = DualEncoder(checkpoint.arch, cfg, cls_id, sep_id, seed, name="dual_encoder")
    dummy = tf.ones([1, 2], tf.int64)
    model((dummy, dummy), training=False)  # create the variables, then overwrite them
    hf_checkpoint.load_into(model.checkpoint_variables(), checkpoint)
    if model.document_encoder is not None:  # the frozen tower starts as the checkpoint too
        hf_checkpoint.load_into(model.document_encoder.checkpoint_variables(), checkpoint)
    return model
