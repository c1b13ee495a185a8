"""RankingPusher executor: the standard TFX Pusher's, plus never-overwrite versions and a card.

What the standard executor does and this one keeps: the blessing check (`CheckBlessing`),
the model path (`GetModelPath`), the PushedModel archive copy and its custom properties
(`pushed`, `pushed_destination`, `pushed_version`). What changes: the standard executor names
the version by the current second and, when that directory exists, skips the copy yet marks
the model pushed to it (two pushes in one second, or a clock set back, report a push of a
model that is not there). Here the version is always new, and the copy is staged and renamed
into place on local disks, so TF Serving never sees a half-written version.
"""

from __future__ import annotations

import datetime
import json
import logging
import os
import time
import uuid
from collections.abc import Callable
from typing import Any

import tensorflow as tf
from tfx.components.pusher import executor as pusher_executor
from tfx.proto import pusher_pb2
from tfx.types import artifact_utils, standard_component_specs
from tfx.utils import path_utils, proto_utils

from components.executor_types import Artifacts
from components.executor_types import ExecProperties as Props
from components.process_memory import released_after
from components.push_destination import (
    CARD_JSON,
    CARD_MD,
    METRICS_FILE,
    SAVED_MODEL_FILE,
    TRAINED_QUERIES_FILE,
    existing_versions,
    version_path,
)
from components.ranking_pusher import model_card
from rankcore import lineage
from rankcore.constants import MODEL_DESCRIPTION_FILE, SUMMARY_JSON
from rankcore.fusion import read_fusion

EVALUATION_KEY = "evaluation"
DATAGEN_SUMMARY_KEY = "datagen_summary"
MODEL_CARD_CONFIG_KEY = "model_card_config"


class VersionExistsError(RuntimeError):
    """Could not find a version directory that does not exist yet."""


def next_version(base: str, now: float | None = None) -> int:
    """The current UNIX second (the standard Pusher's versioning), or one past the highest
    existing version when that is later, so versions only grow and never repeat."""
    now_version = int(time.time() if now is None else now)
    return max([now_version, *(v + 1 for v in existing_versions(base))])


def copy_model(src: str, dst: str, extra_files: dict[str, str], link: bool = False) -> None:
    """Copies a SavedModel directory with tf.io.gfile (any gfile URI: local, gs://, s3://...,
    where tfx.utils.io_utils only knows a few schemes), writes `extra_files`, and writes
    saved_model.pb last: TF Serving and the SavedModel loader take it as the sign of a
    complete model. With `link`, a file is hard-linked where both sides are on one local
    filesystem (copied otherwise): for a copy inside the pipeline root, whose files no one
    writes again, so it costs no second copy of the model's bytes."""
    last = None
    for root, _, files in tf.io.gfile.walk(src):
        out = os.path.join(dst, os.path.relpath(root, src))
        tf.io.gfile.makedirs(out)
        top = root.rstrip("/") == src.rstrip("/")
        for name in files:
            if top and name == SAVED_MODEL_FILE:
                last = os.path.join(root, name)
                continue
            if top and name in extra_files:  # replaced below (never written through a link)
                continue
            _place(os.path.join(root, name), os.path.join(out, name), link)
    for name, text in extra_files.items():
        with tf.io.gfile.GFile(os.path.join(dst, name), "w") as f:
            f.write(text)
    if last is None:
        raise FileNotFoundError(f"{src} has no {SAVED_MODEL_FILE}: not a SavedModel")
    _place(last, os.path.join(dst, SAVED_MODEL_FILE), link)


def _place(src: str, dst: str, link: bool) -> None:
    if link and "://" not in src and "://" not in dst:
        try:
            os.link(src, dst)
            return
        except OSError:  # another filesystem (EXDEV) or one without hard links: copied
            pass
    tf.io.gfile.copy(src, dst, overwrite=False)


def push_new_version(
    model_path: str,
    base: str,
    extra_files: Callable[[str, str], dict[str, str]] | None = None,
    now: float | None = None,
    attempts: int = 5,
) -> tuple[str, str]:
    """Pushes the SavedModel at `model_path` to `<base>/<version>/`; returns (version, path).

    `extra_files(version, path)` gives files (name -> text) to write beside saved_model.pb.

    Never writes into an existing version. On a local disk the copy goes to a hidden staging
    directory (TF Serving ignores names that are not integers) and is renamed into place;
    rename(2) refuses a non-empty target, so two pushers racing for one version cannot both
    win: the loser takes the next version. Object stores have no atomic directory rename: the
    version directory is checked absent and written in place, saved_model.pb last.
    """
    tf.io.gfile.makedirs(base)
    local = "://" not in base
    for _ in range(attempts):
        version = str(next_version(base, now))
        target = version_path(base, version)
        if tf.io.gfile.exists(target):
            continue
        files = extra_files(version, target) if extra_files else {}
        if not local:
            copy_model(model_path, target, files)
            return version, target
        staging = os.path.join(base, f".staging-{version}-{uuid.uuid4().hex[:8]}")
        copy_model(model_path, staging, files)
        try:
            os.rename(staging, target)
        except OSError:
            tf.io.gfile.rmtree(staging)
            if os.path.exists(target):
                continue  # lost a race for this version: take the next one
            raise
        return version, target
    raise VersionExistsError(f"no free version under {base} after {attempts} attempts")


