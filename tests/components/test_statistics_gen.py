"""components/statistics_gen.py: TFX's StatisticsGen executor, with a small input's Beam
pipeline in process. Run on a tiny Examples artifact with the pipeline's multi_processing args:
statistics written for each split, and the pipeline was made in process; the pipeline's
StatisticsGen uses this executor."""

from __future__ import annotations

from pathlib import Path

import pytest
import tensorflow as tf
from apache_beam.options.pipeline_options import DirectOptions
from tfx.dsl.components.base import base_beam_executor
from tfx.types import artifact_utils, standard_artifacts

from components import beam_mode, statistics_gen
from pipelines.config import load_config
from pipelines.pipeline import create_components

MP = [
    "--direct_running_mode=multi_processing",
    "--direct_num_workers=2",
    "--sdk_container_image=unused-by-the-direct-runner",
]


def _examples(root: Path) -> standard_artifacts.Examples:
    examples = standard_artifacts.Examples()
    examples.uri = str(root / "examples")
    examples.split_names = artifact_utils.encode_split_names(["train", "test"])
    for split in ("train", "test"):
        directory = root / "examples" / f"Split-{split}"
        directory.mkdir(parents=True)
        with tf.io.TFRecordWriter(str(directory / "data.gz"), options="GZIP") as writer:
            for i in range(10):
                feature = {"x": tf.train.Feature(int64_list=tf.train.Int64List(value=[i]))}
                example = tf.train.Example(features=tf.train.Features(feature=feature))
                writer.write(example.SerializeToString())
    return examples


def test_small_examples_get_statistics_in_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(beam_mode.THRESHOLD_ENV, raising=False)
    made = []
    original = statistics_gen.Executor._make_beam_pipeline

    def spy(self):
        pipeline = original(self)
        made.append(pipeline.options.view_as(DirectOptions).direct_running_mode)
        return pipeline

    monkeypatch.setattr(statistics_gen.Executor, "_make_beam_pipeline", spy)
    statistics = standard_artifacts.ExampleStatistics()
    statistics.uri = str(tmp_path / "statistics")
    context = base_beam_executor.BaseBeamExecutor.Context(
        beam_pipeline_args=MP, tmp_dir=str(tmp_path / "tmp"), unique_id="1"
    )
    statistics_gen.Executor(context).Do(
        {"examples": [_examples(tmp_path)]}, {"statistics": [statistics]}, {}
    )
    assert made == ["in_memory"]
    for split in ("train", "test"):
        assert (tmp_path / "statistics" / f"Split-{split}" / "FeatureStats.pb").stat().st_size


def test_the_pipelines_statistics_gen_runs_this_executor() -> None:
    [component] = [c for c in create_components(load_config("demo")) if c.id == "StatisticsGen"]
    assert component.executor_spec.executor_class is statistics_gen.Executor
