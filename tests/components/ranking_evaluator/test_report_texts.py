"""The report's listed queries in words (texts.py): query texts and each system's top documents,
read from an eval split written as RankingDataGen writes it and decoded with the vocabulary a
SavedModel carries (assets/vocab.txt, checked on a real export: tests/trainer_module), then
rendered under the largest losses and gains."""

from __future__ import annotations

from pathlib import Path

import pytest
import tensorflow as tf

from components.ranking_evaluator import report, texts

VOCAB = [
    "[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]",
    "what", "similar", "##ity", "laws", "shear", "flow", ".", "(", ")", "high", "-", "speed",
    "aircraft", "of", "heated", "wing", "|", "the",
]  # fmt: skip
ID = {token: i for i, token in enumerate(VOCAB)}


def ids(text: str) -> list[int]:
    return [ID[t] for t in text.split()]


QUERIES = {"q1": "what similar ##ity laws", "q2": "shear flow", "q3": "wing"}
DOCS = {
    "d1": "similar ##ity laws of heated high - speed aircraft .",
    "d2": "shear flow ( the wing )",
    "d3": "the wing | shear",
    "d4": "heated wing",
    "d5": "flow",
}
# Each query's candidates (the examples of the split): qid -> docids.
CANDIDATES = {"q1": ["d1", "d2", "d3", "d4"], "q2": ["d2", "d3", "d5"], "q3": ["d4"]}
RUNS = {
    "first_stage": {
        "q1": {"d1": 4.0, "d2": 3.0, "d3": 2.0, "d4": 1.0},
        "q2": {"d2": 1.0, "d3": 3.0, "d5": 2.0},
        "q3": {"d4": 1.0},
    },
    "candidate": {
        "q1": {"d1": 0.1, "d2": 0.9, "d3": 0.5, "d4": 0.7},
        "q2": {"d2": 0.9, "d3": 0.1, "d5": 0.5},
        "q3": {"d4": 1.0},
    },
    "reranker": {"q1": {"d4": 1.0}, "q2": {"d5": 1.0}, "q3": {"d4": 1.0}},
}
QRELS = {"q1": {"d1": 2, "d2": 0}, "q2": {"d2": 1}, "q3": {"d4": 1}}


def _example(qid: str, docid: str, max_doc_length: int) -> bytes:
    doc = ids(DOCS[docid])[:max_doc_length]

    def int64(values: list[int]) -> tf.train.Feature:
        return tf.train.Feature(int64_list=tf.train.Int64List(value=values))

    def floats(values: list[float]) -> tf.train.Feature:
        return tf.train.Feature(float_list=tf.train.FloatList(value=values))

    feature = {
        "qid": tf.train.Feature(bytes_list=tf.train.BytesList(value=[qid.encode()])),
        "docids": tf.train.Feature(bytes_list=tf.train.BytesList(value=[docid.encode()])),
        "query_ids": int64(ids(QUERIES[qid])),
        "doc_ids": int64(doc),
        "doc_lengths": int64([len(doc)]),
        "labels": floats([float(QRELS.get(qid, {}).get(docid, 0))]),
        "judged": int64([int(docid in QRELS.get(qid, {}))]),
        "first_stage_scores": floats([RUNS["first_stage"][qid][docid]]),
        "first_stage_ranks": int64([1]),
    }
    example = tf.train.Example(features=tf.train.Features(feature=feature))
    return example.SerializeToString()


@pytest.fixture()
def split_and_model(tmp_path: Path) -> tuple[str, str]:
    """A test split of two shards (one candidate per example, documents cut at 6 tokens) and a
    model directory holding only what texts.py reads: assets/vocab.txt."""
    split = tmp_path / "examples" / "Split-test"
    split.mkdir(parents=True)
    pairs = [(q, d) for q, docs in CANDIDATES.items() for d in docs]
    for shard in range(2):
        path = split / f"data_tfrecord-{shard:05d}-of-00002.gz"
        with tf.io.TFRecordWriter(str(path), options="GZIP") as writer:
            for qid, docid in pairs[shard::2]:
                writer.write(_example(qid, docid, max_doc_length=6))
    model = tmp_path / "model"
    (model / "assets").mkdir(parents=True)
    (model / "assets" / "vocab.txt").write_text("\n".join(VOCAB) + "\n")
    return str(split), str(model)


def test_decode_joins_pieces_and_tidies_punctuation() -> None:
    assert texts.decode(ids(DOCS["d1"]), VOCAB) == "similarity laws of heated high-speed aircraft."
    assert texts.decode(ids(DOCS["d2"]), VOCAB) == "shear flow (the wing)"
    assert texts.decode([ID["[CLS]"], ID["wing"], 999, ID["[PAD]"]], VOCAB) == "wing [UNK]"
    cut = texts.decode(ids("what similar ##ity laws of the wing"), VOCAB, max_chars=20)
    assert cut == "what similarity laws…"


