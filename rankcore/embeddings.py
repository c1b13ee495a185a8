"""Text embeddings the Trainer computed, for the RankingEvaluator to reuse (issue 16).

A dual encoder's Trainer embeds every distinct query and document of the dev split with the
model it exports (validation and the fusion alpha need them), and the RankingEvaluator embeds
every distinct text of the test split with the same model. A document retrieved for both dev
and test queries was embedded twice: on Cranfield 1,070 of the test split's 1,285 texts, about
20 s of a 90 s run. So the Trainer writes its dev vectors into its ModelRun artifact
(`embeddings/`), and the evaluator takes a vector from there instead of embedding the text
again when

1. the file was written for the very SavedModel it evaluates: `model` in the file is the
   SavedModel's fingerprint (TensorFlow's `fingerprint.pb`, which hashes the graph, the
   signatures and the variables' values: tf.saved_model.experimental.read_fingerprint), and
2. the text's token ids, cut as the model cuts them, have the digest stored with the vector (the
   same text id with other tokens, e.g. another Examples artifact, is embedded again);

and it re-embeds a sample of the reused texts and compares (components/ranking_evaluator/
scoring.py), so a vector that the SavedModel would not give is caught, not trusted.

A document tower that no training changes (dual_encoder.frozen_documents: the checkpoint's
tower, a companion's beside it) gives every model of that checkpoint the same document vectors,
so with cross-validation a document that fold i's Trainer did not embed (one retrieved for
fold i's test queries alone) is in another fold's file: `document_tower` names such a tower
(a digest of the checkpoints, the companion's share and the precision policy; "" for a trained
one), and the evaluator takes documents from the files of every model with the same
`document_tower` and document cut, again with a re-embedded sample (about 140 documents per
Cranfield fold, 2 to 3 minutes of MPNet on 2 cores, issue 17).

Written by trainer_module (run_fn) and read by components (scoring): the format lives in the
layer both import. Layout: `<ModelRun>/embeddings/vectors.tfrecord.gz` (one tf.Example per
text: kind "q"/"d", id, digest, vector) and `meta.json` (written last: its presence means the
vectors file is whole).
"""

from __future__ import annotations

import hashlib
import json
import os
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass

import numpy as np
import tensorflow as tf

from rankcore.file_io import write_text_atomic

EMBEDDINGS_DIR = "embeddings"
META_FILE = "meta.json"
VECTORS_FILE = "vectors.tfrecord.gz"
QUERY, DOCUMENT = "q", "d"  # a text's kind

TextKey = tuple[str, str]  # (QUERY or DOCUMENT, qid or docid)


@dataclass(frozen=True)
class EmbeddingsMeta:
    model: str  # model_fingerprint() of the SavedModel the vectors are from
    max_query_length: int  # the model's cut of query / document ids (digests are of cut ids)
    max_doc_length: int
    dim: int
    count: int
    # Which split's texts: the Examples split name(s) the Trainer validated on (e.g.
    # "fold1_eval"; "dev" from files outside a Split-<name> directory). The evaluator prefers a
    # lending model that embedded the very split it scores (it holds all its documents).
    split: str
    # The frozen document tower's identity ("" when training changes it): documents from any
    # model with the same tower and max_doc_length have the same vectors (see above).
    document_tower: str = ""

    def max_length(self, kind: str) -> int:
        return self.max_query_length if kind == QUERY else self.max_doc_length


def text_digest(ids: Iterable[int], max_length: int) -> bytes:
    """Digest of a text's token ids as the model reads them: cut to `max_length`, padding (0)
    left out (the encoders mask it)."""
    kept = [int(t) for t in list(ids)[:max_length] if t]
    return hashlib.sha1(np.asarray(kept, np.int64).tobytes()).digest()


def model_fingerprint(saved_model_dir: str) -> str:
    """The SavedModel's fingerprint (fingerprint.pb, TF >= 2.12) as one string; "" when the
    SavedModel has none (then nothing is reused)."""
    try:
        fp = tf.saved_model.experimental.read_fingerprint(saved_model_dir)
    except (FileNotFoundError, ValueError, tf.errors.NotFoundError):
        return ""
    return "-".join(
        str(v)
        for v in (
            fp.saved_model_checksum,
            fp.graph_def_program_hash,
            fp.signature_def_hash,
            fp.saved_object_graph_hash,
            fp.checkpoint_hash,
        )
    )