def find_pushed_version(base: str, model_uri: str) -> tuple[str, str] | None:
    """The version under `base` that already holds the model at `model_uri`, by its card.

    A re-run whose Trainer was cached re-evaluates against the new baseline and blesses the same
    model again; pushing it once more would only add a duplicate version.
    """
    for version in sorted(existing_versions(base), reverse=True):
        path = os.path.join(version_path(base, version), CARD_JSON)
        if not tf.io.gfile.exists(path):
            continue
        with tf.io.gfile.GFile(path) as f:
            card = json.load(f)
        if card.get("model", {}).get("uri") == model_uri:
            return str(version), version_path(base, version)
    return None


def _read_json(uri: str, name: str) -> Any:
    path = os.path.join(uri, name)
    if not tf.io.gfile.exists(path):
        logging.warning("%s not found; the model card will not include it", path)
        return None
    with tf.io.gfile.GFile(path) as f:
        return json.load(f)


def _evaluation(input_dict: Artifacts, model_uri: str) -> tuple[Any, str | None]:
    """(metrics.json, its artifact's URI) of the evaluation input, (None, None) unwired. The
    card must describe the evaluation of this model, not of another one."""
    if not input_dict.get(EVALUATION_KEY):
        return None, None
    evaluation_uri = artifact_utils.get_single_uri(input_dict[EVALUATION_KEY])
    evaluation = _read_json(evaluation_uri, METRICS_FILE)
    if evaluation is not None and evaluation.get("model") not in (None, model_uri):
        raise ValueError(
            f"evaluation {evaluation_uri} is of model {evaluation['model']}, "
            f"not of the model being pushed ({model_uri})"
        )
    return evaluation, evaluation_uri


def _trained_queries(summary: Any, config: Any, evaluation: Any) -> dict[str, Any] | None:
    """Which queries trained and chose the pushed model (rankcore/lineage.py): a later
    evaluation compares it only on the others (components/ranking_evaluator/baseline.py).
    None: neither the summary nor the evaluation says, and no later evaluation compares
    with this model."""
    queries = lineage.trained_queries(summary, config, evaluation)
    if queries is None:
        logging.warning(
            "Neither the datagen summary nor the evaluation says which queries trained this "
            "model: %s is not written, so a later run will not compare with it",
            TRAINED_QUERIES_FILE,
        )
    return queries


class Executor(pusher_executor.Executor):
    """Pushes blessed models to `<base_directory>/<version>/` with model_card.md/.json."""

    @released_after
    def Do(self, input_dict: Artifacts, output_dict: Artifacts, exec_properties: Props) -> None:
        self._log_startup(input_dict, output_dict, exec_properties)
        pushed = artifact_utils.get_single_instance(
            output_dict[standard_component_specs.PUSHED_MODEL_KEY]
        )
        if not self.CheckBlessing(input_dict):
            self._MarkNotPushed(pushed)
            return
        model_path = self.GetModelPath(input_dict)
        model = artifact_utils.get_single_instance(input_dict[standard_component_specs.MODEL_KEY])

        destination = pusher_pb2.PushDestination()
        proto_utils.json_to_proto(
            exec_properties[standard_component_specs.PUSH_DESTINATION_KEY], destination
        )
        if destination.WhichOneof("destination") != "filesystem":
            raise NotImplementedError("RankingPusher pushes to a filesystem destination only")
        fs = destination.filesystem
        if fs.versioning not in (
            pusher_pb2.Versioning.AUTO,
            pusher_pb2.Versioning.UNIX_TIMESTAMP,
        ):
            raise NotImplementedError(f"unsupported versioning {fs.versioning}")

        evaluation, evaluation_uri = _evaluation(input_dict, model.uri)
        summary = None
        if input_dict.get(DATAGEN_SUMMARY_KEY):
            summary = _read_json(
                artifact_utils.get_single_uri(input_dict[DATAGEN_SUMMARY_KEY]), SUMMARY_JSON
            )
        config = json.loads(exec_properties.get(MODEL_CARD_CONFIG_KEY) or "null")
        pushed_at = datetime.datetime.now(datetime.timezone.utc)
        queries = _trained_queries(summary, config, evaluation)

        def card_files(version: str, path: str) -> dict[str, str]:
            card = model_card.build(
                version=version,
                serving_path=path,
                model_uri=model.uri,
                model_id=model.id,
                evaluation=evaluation,
                evaluation_uri=evaluation_uri,
                datagen_summary=summary,
                pipeline_config=config,
                pushed_at=pushed_at,
                fusion=read_fusion(path_utils.serving_model_path(model.uri)),
                model_description=_read_json(
                    path_utils.serving_model_path(model.uri), MODEL_DESCRIPTION_FILE
                ),
                trained_queries=queries,
            )
            files = {CARD_JSON: json.dumps(card, indent=2), CARD_MD: model_card.markdown(card)}
            if queries is not None:
                files[TRAINED_QUERIES_FILE] = json.dumps(queries)
            return files

        already = find_pushed_version(fs.base_directory, model.uri)
        if already is not None:
            version, serving_path = already
            logging.info(
                "Model %s is already pushed as %s: not pushed again", model.uri, serving_path
            )
        else:
            version, serving_path = push_new_version(model_path, fs.base_directory, card_files)
            logging.info("Model pushed to %s with its model card", serving_path)
        files = card_files(version, serving_path)

        # Archive copy in the PushedModel artifact, as the standard Pusher keeps one: hard
        # links to the Trainer's files where the pipeline root is one local filesystem.
        copy_model(model_path, pushed.uri, files, link=True)
        self._MarkPushed(pushed, pushed_destination=serving_path, pushed_version=version)
        pushed.set_string_custom_property("model_card", os.path.join(serving_path, CARD_MD))
