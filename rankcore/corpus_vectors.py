"""The corpus-vectors artifact: every document of the collection embedded once per sentence
encoder, read by everything that needs a document's vector from a checkpoint as it is.

Three steps of a run embed the same documents with the same frozen encoders: RankingDataGen's
dense hybrid retrieval (MiniLM over the whole corpus), every fold's Trainer whose recipe trains
against frozen documents (MiniLM, and the MPNet companion beside it), and the RankingEvaluator
scoring those models. The CorpusEncoder component (components/corpus_encoder/) embeds each
document once per encoder in a Beam job and writes this artifact; TFX and KFP cache it like
any other output, so a run that changes only the Trainer or the evaluator settings reuses it
and no Trainer pod embeds the corpus.

An encoder's vectors are identified by `EncoderSpec.key()`: a digest of the checkpoint's files
(not its path), the cut of the token ids and the precision policy. A *document tower*
(`DocumentTower`) is what a model serves for a document: one encoder's vector, or several
concatenated with scales (the dual encoder's companion: [sqrt(1 - w) own, sqrt(w) companion],
trainer_module/models/dual_encoder.py). The model that serves that tower writes it beside its
SavedModel (`DocumentTower.write`), so the evaluator can take the model's document vectors from
the artifact without asking the model what it is.

Lookups are by the document's cut token ids (`vectors_by_ids`): what the Trainer and the
evaluator hold are the examples' ids, and a document whose ids differ from the encoded ones
(another tokenization) is then a miss, embedded by the reader, never a wrong vector. Dense
retrieval looks up by docid (`EncoderTable.by_docid`).

In rankcore because components (the encoder, datagen, evaluator) and trainer_module read it.
Layout: `<uri>/<encoder key>/vectors-*.tfrecord.gz` (one tf.Example per document: docid, ids,
vector) and `<uri>/corpus_vectors.json` (the encoders and counts, written last).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field, replace

import numpy as np
import tensorflow as tf

from rankcore.encoders import hf_checkpoint
from rankcore.file_io import write_text_atomic

META_FILE = "corpus_vectors.json"
SHARD_PREFIX = "vectors"  # <uri>/<key>/vectors-00000-of-00004.tfrecord.gz
SHARD_SUFFIX = ".tfrecord.gz"
DOCUMENT_TOWER_FILE = "document_tower.json"  # beside a SavedModel (DocumentTower.write)
QUERY_TOWER_FILE = "query_tower.json"  # beside a SavedModel (QueryTower.write)
FLOAT32 = "float32"  # the precision policy's name when none is set


@dataclass(frozen=True)
class EncoderSpec:
    """One sentence encoder over the corpus: a checkpoint as it is (rankcore/encoders/
    sentence.py), document ids cut to `max_length`, under a precision policy."""

    checkpoint_dir: str
    max_length: int
    precision: str = FLOAT32

    def key(self) -> str:
        """The identity of this encoder's vectors: the checkpoint's file digest (not its
        path), the cut and the precision."""
        parts = (
            hf_checkpoint.checkpoint_digest(self.checkpoint_dir),
            str(self.max_length),
            self.precision,
        )
        return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:20]


def to_example(docid: str, ids: Sequence[int], vector: np.ndarray) -> bytes:
    feature = {
        "docid": tf.train.Feature(bytes_list=tf.train.BytesList(value=[docid.encode()])),
        "ids": tf.train.Feature(int64_list=tf.train.Int64List(value=list(ids))),
        "vector": tf.train.Feature(
            float_list=tf.train.FloatList(value=np.asarray(vector, np.float32))
        ),
    }
    return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()


def from_example(serialized: bytes) -> tuple[str, tuple[int, ...], np.ndarray]:
    """(docid, cut token ids, float32 vector) of one record."""
    f = tf.train.Example.FromString(serialized).features.feature
    return (
        f["docid"].bytes_list.value[0].decode(),
        tuple(f["ids"].int64_list.value),
        np.asarray(f["vector"].float_list.value, np.float32),
    )


@dataclass(frozen=True)
class EncodedMeta:
    """One encoder's entry in corpus_vectors.json."""

    key: str
    checkpoint_dir: str
    max_length: int
    precision: str
    documents: int
    dim: int


@dataclass(frozen=True)
class CorpusMeta:
    encoders: tuple[EncodedMeta, ...] = field(default_factory=tuple)

    def by_key(self) -> dict[str, EncodedMeta]:
        return {e.key: e for e in self.encoders}