def to_example(key: TextKey, digest: bytes, vector: np.ndarray) -> bytes:
    feature = {
        "kind": tf.train.Feature(bytes_list=tf.train.BytesList(value=[key[0].encode()])),
        "id": tf.train.Feature(bytes_list=tf.train.BytesList(value=[key[1].encode()])),
        "digest": tf.train.Feature(bytes_list=tf.train.BytesList(value=[digest])),
        "vector": tf.train.Feature(
            float_list=tf.train.FloatList(value=np.asarray(vector, np.float32))
        ),
    }
    return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()


def from_example(serialized: bytes) -> tuple[TextKey, bytes, np.ndarray]:
    """(text key, digest, float32 vector) of one record of the vectors file."""
    f = tf.train.Example.FromString(serialized).features.feature
    key = (f["kind"].bytes_list.value[0].decode(), f["id"].bytes_list.value[0].decode())
    return (
        key,
        f["digest"].bytes_list.value[0],
        np.asarray(f["vector"].float_list.value, np.float32),
    )


def write_embeddings(
    model_run_dir: str,
    vectors: dict[TextKey, tuple[Sequence[int], np.ndarray]],
    meta: EmbeddingsMeta,
) -> str:
    """Writes {text key: (token ids, vector)} under `<model_run_dir>/embeddings`: the vectors
    through a temporary file and a rename, then meta.json (atomically), so a reader finds
    either both whole or no meta.json."""
    out = os.path.join(model_run_dir, EMBEDDINGS_DIR)
    tf.io.gfile.makedirs(out)
    meta_path = os.path.join(out, META_FILE)
    if tf.io.gfile.exists(meta_path):  # a retried execution: the old vectors are stale
        tf.io.gfile.remove(meta_path)
    path = os.path.join(out, VECTORS_FILE)
    tmp = f"{path}.tmp-{uuid.uuid4().hex[:8]}"
    options = tf.io.TFRecordOptions(compression_type="GZIP")
    with tf.io.TFRecordWriter(tmp, options) as writer:
        for key in sorted(vectors):
            ids, vector = vectors[key]
            writer.write(to_example(key, text_digest(ids, meta.max_length(key[0])), vector))
    tf.io.gfile.rename(tmp, path, overwrite=True)
    write_text_atomic(meta_path, json.dumps(asdict(meta), indent=2, sort_keys=True))
    return out


def read_meta(model_run_dir: str) -> EmbeddingsMeta | None:
    """The embeddings' meta.json under a ModelRun directory; None when there are none."""
    path = os.path.join(model_run_dir, EMBEDDINGS_DIR, META_FILE)
    if not tf.io.gfile.exists(path):
        return None
    with tf.io.gfile.GFile(path) as f:
        return EmbeddingsMeta(**json.load(f))


def split_of(file_patterns: Sequence[str]) -> str:
    """The Examples split name(s) of the Trainer's file patterns (<examples>/Split-<name>/*),
    comma-joined; "dev" when they are not in Split-<name> directories."""
    names = []
    for pattern in file_patterns:
        directory = os.path.basename(os.path.dirname(pattern.rstrip("/")))
        names.append(directory[len("Split-") :] if directory.startswith("Split-") else "dev")
    return ",".join(sorted(set(names))) or "dev"


def shares_documents(meta: EmbeddingsMeta, other: EmbeddingsMeta) -> bool:
    """Whether `other`'s document vectors are `meta`'s model's too: the same frozen document
    tower, reading documents cut at the same length."""
    return bool(meta.document_tower) and (
        other.document_tower,
        other.max_doc_length,
        other.dim,
    ) == (meta.document_tower, meta.max_doc_length, meta.dim)


def vectors_path(model_run_dir: str) -> str:
    return os.path.join(model_run_dir, EMBEDDINGS_DIR, VECTORS_FILE)
