"""RankingTuner: TFX's Tuner with the optional corpus vectors input, run here through its real
executor with a search whose trials record what they were given: the corpus vectors' URI
reaches the tuner_fn, and best_hyperparameters (with every trial) is written where TFX's
Trainer reads it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tfx import types
from tfx.proto import trainer_pb2
from tfx.types import standard_artifacts

from components import artifacts
from components.ranking_trainer.executor import CORPUS_VECTORS_URI_KEY, QRELS_URI_KEY
from components.ranking_tuner.component import RankingTuner
from components.ranking_tuner.constants import BEST_HYPERPARAMETERS_FILE, TUNER_RESULTS_FILE
from components.ranking_tuner.executor import Executor
from pipelines.console import figures
from trainer_module import tuning
from trainer_module.tuning_config import TRIALS_KEY, TunerConfig

SEEN: list[dict] = []


class RecordingSearch(tuning.RecipeSearch):
    """Each trial records its values and the custom_config, and scores its train_steps."""

    def run_trial(self, trial, *args, **kwargs) -> dict[str, float]:  # noqa: ANN001
        values = self.trial_values(trial)
        SEEN.append({"values": values, "custom_config": self.custom})
        return {self.oracle.objective.name: float(values["train_steps"])}


def record_tuner_fn(fn_args):  # noqa: ANN001, ANN201  (TFX's FnArgs -> TunerFnResult)
    custom = dict(fn_args.custom_config)
    tuner = TunerConfig(**custom.pop("tuner"))
    oracle = tuning.make_oracle(tuner, "dev_ndcg_cut_10")
    search = RecordingSearch(oracle, fn_args, custom, fn_args.working_dir)
    return tuning.TunerFnResult(tuner=search, fit_kwargs={})


@pytest.mark.parametrize("with_vectors", [False, True])
def test_the_executor_hands_the_vectors_and_writes_the_choice(
    tmp_path: Path, with_vectors: bool
) -> None:
    """The corpus vectors' and the qrels' URIs reach the search (when wired); the choice and
    every trial are written where TFX's Trainer and the console read them."""
    component = RankingTuner(
        examples=types.Channel(type=standard_artifacts.Examples),
        tuner_fn=f"{__name__}.record_tuner_fn",
        train_args=trainer_pb2.TrainArgs(splits=["train"]),
        eval_args=trainer_pb2.EvalArgs(splits=["dev"]),
        custom_config={"trainer": {}, "tuner": {"max_trials": 3, "space": {"train_steps": [5, 9]}}},
        **(
            {
                "corpus_vectors": types.Channel(type=artifacts.CorpusVectors),
                "qrels": types.Channel(type=artifacts.Qrels),
            }
            if with_vectors
            else {}
        ),
    )
    examples = standard_artifacts.Examples()
    examples.uri = str(tmp_path / "examples")
    examples.split_names = '["train", "dev", "test"]'
    inputs = {"examples": [examples]}
    if with_vectors:
        vectors = artifacts.CorpusVectors()
        vectors.uri = str(tmp_path / "vectors")
        inputs["corpus_vectors"] = [vectors]
        qrels = artifacts.Qrels()
        qrels.uri = str(tmp_path / "qrels")
        inputs["qrels"] = [qrels]
    best, results = standard_artifacts.HyperParameters(), standard_artifacts.TunerResults()
    best.uri, results.uri = str(tmp_path / "best"), str(tmp_path / "results")
    outputs = {"best_hyperparameters": [best], "tuner_results": [results]}
    SEEN.clear()
    executor = Executor(Executor.Context(tmp_dir=str(tmp_path / "tmp"), unique_id="1"))
    executor.Do(inputs, outputs, dict(component.exec_properties))
    assert [s["values"] for s in SEEN] == [{"train_steps": 5}, {"train_steps": 9}]
    uri = SEEN[0]["custom_config"].get(CORPUS_VECTORS_URI_KEY)
    assert uri == (str(tmp_path / "vectors") if with_vectors else None)
    qrels_uri = SEEN[0]["custom_config"].get(QRELS_URI_KEY)
    assert qrels_uri == (str(tmp_path / "qrels") if with_vectors else None)
    written = json.loads((tmp_path / "best" / BEST_HYPERPARAMETERS_FILE).read_text())
    assert written["values"] == {"train_steps": "9"}
    assert [t["score"] for t in written[TRIALS_KEY]] == [9.0, 5.0]
    trials = json.loads((tmp_path / "results" / TUNER_RESULTS_FILE).read_text())
    assert trials == written[TRIALS_KEY]
    # The console's line for the Tuner reads the same file.
    assert (
        figures.tuner_figure(written)
        == "chose train_steps 9: dev_ndcg_cut_10 9.0000 (best of 2 trials)"
    )