def write_meta(uri: str, meta: CorpusMeta) -> None:
    """corpus_vectors.json, atomically and last: its presence means the shards are whole."""
    write_text_atomic(
        os.path.join(uri, META_FILE),
        json.dumps({"encoders": [asdict(e) for e in meta.encoders]}, indent=2, sort_keys=True),
    )


def read_meta(uri: str) -> CorpusMeta:
    path = os.path.join(uri, META_FILE)
    if not tf.io.gfile.exists(path):
        raise FileNotFoundError(
            f"{path}: no corpus vectors here (the CorpusEncoder writes it last; an unfinished "
            "or foreign directory)"
        )
    with tf.io.gfile.GFile(path) as f:
        data = json.load(f)
    return CorpusMeta(tuple(EncodedMeta(**e) for e in data["encoders"]))


def shard_pattern(uri: str, key: str) -> str:
    return os.path.join(uri, key, f"{SHARD_PREFIX}-*{SHARD_SUFFIX}")


@dataclass(frozen=True)
class EncoderTable:
    """One encoder's vectors of the whole corpus, in docid order."""

    docids: tuple[str, ...]
    ids: tuple[tuple[int, ...], ...]
    vectors: np.ndarray  # [N, dim] float32

    def by_docid(self) -> dict[str, int]:
        return {d: i for i, d in enumerate(self.docids)}


def read_table(uri: str, key: str) -> EncoderTable:
    """Every document's vector of encoder `key`, sorted by docid."""
    known = read_meta(uri).by_key()
    if key not in known:
        raise KeyError(f"{uri}: no vectors of encoder {key} (it has {sorted(known)})")
    rows = []
    for path in sorted(tf.io.gfile.glob(shard_pattern(uri, key))):
        for record in tf.data.TFRecordDataset(path, compression_type="GZIP").as_numpy_iterator():
            rows.append(from_example(record))
    rows.sort(key=lambda r: r[0])
    dim = rows[0][2].shape[0] if rows else 0
    return EncoderTable(
        tuple(r[0] for r in rows),
        tuple(r[1] for r in rows),
        np.stack([r[2] for r in rows]) if rows else np.zeros([0, dim], np.float32),
    )


@dataclass(frozen=True)
class DocumentTower:
    """What a model serves for a document, from frozen encoders: the parts' vectors, each
    times its scale, concatenated (one part with scale 1.0: that encoder's vector as it is)."""

    parts: tuple[tuple[EncoderSpec, float], ...]

    @staticmethod
    def with_companion(
        own: EncoderSpec, companion: EncoderSpec | None, weight: float
    ) -> DocumentTower:
        """The dual encoder's tower: `own` alone, or [sqrt(1 - w) own, sqrt(w) companion]."""
        if companion is None:
            return DocumentTower(((own, 1.0),))
        return DocumentTower(((own, math.sqrt(1.0 - weight)), (companion, math.sqrt(weight))))

    def keys(self) -> tuple[str, ...]:
        return tuple(spec.key() for spec, _ in self.parts)

    def as_encoded(self, meta: CorpusMeta) -> DocumentTower:
        """This tower with each part's precision the one the corpus vectors (`meta`) encoded
        the same checkpoint files at the same cut with, where they hold it under no other. A
        compiled pipeline resolves `trainer.mixed_precision: auto` for the CorpusEncoder on the
        machine that compiles it, a Trainer pod on its own hardware: the pod then trains
        against those vectors rather than embed the corpus again (bfloat16 and float32
        vectors of a document agree to a cosine of 0.9998, docs/speed.md "bfloat16 on the
        CPU"). A part the artifact holds under no precision is left as it is."""
        known = meta.by_key()
        parts = []
        for spec, scale in self.parts:
            if spec.key() not in known:
                same = (
                    replace(spec, precision=e.precision)
                    for e in meta.encoders
                    if e.max_length == spec.max_length
                )
                spec = next((other for other in same if other.key() in known), spec)
            parts.append((spec, scale))
        return DocumentTower(tuple(parts))

    def write(self, directory: str) -> None:
        """DOCUMENT_TOWER_FILE in `directory` (beside a SavedModel), with the parts' keys."""
        data = {
            "parts": [
                {**asdict(spec), "key": spec.key(), "scale": scale} for spec, scale in self.parts
            ]
        }
        write_text_atomic(os.path.join(directory, DOCUMENT_TOWER_FILE), json.dumps(data, indent=2))

    @staticmethod
    def read(directory: str) -> tuple[tuple[str, float], ...] | None:
        """((encoder key, scale), ...) a model directory serves its documents with, None when
        it has no DOCUMENT_TOWER_FILE (its documents are embedded by a trained tower)."""
        path = os.path.join(directory, DOCUMENT_TOWER_FILE)
        if not tf.io.gfile.exists(path):
            return None
        with tf.io.gfile.GFile(path) as f:
            data = json.load(f)
        return tuple((p["key"], float(p["scale"])) for p in data["parts"])


