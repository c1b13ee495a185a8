"""The baseline is the model served: the newest complete version under the push destination,
compared only on the evaluated queries that reached it in no form."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from components.push_destination import CARD_JSON, TRAINED_QUERIES_FILE
from components.ranking_evaluator import significance
from components.ranking_evaluator.baseline import (
    BaselineChoice,
    ServedModel,
    find_baseline,
    for_queries,
    on_compared_queries,
    paired,
    served_model,
)
from components.ranking_pusher.executor import push_new_version
from rankcore import lineage

SETTINGS = {"lowercase": True, "max_query_length": 16, "max_doc_length": 64}
DEMO = lineage.fingerprints(
    lineage.collection_fingerprint({"q1": "heat"}, {"q1": {"d1": 1}}, 600),
    lineage.vocabulary_fingerprint(["[PAD]", "[UNK]", "heat"]),
    SETTINGS,
)


def _saved_model(path: Path) -> Path:
    """A directory the Pusher would push: saved_model.pb plus a variables/ directory."""
    (path / "variables").mkdir(parents=True)
    (path / "variables" / "variables.index").write_bytes(b"index")
    (path / "saved_model.pb").write_bytes(b"graph")
    return path


# What a pushed model evaluated on its 8-query test split records (lineage.trained_queries).
TEST_QIDS = [f"t{i}" for i in range(8)]
HELD_OUT_TEST = {lineage.HELD_OUT: TEST_QIDS, lineage.RULE: "its own evaluation held out test"}


def _card(model_uri: str, record: dict | None = DEMO, queries: dict | None = HELD_OUT_TEST):
    """The files the Pusher writes beside a model: its card and, unless `queries` is None (a
    push from before the record), the queries it saw."""

    def files(version: str, path: str) -> dict[str, str]:
        card = {"version": version, "model": {"uri": model_uri}, "data": {"lineage": record}}
        out = {CARD_JSON: json.dumps(card)}
        if queries is not None:
            out[TRAINED_QUERIES_FILE] = json.dumps(queries)
        return out

    return files


def test_newest_pushed_version_is_the_baseline(tmp_path: Path) -> None:
    destination = tmp_path / "serving"
    # Two real pushes (the Pusher's own versioning and layout), then debris the lookup skips.
    v1, p1 = push_new_version(str(_saved_model(tmp_path / "m1")), str(destination), _card("m1"))
    v2, p2 = push_new_version(str(_saved_model(tmp_path / "m2")), str(destination), _card("m2"))
    assert int(v2) > int(v1)
    incomplete = destination / str(int(v2) + 5)  # an object-store push cut short: no .pb
    (incomplete / "variables").mkdir(parents=True)
    (destination / f".staging-{int(v2) + 9}-abcd").mkdir()  # not an integer: not a version
    (destination / "notes.txt").write_text("not a version")

    served = served_model(str(destination))
    assert served == ServedModel(
        path=p2, version=int(v2), model_uri="m2", lineage=DEMO, queries=HELD_OUT_TEST
    )
    assert find_baseline(str(destination), "some/new/model", DEMO) == BaselineChoice(served)
    # Evaluating the served model again: comparing it with its own copy says nothing.
    assert find_baseline(str(destination), "m2/", DEMO) == BaselineChoice(None)


def test_no_baseline_before_the_first_push(tmp_path: Path) -> None:
    assert served_model("") is None
    assert served_model(str(tmp_path / "missing")) is None
    (tmp_path / "empty").mkdir()
    assert find_baseline(str(tmp_path / "empty"), "m", DEMO) == BaselineChoice(None)


def test_a_version_without_a_record_is_not_compared(tmp_path: Path) -> None:
    """Nothing says which token ids it reads: skipped, with the reason, never fed ours."""
    _saved_model(tmp_path / "serving" / "12")
    choice = find_baseline(str(tmp_path / "serving"), "m", DEMO)
    assert choice.served is None
    assert choice.skipped == (
        f"the served model (version 12, {tmp_path / 'serving' / '12'}) is not compared: the "
        "served model's card records no collection or vocabulary fingerprint"
    )


def _push(tmp_path: Path, record: dict, queries: dict | None = HELD_OUT_TEST) -> str:
    destination = tmp_path / "serving"
    model = str(_saved_model(tmp_path / "m1"))
    push_new_version(model, str(destination), _card("m1", record, queries))
    return str(destination)


def test_another_collection_is_not_compared(tmp_path: Path) -> None:
    other = dict(DEMO, collection=lineage.collection_fingerprint({"q1": "x"}, {"q1": {}}, 200))
    choice = find_baseline(_push(tmp_path, DEMO), "m2", other)
    assert choice.served is None
    assert choice.skipped.endswith(
        "is not compared: it was trained for another collection (its queries, judgments or "
        "corpus differ)"
    )


def test_another_vocabulary_or_truncation_is_not_compared(tmp_path: Path) -> None:
    destination = _push(tmp_path, DEMO)
    other_vocab = dict(DEMO, vocabulary=lineage.vocabulary_fingerprint(["[PAD]", "heat"]))
    assert find_baseline(destination, "m2", other_vocab).skipped.endswith(
        "it reads another vocabulary (its token ids mean other tokens)"
    )
    longer = dict(DEMO, tokenization=dict(SETTINGS, max_doc_length=128))
    assert find_baseline(destination, "m2", longer).skipped.endswith(
        "it was trained on other tokenization settings (max_doc_length 64 vs 128)"
    )
    assert find_baseline(destination, "m2", dict(DEMO)).served is not None


# --------------------------------------------------------------------------- held-out queries


def _per_query(values: dict[str, float]) -> dict[str, dict[str, float]]:
    return {q: {"ndcg_cut_10": v} for q, v in values.items()}


def _compare(choice: BaselineChoice, per_query: dict) -> dict:
    """The evaluator's baseline comparison (measuring.measure): the baseline's figures on the
    queries it is compared on, paired with the candidate's on the same queries."""
    per_query = on_compared_queries(per_query, choice.compare_on)
    return significance.compare_per_query(
        per_query["baseline"],
        paired(per_query["candidate"], per_query["baseline"]),
        ["ndcg_cut_10"],
        trials=200,
        seed=0,
    )["ndcg_cut_10"]


