"""Dual encoder (bi-encoder) from a pretrained BERT-family checkpoint, used as sentence-transformers
uses all-MiniLM-L6-v2: query and document are encoded separately by the same encoder
(`[CLS] text [SEP]`, token types 0), the final hidden states are mean-pooled over the real tokens
(`[CLS]` and `[SEP]` included, as the sentence-transformers attention mask includes them), L2
normalised, and the score is the cosine similarity of the two vectors (rankcore/encoders/
sentence.py, the one definition of that embedding, shared with RankingDataGen's dense retrieval).
An MPNet checkpoint (all-mpnet-base-v2) is framed as sentence-transformers frames it, `<s> text
</s>` at its own ids (sentence.framer): the examples' ids are WordPiece ids, which MPNet's
vocab.txt holds after its four specials.

The model keeps the registry's contract ((query ids [B, Lq], doc ids [B, Ld]) -> scores [B]) for
validation, export and evaluation, and exposes `embed_query` / `embed_doc` so the in-batch loss
(trainer_module/losses.py: in_batch_softmax) can score every query of a batch against every
document of it, and export and evaluation can embed each text once.

With `frozen_documents` (the frozen-documents recipe, trainer_module/recipes/) the model has two
towers: documents are embedded by a second, frozen copy of the checkpoint
(`dual_encoder/document_encoder/...`, not trainable, no dropout) and only the query encoder
trains, against the checkpoint's document vectors (ADORE: Zhan et al., "Optimizing Dense
Retrieval Model Training with Hard Negatives", SIGIR 2021, which trains the query encoder
of a dense retriever against a fixed document index). The documents' vectors then
never change, so the Trainer embeds each document once and trains on every candidate of a
query at once (trainer_module/recipes/frozen_documents.py, inputs.py: make_list_dataset).

With that recipe's `companion_checkpoint_dir` a second sentence encoder (all-mpnet-base-v2) runs
beside the model as it is, frozen, under `dual_encoder/companion_encoder/...`: the vectors the model
serves (`embed_query` / `embed_doc`: validation, export, evaluation) are
[sqrt(1 - w) * own, sqrt(w) * companion], unit norm, so a cosine is the weighted mean of the two
cosines and feedback, fusion and the evaluator take the wider vectors as they are. Training
(`own_query`, and `own_vectors` of the frozen document vectors) scores with the model's own
tower alone: the recipe measured on dev trained the query tower alone and appended the companion
after (docs/trainer.md "Companion encoder"). Concatenating two encoders' embeddings is the
simplest dense-retriever ensemble; here it fuses two dense scores without a second fusion
weight to tune.

Variables: the (query) encoder lives under `dual_encoder/encoder/...` (the "encoder" group of
`encoder_patterns`, trained at `encoder_learning_rate`); there are no other trainable variables.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import tensorflow as tf

from rankcore.encoders import hf_checkpoint
from rankcore.encoders.bert import BertEncoder
from rankcore.encoders.hf_checkpoint import BertArchitecture
from rankcore.encoders.sentence import framer, mean_pool
from trainer_module.config import DualEncoderConfig
from trainer_module.models.encoder_model import EncoderModel, open_model_checkpoint

# Where a companion checkpoint is configured (the frozen-documents recipe's option).
COMPANION_KEY = "recipe.frozen_documents.companion_checkpoint_dir"


class DualEncoder(EncoderModel):
    """(query ids [B, Lq], doc ids [B, Ld]) -> cosine similarity [B] (float32)."""

    def __init__(
        self,
        arch: BertArchitecture,
        cfg: DualEncoderConfig,
        cls_id: int,
        sep_id: int,
        seed: int,
        companion: hf_checkpoint.BertCheckpoint | None = None,
        frozen_documents: bool = False,
        companion_weight: float = 0.5,
        *,
        frame: Callable,
        **kwargs,
    ):
        super().__init__(arch, cfg, cls_id, sep_id, seed, **kwargs)
        # The checkpoint's framing of one text (sentence.framer: [CLS] text [SEP] for BERT, MPNet's
        # <s> text </s> at its own ids).
        self._frame = frame
        # Mean pooling reads no pooler: the checkpoint's pooler (if any) stays unloaded.
        self.encoder = BertEncoder(
            arch, self.hidden_dropout, self.attention_dropout, self.rng, False, name="encoder"
        )
        self.document_encoder = None
        if frozen_documents:
            self.document_encoder = BertEncoder(
                arch, 0.0, 0.0, self.rng, False, name="document_encoder"
            )
            self.document_encoder.trainable = False
        self.companion_encoder = None
        self._companion_frame: Callable | None = None
        self.companion_weight = companion_weight
        if companion is not None:
            self.companion_encoder = BertEncoder(
                companion.arch, 0.0, 0.0, self.rng, False, name="companion_encoder"
            )
            self.companion_encoder.trainable = False
            self._companion_frame = framer(companion, COMPANION_KEY)

    def _embed(self, encoder: BertEncoder, ids: tf.Tensor, training: bool) -> tf.Tensor:
        tokens, types, positions, mask = self._frame(ids)
        hidden, _ = encoder(tokens, types, positions, mask, training=training)
        return mean_pool(hidden, mask)

    def _with_companion(self, own: tf.Tensor, ids: tf.Tensor) -> tf.Tensor:
        """[sqrt(1 - w) own, sqrt(w) companion]; `own` without a companion."""
        if self.companion_encoder is None:
            return own
        tokens, types, positions, mask = self._companion_frame(ids)
        hidden, _ = self.companion_encoder(tokens, types, positions, mask, training=False)
        other = mean_pool(hidden, mask)
        return tf.concat([self._served_own(own), math.sqrt(self.companion_weight) * other], axis=-1)

    def _served_own(self, own: tf.Tensor) -> tf.Tensor:
        """The own tower's part of a served vector: `own` in float32, times sqrt(1 - w) with a
        companion."""
        own = tf.cast(own, tf.float32)
        if self.companion_encoder is None:
            return own
        return math.sqrt(1.0 - self.companion_weight) * own

    def own_vectors(self, vectors: tf.Tensor) -> tf.Tensor:
        """Served vectors [..., H (+ H')] -> the model's own tower's part (what training
        scores with): the vectors themselves without a companion."""
        if self.companion_encoder is None:
            return vectors
        own = vectors[..., : self.arch.hidden_size]
        return own / math.sqrt(1.0 - self.companion_weight)

    def with_own(self, served: tf.Tensor, own: tf.Tensor) -> tf.Tensor:
        """Served vectors [B, H + H'] with their own part replaced by `own` [B, H] (the
        companion's part kept): what the model serves once its own tower gives `own`."""
        if self.companion_encoder is None:
            return self._served_own(own)
        return tf.concat([self._served_own(own), served[..., self.arch.hidden_size :]], axis=-1)

    def own_query(self, ids: tf.Tensor, training: bool = False) -> tf.Tensor:
        """The model's own query tower [B, H]: what training scores (no companion)."""
        return self._embed(self.encoder, ids, training)

    def own_query_part(self, ids: tf.Tensor) -> tf.Tensor:
        """The first hidden_size values of embed_query (float32): the trained tower's part,
        what a fold model exports (trainer_module/export.py export_query_tower)."""
        return self._served_own(self.own_query(ids, training=False))

    def embed_query(self, ids: tf.Tensor, training: bool = False) -> tf.Tensor:
        """Right-padded query ids [B, L] -> L2-normalised mean-pooled embeddings [B, H] (with a
        companion: [B, H + H'], see the module docstring)."""
        return self._with_companion(self.own_query(ids, training), ids)

    def embed_doc(self, ids: tf.Tensor, training: bool = False) -> tf.Tensor:
        """Right-padded document ids [B, L] -> L2-normalised mean-pooled embeddings [B, H]
        (the frozen document tower's with frozen_documents: never in training mode; with a
        companion: [B, H + H'])."""
        if self.document_encoder is not None:
            own = self._embed(self.document_encoder, ids, False)
        else:
            own = self._embed(self.encoder, ids, training)
        return self._with_companion(own, ids)

    def call(self, inputs: tuple[tf.Tensor, tf.Tensor], training: bool = False) -> tf.Tensor:
        query, doc = inputs
        return tf.reduce_sum(
            self.embed_query(query, training=training) * self.embed_doc(doc, training=training),
            axis=-1,
        )

    def training_state(self) -> tf.Module:
        """What a training checkpoint holds (training.Controller): the trained encoder and the
        dropout generator. The frozen towers are left out: build_dual_encoder loads them from
        their checkpoints at every build, and training never changes them."""
        state = tf.Module(name="dual_encoder_state")
        state.encoder = self.encoder
        state.rng = self.rng
        return state


def build_dual_encoder(
    cfg: DualEncoderConfig,
    seed: int,
    vocab_size: int,
    vocab: list[str] | None,
    max_query_length: int,
    max_doc_length: int,
    frozen_documents: bool = False,
    companion_checkpoint_dir: str | None = None,
    companion_weight: float = 0.5,
) -> DualEncoder:
    """Reads the checkpoint (and the companion's), checks they fit the data ([CLS] text [SEP]
    of the longer side within their positions), builds the towers and loads the weights.
    `frozen_documents` and the companion are the frozen-documents recipe's
    (trainer_module/recipes/frozen_documents.py)."""
    checkpoint, cls_id, sep_id = open_model_checkpoint(
        "dual_encoder",
        cfg,
        vocab_size,
        vocab,
        max(max_query_length, max_doc_length) + 2,
        sentence_encoder=True,
    )
    companion = None
    if companion_checkpoint_dir:
        companion = open_companion(
            companion_checkpoint_dir,
            checkpoint,
            max(max_query_length, max_doc_length) + 2,
        )
    model = DualEncoder(
        checkpoint.arch,
        cfg,
        cls_id,
        sep_id,
        seed,
        companion,
        frozen_documents,
        companion_weight,
        frame=framer(checkpoint, "dual_encoder"),
        name="dual_encoder",
    )
    model.create_variables()
    model.load_checkpoint(checkpoint)  # the trained (query) encoder
    if model.document_encoder is not None:  # the frozen tower starts as the checkpoint too
        hf_checkpoint.load_into(model.document_encoder.checkpoint_variables(), checkpoint)
    if companion is not None:
        hf_checkpoint.load_into(model.companion_encoder.checkpoint_variables(), companion)
    return model


def open_companion(
    directory: str, checkpoint: hf_checkpoint.BertCheckpoint, longest_input: int
) -> hf_checkpoint.BertCheckpoint:
    """Reads the companion checkpoint and checks it reads the model's ids: its WordPiece
    vocabulary is the model's token for token (vocab.txt, without MPNet's specials), and the
    longest framed input fits its positions."""
    key = f"trainer config: {COMPANION_KEY}"
    companion = hf_checkpoint.read_checkpoint(directory)
    theirs, ours = companion.wordpiece_vocab, checkpoint.wordpiece_vocab
    if theirs != ours:
        at = next(
            (i for i, (a, b) in enumerate(zip(ours, theirs)) if a != b), min(len(ours), len(theirs))
        )
        found = (
            f"{ours[at]!r} vs {theirs[at]!r}"
            if at < min(len(ours), len(theirs))
            else f"{len(ours)} vs {len(theirs)} tokens"
        )
        raise ValueError(
            f"{key}: {directory}/{hf_checkpoint.VOCAB_FILE} is not the WordPiece vocabulary of "
            f"{checkpoint.directory}/{hf_checkpoint.VOCAB_FILE}: they differ at WordPiece id "
            f"{at} ({found}; line {at + 1 + companion.id_offset} of the companion's); the "
            "companion reads the model's token ids"
        )
    if longest_input > companion.arch.positions_used:
        raise ValueError(
            f"{key}: the longest input ({longest_input} tokens with its two specials) exceeds "
            f"the companion's {companion.arch.positions_used} positions"
        )
    return companion
