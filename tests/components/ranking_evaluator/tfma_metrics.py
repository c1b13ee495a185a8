"""rankpipe's ranking measures as TFMA custom metrics, for the standard TFX Evaluator.

Test code, not in the image: the pipeline never imports it (RankingEvaluator computes its
metrics itself). test_tfma_metrics.py and test_evaluator_pipeline.py check with it that TFMA's
query_key grouping, fed to the same rankcore.metrics code, reports RankingEvaluator's numbers;
imported as a top-level module (this directory is on sys.path when pytest runs the tests here).

Query-based metrics: the MetricsSpec must set `query_key` (the qid feature); TFMA then hands
each query's examples to the combiner at once. Each query's run ({docid: prediction}) and
judgments go through rankcore.metrics.compute_metrics and the means through its aggregate, the
code RankingEvaluator uses, so both report the same numbers (docs/evaluator.md, "TFMA").

    metrics_specs=[tfma.MetricsSpec(
        query_key="qid",
        metrics=[tfma.MetricConfig(
            class_name="RankingMetrics",
            module="tfma_metrics",
            config='{"measures": ["map", "ndcg_cut_10"], "qrels_path": "gs://.../qrels.txt"}',
        )],
    )]

Judgments come from the full qrels file when `qrels_path` is given (relevant documents the
examples do not contain still count, as in RankingEvaluator); otherwise from the examples'
labels (`gain_key`, default: the model's label), restricted to `judged_key` != 0 when set.
The mean is over queries with at least one judgment, unweighted, as trec_eval's.
"""

from __future__ import annotations

import functools
import os
import shutil
import tempfile
from collections.abc import Iterable, Sequence
from typing import Any

import apache_beam as beam
import numpy as np
import tensorflow as tf
from tensorflow_model_analysis.metrics import metric_types, metric_util
from tensorflow_model_analysis.proto import config_pb2
from tensorflow_model_analysis.utils import util

from rankcore.metrics import aggregate, compute_metrics, read_qrels, resolve_measures

DEFAULT_MEASURES = ("map", "recip_rank", "mrr_cut_10", "P_5", "P_10", "recall_100", "ndcg_cut_10")
PerQuery = dict[str, dict[str, float]]


@functools.lru_cache(maxsize=4)
def load_qrels(path: str) -> dict[str, dict[str, int]]:
    """rankcore.metrics.read_qrels for any tf.io.gfile path; read once per worker process."""
    if "://" not in path:
        return read_qrels(path)
    local_dir = tempfile.mkdtemp(prefix="rankpipe-qrels-")
    try:
        local = os.path.join(local_dir, "qrels.txt")
        tf.io.gfile.copy(path, local)
        return read_qrels(local)
    finally:
        shutil.rmtree(local_dir, ignore_errors=True)


def _text(value: Any) -> str:
    return value.decode("utf-8") if isinstance(value, bytes) else str(value)


def measure_names(measures: Sequence[str]) -> list[str]:
    """trec_eval output names of `measures` that have a numeric mean (no runid/relstring)."""
    return [
        m.name for m in resolve_measures(list(measures)) if m.family not in ("runid", "relstring")
    ]


class _Accumulator:
    __slots__ = ["per_query"]

    def __init__(self) -> None:
        self.per_query: PerQuery = {}