def test_a_model_that_trained_on_some_evaluated_queries_is_compared_on_the_others(
    tmp_path: Path,
) -> None:
    """A rerun whose split changed: 4 of its 12 evaluated queries trained or tuned the served
    model. On those it scores 0.9 (it saw their judgments), on the rest 0.4 as the candidate
    does: compared on all it would show a drop that is not there."""
    served_saw = {lineage.TRAIN: ["a0", "a1", "a2"], lineage.DEV: ["a3"], lineage.RULE: "r"}
    destination = _push(tmp_path, DEMO, served_saw)
    judged = ["a0", "a1", "a2", "a3", *TEST_QIDS, "x"]
    choice = find_baseline(destination, "m2", DEMO, judged=judged)
    assert choice.served is not None and choice.skipped is None
    assert choice.compare_on == tuple(sorted([*TEST_QIDS, "x"]))  # known before scoring
    evaluated = ["a0", "a1", "a2", "a3", *TEST_QIDS]  # "x" is judged, not in this split
    choice = for_queries(choice, evaluated, 0.05)
    assert choice.compare_on == tuple(TEST_QIDS)
    candidate = _per_query({q: 0.4 for q in evaluated})
    baseline = _per_query({**{q: 0.9 for q in evaluated[:4]}, **{q: 0.4 for q in TEST_QIDS}})
    per_query = {"first_stage": candidate, "candidate": candidate, "baseline": baseline}
    stats = _compare(choice, per_query)
    assert (stats["n"], stats["mean_delta"], stats["ties"]) == (8, 0.0, 8)
    # The other systems keep every query.
    kept = on_compared_queries(per_query, choice.compare_on)
    assert kept["candidate"] is candidate and kept["first_stage"] is candidate
    # Unrestricted (the code before the fix), the same figures read as a drop.
    unrestricted = significance.compare_per_query(
        baseline, candidate, ["ndcg_cut_10"], trials=200, seed=0
    )["ndcg_cut_10"]
    assert unrestricted["mean_delta"] == pytest.approx(-0.5 * 4 / 12)


