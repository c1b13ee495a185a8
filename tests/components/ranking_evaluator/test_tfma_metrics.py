"""The TFMA custom metrics, run by TFMA itself (query_key grouping) on real Cranfield data, give
rankcore.metrics.compute_metrics' values."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import tensorflow as tf
import tensorflow_model_analysis as tfma
import tfma_metrics

from rankcore.metrics import compute_metrics, mean_metrics, read_run

MODULE = tfma_metrics.__name__  # tfma_metrics.py beside this file (test code, not in the image)
QUERIES = [str(q) for q in range(1, 11)]  # ten Cranfield queries, 100 Lucene candidates each
MEASURES = ["map", "recip_rank", "mrr_cut_10", "P_5", "P_10", "recall_20", "ndcg_cut_10", "bpref"]


def read_cranqrel(path: Path) -> dict[str, dict[str, int]]:
    # shared/README.md: gain 5 - code for codes 1..4; the one -1 per query is judged 0.
    qrels: dict[str, dict[str, int]] = {}
    for line in path.read_text().splitlines():
        qid, docid, code = line.split()
        qrels.setdefault(qid, {})[docid] = 0 if int(code) == -1 else 5 - int(code)
    return qrels


@pytest.fixture(scope="module")
def cranfield(shared_data: Path, tmp_path_factory: pytest.TempPathFactory) -> dict:
    cran = shared_data / "cranfield"
    qrels = read_cranqrel(cran / "cranqrel")
    run = read_run(cran / "runs" / "lucene-english-100.run")
    run = {q: run[q] for q in QUERIES}
    tmp = tmp_path_factory.mktemp("tfma")
    data = tmp / "examples.tfrecord"
    with tf.io.TFRecordWriter(str(data)) as writer:
        for qid in QUERIES:
            for docid, score in run[qid].items():
                feature = {
                    "qid": tf.train.Feature(bytes_list=tf.train.BytesList(value=[qid.encode()])),
                    "docid": tf.train.Feature(
                        bytes_list=tf.train.BytesList(value=[docid.encode()])
                    ),
                    "score": tf.train.Feature(float_list=tf.train.FloatList(value=[score])),
                    "gain": tf.train.Feature(
                        float_list=tf.train.FloatList(value=[qrels[qid].get(docid, 0)])
                    ),
                    "judged": tf.train.Feature(
                        int64_list=tf.train.Int64List(value=[int(docid in qrels[qid])])
                    ),
                }
                example = tf.train.Example(features=tf.train.Features(feature=feature))
                writer.write(example.SerializeToString())
    qrels_path = tmp / "qrels.txt"
    qrels_path.write_text(
        "".join(f"{q} 0 {d} {g}\n" for q in sorted(qrels) for d, g in qrels[q].items())
    )
    return {"qrels": qrels, "run": run, "data": data, "qrels_path": qrels_path, "tmp": tmp}


def run_tfma(cranfield: dict, metric_configs: list[tfma.MetricConfig], name: str) -> dict:
    # The scores are a feature here (a model-less TFMA evaluation): what is checked is the
    # metric code behind TFMA's query_key grouping, with the real candidates and judgments.
    eval_config = tfma.EvalConfig(
        model_specs=[tfma.ModelSpec(label_key="gain", prediction_key="score")],
        metrics_specs=[tfma.MetricsSpec(query_key="qid", metrics=metric_configs)],
        slicing_specs=[tfma.SlicingSpec()],
    )
    result = tfma.run_model_analysis(
        eval_config=eval_config,
        data_location=str(cranfield["data"]),
        file_format="tfrecords",
        output_path=str(cranfield["tmp"] / name),
    )
    ((_, by_output),) = result.slicing_metrics
    return {k: v["doubleValue"] for k, v in by_output[""][""].items()}


def config(**kwargs) -> str:
    return json.dumps({"docid_key": "docid", **kwargs})


def test_tfma_equals_trec_eval_with_full_qrels(cranfield: dict) -> None:
    got = run_tfma(
        cranfield,
        [
            tfma.MetricConfig(
                class_name="RankingMetrics",
                module=MODULE,
                config=config(measures=MEASURES, qrels_path=str(cranfield["qrels_path"])),
            ),
            tfma.MetricConfig(
                class_name="NDCGAtK",
                module=MODULE,
                config=config(top_k_list=[5, 20], qrels_path=str(cranfield["qrels_path"])),
            ),
            tfma.MetricConfig(
                class_name="MeanReciprocalRank",
                module=MODULE,
                config=config(cutoff=3, qrels_path=str(cranfield["qrels_path"])),
            ),
        ],
        "full",
    )
    all_measures = [*MEASURES, "ndcg_cut_5", "ndcg_cut_20", "mrr_cut_3"]
    qrels = {q: cranfield["qrels"][q] for q in QUERIES}
    expected = mean_metrics(compute_metrics(qrels, cranfield["run"], all_measures), all_measures)
    # Same per-query code and the same summation order: equal to the last bit.
    assert got == expected
    # Relevant documents Lucene never retrieved count: recall below 1 somewhere.
    assert got["recall_20"] < 1.0


def test_tfma_from_example_labels_judges_only_the_candidates(cranfield: dict) -> None:
    got = run_tfma(
        cranfield,
        [
            tfma.MetricConfig(
                class_name="RankingMetrics",
                module=MODULE,
                config=config(measures=MEASURES, judged_key="judged"),
            ),
        ],
        "labels",
    )
    # The examples only know the judgments of the retrieved documents.
    retrieved_qrels = {
        q: {d: g for d, g in cranfield["qrels"][q].items() if d in cranfield["run"][q]}
        for q in QUERIES
    }
    expected = mean_metrics(compute_metrics(retrieved_qrels, cranfield["run"], MEASURES), MEASURES)
    assert got == expected


def test_config_round_trip_and_names() -> None:
    for metric in (
        tfma_metrics.RankingMetrics(measures=["map", "P.5,10"], relevance_level=2),
        tfma_metrics.NDCGAtK(top_k_list=[3, 10], qrels_path="gs://b/qrels.txt"),
        tfma_metrics.PrecisionAtK(top_k_list=[1]),
        tfma_metrics.RecallAtK(top_k_list=[100]),
        tfma_metrics.MeanAveragePrecision(),
        tfma_metrics.MeanReciprocalRank(cutoff=10),
    ):
        rebuilt = type(metric).from_config(json.loads(json.dumps(metric.get_config())))
        assert rebuilt.kwargs == metric.kwargs
    keys = (
        tfma_metrics.RankingMetrics(measures=["map", "P.5,10"])
        .computations(query_key="qid")[0]
        .keys
    )
    assert [k.name for k in keys] == ["map", "P_5", "P_10"]
    assert tfma_metrics.NDCGAtK(top_k_list=[3, 10]).kwargs["measures"] == [
        "ndcg_cut_3",
        "ndcg_cut_10",
    ]


def test_errors() -> None:
    with pytest.raises(ValueError, match="query_key"):
        tfma_metrics.RankingMetrics().computations()
    with pytest.raises(ValueError, match="unsupported measure"):
        tfma_metrics.RankingMetrics(measures=["ndcg@10"])