class _RankingCombiner(beam.CombineFn):
    """Per-query trec_eval rows in, trec_eval's "all" line out."""

    def __init__(
        self,
        keys: list[metric_types.MetricKey],
        names: list[str],
        measures: list[str],
        eval_config: config_pb2.EvalConfig | None,
        model_name: str,
        output_name: str,
        query_key: str,
        docid_key: str,
        gain_key: str | None,
        judged_key: str | None,
        qrels_path: str | None,
        relevance_level: int,
    ):
        self._keys = keys
        self._names = names
        self._measures = measures
        self._eval_config = eval_config
        self._model_name = model_name
        self._output_name = output_name
        self._query_key = query_key
        self._docid_key = docid_key
        self._gain_key = gain_key
        self._judged_key = judged_key
        self._qrels_path = qrels_path
        self._relevance_level = relevance_level

    def _feature(self, element: metric_types.StandardMetricInputs, key: str) -> np.ndarray:
        return np.asarray(util.get_by_keys(element.combined_features, [key])).flatten()

    def _query_row(self, element: metric_types.StandardMetricInputs) -> tuple[str, dict | None]:
        qids = {_text(q) for q in self._feature(element, self._query_key)}
        if len(qids) != 1:
            raise ValueError(f"expected one {self._query_key!r} value per query, got {qids}")
        qid = qids.pop()
        labels, predictions, _ = next(
            metric_util.to_label_prediction_example_weight(
                element,
                eval_config=self._eval_config,
                model_name=self._model_name,
                output_name=self._output_name,
                flatten=False,
                allow_none=self._gain_key is not None,
            )
        )
        docids = [_text(d) for d in self._feature(element, self._docid_key)]
        scores = np.asarray(predictions, dtype=np.float64).flatten()
        if len(docids) != len(scores):
            raise ValueError(
                f"query {qid}: {len(docids)} {self._docid_key!r} values for {len(scores)} "
                "predictions (each example must be one candidate)"
            )
        run = {}
        for docid, score in zip(docids, scores, strict=True):
            if docid in run:
                raise ValueError(f"query {qid}: document {docid!r} appears twice")
            run[docid] = float(score)
        if self._qrels_path:
            judged = load_qrels(self._qrels_path).get(qid, {})
        else:
            gains = self._feature(element, self._gain_key) if self._gain_key else labels
            gains = np.asarray(gains, dtype=np.float64).flatten()
            keep = (
                self._feature(element, self._judged_key).astype(bool)
                if self._judged_key
                else np.ones(len(docids), dtype=bool)
            )
            judged = {d: int(round(g)) for d, g, k in zip(docids, gains, keep, strict=True) if k}
        rows = compute_metrics(
            {qid: judged}, {qid: run}, self._measures, relevance_level=self._relevance_level
        )
        return qid, rows.get(qid)  # None: no judgments, trec_eval skips the query

    def create_accumulator(self) -> _Accumulator:
        return _Accumulator()

    def add_input(
        self, accumulator: _Accumulator, element: metric_types.StandardMetricInputs
    ) -> _Accumulator:
        qid, row = self._query_row(element)
        if row is not None:
            if qid in accumulator.per_query:
                raise ValueError(f"query {qid} reached the combiner twice")
            accumulator.per_query[qid] = row
        return accumulator

    def merge_accumulators(self, accumulators: Iterable[_Accumulator]) -> _Accumulator:
        accumulators = iter(accumulators)
        result = next(accumulators)
        for acc in accumulators:
            both = result.per_query.keys() & acc.per_query.keys()
            if both:
                raise ValueError(f"queries split across accumulators: {sorted(both)[:5]}")
            result.per_query.update(acc.per_query)
        return result

    def extract_output(self, accumulator: _Accumulator) -> dict[metric_types.MetricKey, float]:
        if not accumulator.per_query:
            return {key: float("nan") for key in self._keys}
        summary = aggregate(accumulator.per_query)
        return {
            key: float(summary[name]) for key, name in zip(self._keys, self._names, strict=True)
        }


def _ranking_metrics(
    measures: list[str],
    docid_key: str = "docids",
    gain_key: str | None = None,
    judged_key: str | None = None,
    qrels_path: str | None = None,
    relevance_level: int = 1,
    name: str = "",
    eval_config: config_pb2.EvalConfig | None = None,
    model_names: list[str] | None = None,
    output_names: list[str] | None = None,
    query_key: str = "",
) -> metric_types.MetricComputations:
    if not query_key:
        raise ValueError("rankpipe ranking metrics need MetricsSpec.query_key (the qid feature)")
    names = measure_names(measures)
    features = [query_key, docid_key, *(k for k in (gain_key, judged_key) if k)]
    computations = []
    for model_name in model_names or [""]:
        for output_name in output_names or [""]:
            keys = [
                metric_types.MetricKey(n, model_name=model_name, output_name=output_name)
                for n in names
            ]
            computations.append(
                metric_types.MetricComputation(
                    keys=keys,
                    preprocessors=[metric_types.CombinedFeaturePreprocessor(feature_keys=features)],
                    combiner=_RankingCombiner(
                        keys,
                        names,
                        list(measures),
                        eval_config,
                        model_name,
                        output_name,
                        query_key,
                        docid_key,
                        gain_key,
                        judged_key,
                        qrels_path,
                        relevance_level,
                    ),
                )
            )
    return computations