def test_a_model_that_trained_on_every_evaluated_query_is_skipped_with_the_reason(
    tmp_path: Path,
) -> None:
    queries = {lineage.TRAIN: ["a", "b", "c"], lineage.DEV: ["d"], lineage.RULE: "folds 1-4"}
    destination = _push(tmp_path, DEMO, queries)
    choice = find_baseline(destination, "m2", DEMO)
    assert for_queries(choice, ["a", "b", "c", "d"], 0.05) == BaselineChoice(
        None,
        f"the served model (version {choice.served.version}, {choice.served.path}) is not "
        "compared: none of the 4 evaluated queries is held out from it (folds 1-4): on queries "
        "it trained or chose on it would look better than any held-out figure can",
    )


def test_too_few_held_out_queries_are_no_comparison(tmp_path: Path) -> None:
    """The small-sample rule of the report (report.significance_warnings): over 5 queries
    the randomization test's smallest p is 2/2^5 = 0.0625, never below 0.05; over 6 it is."""
    destination = _push(tmp_path, DEMO)
    choice = find_baseline(destination, "m2", DEMO, judged=[*TEST_QIDS[:5], "y"])
    assert choice.served is None
    assert choice.skipped.endswith(
        "is not compared: only 5 of the 6 judged queries are held out from it (its own "
        "evaluation held out test), too few for a comparison: the paired randomization test "
        "over 5 queries cannot reach p < 0.05 (its smallest p is 2/2^5 = 0.0625)"
    )
    six = find_baseline(destination, "m2", DEMO, judged=TEST_QIDS[:6])
    assert six.served is not None and six.compare_on == tuple(TEST_QIDS[:6])
    # A laxer significance level accepts 5.
    assert find_baseline(destination, "m2", DEMO, judged=TEST_QIDS[:5], level=0.1).served


def test_an_old_model_card_without_the_record_is_skipped(tmp_path: Path) -> None:
    """Pushed before trained_queries.json: compared on all it might be judged on its training
    queries, so not at all, even where every query would have been held out."""
    destination = _push(tmp_path, DEMO, queries=None)
    choice = find_baseline(destination, "m2", DEMO, judged=TEST_QIDS)
    assert choice.served is None
    assert choice.skipped.endswith(
        "is not compared: its version directory has no trained_queries.json (pushed before "
        "the record was kept), so nothing says which queries it trained on, and scored on "
        "those it would look better than it is (a model pushed from now on records them)"
    )
    # A record that lists no queries says nothing either.
    listless = find_baseline(_push(tmp_path / "2", DEMO, {lineage.RULE: "r"}), "m2", DEMO)
    assert listless.served is None and "has no trained_queries.json" in listless.skipped


def _push_with_the_pusher(tmp_path: Path, summary: dict, config: dict, evaluation: dict) -> str:
    """Run 1's push, by the RankingPusher's executor, of a blessed model: returns the push
    destination (the model is SavedModel-shaped; the lookup never loads it)."""
    from tfx.proto import pusher_pb2
    from tfx.types import standard_artifacts
    from tfx.utils import proto_utils

    from components import artifacts
    from components.ranking_pusher.executor import Executor

    def made(cls: type, name: str, content: dict[str, str] | None = None) -> object:
        artifact = cls()
        artifact.uri = str(tmp_path / name)
        (tmp_path / name).mkdir(parents=True, exist_ok=True)
        for file, text in (content or {}).items():
            (tmp_path / name / file).write_text(text)
        return artifact

    model = made(standard_artifacts.Model, "model")
    _saved_model(tmp_path / "model" / "Format-Serving")
    blessing = made(standard_artifacts.ModelBlessing, "blessing")
    blessing.set_int_custom_property("blessed", 1)
    evaluation = {**evaluation, "model": model.uri}
    destination = pusher_pb2.PushDestination(
        filesystem=pusher_pb2.PushDestination.Filesystem(base_directory=str(tmp_path / "srv"))
    )
    Executor().Do(
        {
            "model": [model],
            "model_blessing": [blessing],
            "evaluation": [
                made(
                    standard_artifacts.ModelEvaluation,
                    "ev",
                    {"metrics.json": json.dumps(evaluation)},
                )
            ],
            "datagen_summary": [
                made(artifacts.DatagenSummary, "summary", {"summary.json": json.dumps(summary)})
            ],
        },
        {"pushed_model": [made(standard_artifacts.PushedModel, "pushed")]},
        {
            "push_destination": proto_utils.proto_to_json(destination),
            "model_card_config": json.dumps(config),
        },
    )
    return str(tmp_path / "srv")


