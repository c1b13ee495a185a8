"""The CorpusEncoder in a real LocalDagRunner run, twice, under `rankpipe run`'s console: the
first run encodes ("done", with its key figure), the second reuses the artifact from TFX's cache
and its console line says "cached", with the same figure (issue 38's acceptance)."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

from tfx import v1 as tfx

from components.corpus_encoder.component import CorpusEncoder
from components.corpus_encoder.config import DocumentsConfig
from components.ranking_datagen.tokenization import RESERVED_TOKENS
from pipelines import console as console_lib
from rankcore import corpus_vectors
from rankcore.corpus_vectors import EncoderSpec

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "trainer_module"))
import bert_testdata  # noqa: E402  (a tiny BERT checkpoint written from scratch)

WORDS = ["wing", "flutter", "heat", "flow", "delta", "the", "of", "."]


def _pipeline(tmp_path: Path, checkpoint: str, documents: str) -> tfx.dsl.Pipeline:
    encoder = CorpusEncoder(
        DocumentsConfig(documents, "beir_corpus", batch_size=2), [EncoderSpec(checkpoint, 16)]
    )
    return tfx.dsl.Pipeline(
        pipeline_name="corpus-encoder-cache",
        pipeline_root=str(tmp_path / "root"),
        components=[encoder],
        enable_cache=True,
        metadata_connection_config=tfx.orchestration.metadata.sqlite_metadata_connection_config(
            str(tmp_path / "metadata.sqlite")
        ),
        beam_pipeline_args=["--direct_running_mode=in_memory", "--direct_num_workers=1"],
    )


def _run(tmp_path: Path, pipeline: tfx.dsl.Pipeline, name: str) -> list[str]:
    out, err = io.StringIO(), io.StringIO()
    with console_lib.RunConsole(
        str(tmp_path / "logs" / f"{name}.log"),
        metadata_path=str(tmp_path / "metadata.sqlite"),
        total=1,
        out=out,
        err=err,
    ):
        tfx.orchestration.LocalDagRunner().run(pipeline)
    return out.getvalue().splitlines()


def test_a_second_run_reuses_the_vectors_and_the_console_says_cached(tmp_path: Path) -> None:
    checkpoint = str(tmp_path / "ckpt")
    bert_testdata.write_checkpoint(checkpoint, RESERVED_TOKENS + WORDS, pooler=False)
    documents = tmp_path / "corpus.jsonl"
    texts = ["the wing flutter", "heat flow", "the delta wing .", "flow of heat"]
    documents.write_text(
        "".join(json.dumps({"_id": f"d{i}", "text": t}) + "\n" for i, t in enumerate(texts))
    )
    first = _run(tmp_path, _pipeline(tmp_path, checkpoint, str(documents)), "first")
    assert first[-1].split()[:3] == ["[1/1]", "CorpusEncoder", "done"]
    assert first[-1].endswith("4 documents x 1 encoder")
    second = _run(tmp_path, _pipeline(tmp_path, checkpoint, str(documents)), "second")
    assert second[-1].split()[:3] == ["[1/1]", "CorpusEncoder", "cached"]
    assert second[-1].endswith("4 documents x 1 encoder")
    # One artifact, written once: the second run's output is the first run's directory.
    outputs = list((tmp_path / "root" / "CorpusEncoder" / "corpus_vectors").iterdir())
    assert len(outputs) == 1
    meta = corpus_vectors.read_meta(str(outputs[0]))
    assert [e.documents for e in meta.encoders] == [4]