@dataclass(frozen=True)
class QueryTower:
    """What a dual encoder with frozen documents serves for a query: its trained tower's vector
    (the first `own_dims` values, already times its scale) and after it the frozen parts'
    (`frozen`: a companion's, each times its scale). A model exported `complete` answers
    embed_query_ids with the whole vector. A fold model, which is never served, is exported
    with its trained part only (trainer_module/export.py export_query_tower): the
    RankingEvaluator takes the rest of its query vectors, and the document vectors it embeds,
    from the run's served model, whose frozen parts are the same (`frozen_identity`), so a
    fold model costs its query tower on disk, not copies of the frozen encoders."""

    own_dims: int
    frozen: tuple[tuple[EncoderSpec, float], ...]
    complete: bool = True

    def frozen_identity(self, documents: DocumentTower) -> str:
        """A digest of the frozen parts of the query and the document vectors: checkpoint
        files, cuts and scales, not the precision (as DocumentTower.as_encoded: a compiled
        pipeline's Trainer pods may resolve `auto` on other hardware). Two models with the same
        identity serve the same frozen parts."""
        parts = [*(("q", *p) for p in self.frozen), *(("d", *p) for p in documents.parts)]
        text = "\0".join(
            f"{side}:{replace(spec, precision=FLOAT32).key()}:{scale!r}"
            for side, spec, scale in parts
        )
        return hashlib.sha256(text.encode()).hexdigest()[:20]

    def write(self, directory: str, documents: DocumentTower) -> None:
        """QUERY_TOWER_FILE in `directory` (beside a SavedModel)."""
        data = {
            "own_dims": self.own_dims,
            "complete": self.complete,
            "frozen": [{**asdict(spec), "scale": scale} for spec, scale in self.frozen],
            "frozen_identity": self.frozen_identity(documents),
        }
        write_text_atomic(os.path.join(directory, QUERY_TOWER_FILE), json.dumps(data, indent=2))

    @staticmethod
    def read(directory: str) -> dict | None:
        """The QUERY_TOWER_FILE of a model directory as written, None when it has none (a
        model whose query vectors are its own, whole)."""
        path = os.path.join(directory, QUERY_TOWER_FILE)
        if not tf.io.gfile.exists(path):
            return None
        with tf.io.gfile.GFile(path) as f:
            return json.load(f)


def compose(
    tables: Sequence[EncoderTable], scales: Sequence[float]
) -> dict[tuple[int, ...], np.ndarray]:
    """{cut token ids: tower vector} of the documents every part encoded with the same ids,
    as the dual encoder computes it: float32 `scale * vector` per part, concatenated."""
    first = tables[0]
    index = [t.by_docid() for t in tables]
    out: dict[tuple[int, ...], np.ndarray] = {}
    for row, (docid, ids) in enumerate(zip(first.docids, first.ids)):
        rows = [ix.get(docid) for ix in index]
        if any(r is None or t.ids[r] != ids for r, t in zip(rows, tables)):
            continue
        if len(tables) == 1 and scales[0] == 1.0:
            out[ids] = first.vectors[row]
            continue
        out[ids] = np.concatenate(
            [np.float32(s) * t.vectors[r] for t, s, r in zip(tables, scales, rows)]
        ).astype(np.float32)
    return out


def vectors_by_ids(
    uri: str, parts: Iterable[tuple[str, float]]
) -> dict[tuple[int, ...], np.ndarray]:
    """The tower's vectors ({cut token ids: float32 vector}) from the artifact at `uri`, for
    the parts ((encoder key, scale), ...) of DocumentTower.read or DocumentTower.keys."""
    parts = list(parts)
    return compose([read_table(uri, key) for key, _ in parts], [s for _, s in parts])
