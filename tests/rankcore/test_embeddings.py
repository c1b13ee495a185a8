"""rankcore/embeddings.py: which split a Trainer's vectors are of, and which models lend each
other documents."""

import dataclasses
import json

from rankcore import embeddings

META = embeddings.EmbeddingsMeta(
    model="m",
    max_query_length=8,
    max_doc_length=16,
    dim=4,
    count=3,
    split="fold1_eval",
    document_tower="tower",
)


def test_split_of_names_the_examples_splits() -> None:
    assert embeddings.split_of(["/p/Examples/7/Split-fold1_eval/*"]) == "fold1_eval"
    assert embeddings.split_of(["/p/Split-b/*", "/p/Split-a/*", "/q/Split-a/*"]) == "a,b"
    assert embeddings.split_of(["/data/dev-*.tfrecord.gz"]) == "dev"
    assert embeddings.split_of([]) == "dev"


def test_only_the_same_frozen_tower_and_cut_lend_documents() -> None:
    assert embeddings.shares_documents(META, dataclasses.replace(META, model="other", split="x"))
    trained = dataclasses.replace(META, document_tower="")
    assert not embeddings.shares_documents(trained, trained)
    assert not embeddings.shares_documents(META, trained)
    for change in ({"document_tower": "another"}, {"max_doc_length": 15}, {"dim": 8}):
        assert not embeddings.shares_documents(META, dataclasses.replace(META, **change))


def test_meta_files_from_before_document_towers_still_read(tmp_path) -> None:
    """A ModelRun written before `document_tower` existed reads as a trained tower."""
    out = tmp_path / embeddings.EMBEDDINGS_DIR
    out.mkdir()
    old = {k: v for k, v in dataclasses.asdict(META).items() if k != "document_tower"}
    (out / embeddings.META_FILE).write_text(json.dumps(old))
    meta = embeddings.read_meta(str(tmp_path))
    assert meta.document_tower == "" and not embeddings.shares_documents(meta, meta)