def test_a_cross_validated_rerun_of_the_same_recipe_is_not_refused_for_a_spurious_drop(
    tmp_path: Path,
) -> None:
    """Run 1 (5-fold cross-validation) pushes the model trained on every fold but the dev
    fold. Run 2, the same recipe, measures each query with a fold model that never saw it;
    the served model saw every query (trained on 4 folds, chose on the fifth), so it is not
    compared and run 2 is blessed on its own figures, not refused for a drop against a model
    scored on its own training queries."""
    from components.ranking_evaluator.blessing import decide
    from components.ranking_evaluator.config import EvaluatorConfig

    qids = [f"q{i:03d}" for i in range(30)]
    summary = {
        "collection": "cranfield",
        "lineage": DEMO,
        "cross_validation": {
            "folds": 5,
            "seed": 0,
            "fold_of": {q: i % 5 for i, q in enumerate(qids)},
        },
    }
    config = {
        "datagen": {"split": {"dev_fold": 0}},
        "evaluator": {"cross_validation": {"folds": 5}},
    }
    cv = {"folds": 5, "per_fold": []}
    evaluation = {
        "split": "all (5-fold cross-validation)", "cross_validation": cv, "num_queries": 30,
        "candidates_scored": 300, "main_metric": "ndcg_cut_10", "blessed": True, "checks": [],
        "reasons": [], "aggregate": {"candidate": {"ndcg_cut_10": 0.46}}, "comparisons": {},
        "per_query": {"candidate": {q: {"ndcg_cut_10": 0.46} for q in qids}},
    }  # fmt: skip
    destination = _push_with_the_pusher(tmp_path, summary, config, evaluation)
    saved = json.loads(next((tmp_path / "srv").glob(f"*/{TRAINED_QUERIES_FILE}")).read_text())
    assert (len(saved[lineage.TRAIN]), len(saved[lineage.DEV]), saved[lineage.HELD_OUT]) == (
        24,
        6,
        [],
    )

    # Run 2: the candidate is another model of the same recipe, on the same examples.
    choice = find_baseline(destination, "run2/model", DEMO, judged=qids)
    assert choice.served is None
    assert choice.skipped.endswith(
        "is not compared: none of the 30 judged queries is held out from it (5-fold "
        "cross-validation: folds 1, 2, 3, 4 trained it, fold 0 (datagen.split.dev_fold) chose "
        "its checkpoint and fusion; no judged query is held out): on queries it trained or "
        "chose on it would look better than any held-out figure can"
    )
    rules = EvaluatorConfig(
        main_metric="ndcg_cut_10", min_values={}, min_delta_vs_first_stage=0.0,
        min_delta_vs_baseline=0.0,
    )  # fmt: skip
    first_stage = {"ndcg_cut_10": {"mean_delta": 0.05, "randomization_p": 0.01, "n": 30}}
    decision = decide({"ndcg_cut_10": 0.46}, {"first_stage": first_stage}, rules)
    assert decision.blessed, decision.reasons
    assert "no baseline to compare with: min_delta_vs_baseline not applied" in decision.checks
    # Compared on the queries it trained on (the bug), the same run read as a drop: refused.
    spurious = {"ndcg_cut_10": {"mean_delta": -0.15, "randomization_p": 0.001, "n": 30}}
    assert not decide(
        {"ndcg_cut_10": 0.46}, {"first_stage": first_stage, "baseline": spurious}, rules
    ).blessed