class RankingMetrics(metric_types.Metric):
    """Any trec_eval measures (rankcore.metrics.resolve_measures names), one TFMA metric each,
    named as trec_eval prints them: map, recip_rank, mrr_cut_10, P_5, recall_100, ndcg_cut_10.

    Args:
      measures: measure names, families or nicknames ("P_5", "ndcg_cut.10,20", "official").
      docid_key: feature holding each example's document id.
      gain_key: feature holding the judgment; default the model's label.
      judged_key: feature that is 0 for unjudged candidates (not in the qrels); optional.
      qrels_path: a TREC qrels file (any tf.io.gfile path); overrides gain_key/judged_key.
      relevance_level: trec_eval -l, the smallest judgment counted relevant.
    """

    def __init__(
        self,
        measures: Sequence[str] = DEFAULT_MEASURES,
        docid_key: str = "docids",
        gain_key: str | None = None,
        judged_key: str | None = None,
        qrels_path: str | None = None,
        relevance_level: int = 1,
        name: str = "rankpipe_ranking",
    ):
        measure_names(measures)  # fail at construction on an unknown measure
        self._init_args = {
            "docid_key": docid_key,
            "gain_key": gain_key,
            "judged_key": judged_key,
            "qrels_path": qrels_path,
            "relevance_level": relevance_level,
            "name": name,
        }
        super().__init__(_ranking_metrics, measures=list(measures), **self._init_args)
        self._init_args.update(self._own_args())

    def _own_args(self) -> dict[str, Any]:
        return {"measures": list(self.kwargs["measures"])}

    def get_config(self) -> dict[str, Any]:
        # What __init__ takes, so that from_config (cls(**config)) rebuilds the metric.
        return dict(self._init_args)


class _Family(RankingMetrics):
    """One measure family at cut-offs `top_k_list`; `template` formats a cut-off's name."""

    template = ""

    def __init__(self, top_k_list: Sequence[int] = (10,), **kwargs: Any):
        self._top_k_list = [int(k) for k in top_k_list]
        kwargs.setdefault("name", type(self).__name__)
        super().__init__(measures=[self.template.format(k=k) for k in self._top_k_list], **kwargs)

    def _own_args(self) -> dict[str, Any]:
        return {"top_k_list": list(self._top_k_list)}


class PrecisionAtK(_Family):
    """P_k: fraction of the top k that is relevant."""

    template = "P_{k}"


class RecallAtK(_Family):
    """recall_k: fraction of the query's relevant documents (full qrels) in the top k."""

    template = "recall_{k}"


class NDCGAtK(_Family):
    """ndcg_cut_k: trec_eval's nDCG@k with the qrels grades as gains."""

    template = "ndcg_cut_{k}"


class MeanAveragePrecision(RankingMetrics):
    """map: trec_eval's mean average precision."""

    def __init__(self, **kwargs: Any):
        kwargs.setdefault("name", "MeanAveragePrecision")
        super().__init__(measures=["map"], **kwargs)

    def _own_args(self) -> dict[str, Any]:
        return {}


class MeanReciprocalRank(RankingMetrics):
    """recip_rank, or mrr_cut_k (0 when the first relevant document is below k) with `cutoff`."""

    def __init__(self, cutoff: int | None = None, **kwargs: Any):
        self._cutoff = cutoff
        kwargs.setdefault("name", "MeanReciprocalRank")
        super().__init__(measures=[f"mrr_cut_{cutoff}" if cutoff else "recip_rank"], **kwargs)

    def _own_args(self) -> dict[str, Any]:
        return {"cutoff": self._cutoff}


for _cls in (
    RankingMetrics,
    PrecisionAtK,
    RecallAtK,
    NDCGAtK,
    MeanAveragePrecision,
    MeanReciprocalRank,
):
    metric_types.register_metric(_cls)