def test_listed_queries_give_texts_top_documents_and_grades(
    split_and_model: tuple[str, str],
) -> None:
    split, model = split_and_model
    listed = texts.listed_queries(["q1", "q2"], RUNS, QRELS, [split], model)
    assert listed["texts"]
    q1, q2 = listed["queries"]["q1"], listed["queries"]["q2"]
    assert set(listed["queries"]) == {"q1", "q2"}  # q3 is not listed: no text read for it
    assert q1["text"] == "what similarity laws" and q2["text"] == "shear flow"
    # The top 3 in trec_eval's order; the reranker alone is not shown (summary table only).
    assert set(q1["top"]) == {"candidate", "first_stage"}
    assert [d["docid"] for d in q1["top"]["candidate"]] == ["d2", "d4", "d3"]
    assert [d["docid"] for d in q1["top"]["first_stage"]] == ["d1", "d2", "d3"]
    assert [d["grade"] for d in q1["top"]["first_stage"]] == [2, 0, None]  # None: unjudged
    first = q1["top"]["first_stage"][0]
    # Cut at the example's 6 tokens, as the model reads it.
    assert first["text"] == "similarity laws of heated high"
    assert q2["top"]["candidate"][0] == {"docid": "d2", "grade": 1, "text": "shear flow (the wing)"}


def test_without_a_vocabulary_the_report_says_so(split_and_model: tuple[str, str]) -> None:
    split, model = split_and_model
    Path(model, "assets", "vocab.txt").unlink()
    listed = texts.listed_queries(["q1"], RUNS, QRELS, [split], model)
    assert listed["texts"] == "" and listed["queries"]["q1"]["text"] is None
    assert [d["docid"] for d in listed["queries"]["q1"]["top"]["candidate"]] == ["d2", "d4", "d3"]
    metrics = _metrics()
    metrics["listed_queries"] = listed
    assert "No texts: the model carries no vocabulary" in report.markdown(metrics)


def test_failure_costs_no_evaluation(tmp_path: Path) -> None:
    assert texts.listed_queries_or_none(["q1"], RUNS, QRELS, [], None) is None  # type: ignore[arg-type]


def _metrics() -> dict:
    """q1 lost, q2 gained, q3 tied (map of the candidate minus the first stage's)."""
    first = {"q1": 0.8, "q2": 0.2, "q3": 0.5}
    cand = {"q1": 0.3, "q2": 0.6, "q3": 0.5}
    return {
        "split": "test",
        "main_metric": "map",
        "num_queries": 3,
        "candidates_scored": 8,
        "aggregate": {"first_stage": {"map": 0.5}, "candidate": {"map": 0.4667}},
        "per_query": {
            "first_stage": {q: {"map": v} for q, v in first.items()},
            "candidate": {q: {"map": v} for q, v in cand.items()},
        },
        "comparisons": {
            "first_stage": {
                "map": {
                    "n": 3,
                    "mean_delta": -0.0333,
                    "wins": 1,
                    "ties": 1,
                    "losses": 1,
                    "ttest_p": 0.8,
                    "randomization_p": 0.9,
                }
            }
        },
        "blessed": False,
        "reasons": [],
        "checks": [],
    }


def test_losses_and_gains_show_query_text_and_top_documents(
    split_and_model: tuple[str, str],
) -> None:
    split, model = split_and_model
    metrics = _metrics()
    assert report.listed_qids(metrics) == {"q1", "q2"}
    metrics["listed_queries"] = texts.listed_queries(
        report.listed_qids(metrics), RUNS, QRELS, [split], model
    )
    md = report.markdown(metrics)
    losses = md.split("## Largest losses in map vs first stage (1 of 3 queries lost)")[1]
    losses, gains = losses.split("## Largest gains in map vs first stage (1 of 3 queries gained)")
    assert "| q1 | what similarity laws | 0.8000 | 0.3000 | -0.5000 |" in losses
    # Per rank: the candidate's document and grade, then the first stage's.
    assert (
        "| q1 | 1 | d2: shear flow (the wing) | 0 | d1: similarity laws of heated high | 2 |"
        in losses
    )
    assert (
        "|  | 3 | d3: the wing \\| shear | unjudged | d3: the wing \\| shear | unjudged |" in losses
    )
    assert "| q2 | shear flow | 0.2000 | 0.6000 | +0.4000 |" in gains
    assert "| q2 | 1 | d2: shear flow (the wing) | 1 | d3: the wing \\| shear | unjudged |" in gains
    assert "q3" not in losses + gains.split("## Files")[0]
    page = report.html(metrics)
    assert "<td class='text'>what similarity laws</td>" in page
    assert "<td class='text'>d1: similarity laws of heated high</td><td>2</td>" in page
