"""rankcore.metrics.names: ir_measures names -> trec_eval names, and the "did you mean" hint.

The mapping is checked against ir_measures itself: the trec_eval measure its pytrec_eval
provider asks pytrec_eval for (PytrecEvalProvider._build_invokers, private, so only here in a
test) must be the output name our table prints for the converted name.
"""

from __future__ import annotations

import ir_measures
import pytest

from rankcore.metrics import resolve_measures
from rankcore.metrics.names import UnsupportedMeasure, supported_names, to_trec_eval

IR_NAMES = [
    "nDCG@10", "nDCG@20", "nDCG", "P@5", "P@10", "P@7", "RR", "AP", "AP@100", "R@100",
    "R@1000", "Rprec", "Bpref", "NumRet", "NumRelRet", "NumQ", "Success@1", "IPrec@0.1",
    "infAP", "SetP", "SetR", "SetAP",
]  # fmt: skip


def _provider_name(name: str) -> str:
    provider = ir_measures.providers.registry["pytrec_eval"]
    (invoker,) = provider._build_invokers([ir_measures.parse_measure(name)], {})
    ((_, trec),) = invoker.measure_map.values()
    return trec


def _output_names(measure: str) -> list[str]:
    return [m.name for m in resolve_measures([measure])]


@pytest.mark.parametrize("name", IR_NAMES)
def test_ir_measures_names_map_as_ir_measures_maps_them(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # _build_invokers makes pytrec_eval evaluators; only their measure names matter here.
    class Invoker:
        def __init__(self, pte, qrels, measure_map, rel_level, judged_only):
            self.measure_map = measure_map

    monkeypatch.setattr(
        "ir_measures.providers.pytrec_eval_provider.PytrecEvalInvoker", Invoker, raising=True
    )
    assert _output_names(to_trec_eval(name)) == [_provider_name(name)]


@pytest.mark.parametrize(
    ("name", "trec"),
    [
        ("nDCG@10", "ndcg_cut.10"), ("P@5", "P.5"), ("RR", "recip_rank"), ("AP", "map"),
        ("R@100", "recall.100"), ("RR@10", "mrr_cut.10"), ("MRR@10", "mrr_cut.10"),
        ("NDCG@10", "ndcg_cut.10"), ("nDCG(dcg='log2')@10", "ndcg_cut.10"),
        # trec_eval's own names pass as they are.
        ("ndcg_cut.10", "ndcg_cut.10"), ("ndcg_cut_10", "ndcg_cut_10"), ("map", "map"),
        ("P.5,10", "P.5,10"), ("official", "official"), ("P", "P"),
    ],
)  # fmt: skip
def test_conversions(name: str, trec: str) -> None:
    assert to_trec_eval(name) == trec


def test_relevance_level_and_judged_only_must_agree() -> None:
    assert to_trec_eval("P(rel=2)@5", relevance_level=2) == "P.5"
    with pytest.raises(ValueError, match=r"rel=2 differs .* \(1\); give -l 2"):
        to_trec_eval("P(rel=2)@5")
    with pytest.raises(ValueError, match="rel=1 differs"):
        to_trec_eval("NumRelRet", relevance_level=2)
    with pytest.raises(ValueError, match="needs -J"):
        to_trec_eval("P(judged_only=True)@5")
    assert to_trec_eval("P(judged_only=True)@5", judged_docs_only=True) == "P.5"


@pytest.mark.parametrize(
    ("name", "hint"),
    [("ndcg@10", "did you mean nDCG@10?"), ("nDGC@10", "did you mean nDCG@10"),
     ("ndcg_cut10", "did you mean ndcg_cut_10"), ("mapp", "did you mean map")],
)  # fmt: skip
def test_unknown_names_get_a_hint_and_the_supported_list(name: str, hint: str) -> None:
    with pytest.raises(UnsupportedMeasure) as info:
        to_trec_eval(name)
    text = str(info.value)
    assert text.startswith(f"unsupported measure {name!r}; {hint}")
    trec, ir = supported_names()
    assert "ndcg_cut" in trec and "official" in trec and "nDCG" in ir and "RR" in ir
    assert all(n in text for n in (*trec, *ir))


def test_ir_measures_without_a_trec_eval_counterpart() -> None:
    with pytest.raises(UnsupportedMeasure, match="'ERR@10' has no trec_eval counterpart"):
        to_trec_eval("ERR@10")
    with pytest.raises(UnsupportedMeasure, match="'nosuch'; supported: "):
        to_trec_eval("nosuch")
