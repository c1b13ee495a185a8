"""The mutation table's entries for what a run keeps on disk (tests/mutations.py holds the
rest and concatenates these): checkpoints, fold models, the Pusher's archive copy, and how
`rankpipe runs` counts it all."""

from __future__ import annotations

from mutation import Mutation

_ARCHIVE_TEST = (
    "tests/components/ranking_pusher/test_pusher.py::"
    "test_the_archive_copy_links_the_models_files_and_the_served_copy_does_not"
)

DISK: tuple[Mutation, ...] = (
    Mutation(
        name="finished-checkpoints-kept",
        promise="a finished Trainer keeps its SavedModel, not its checkpoints",
        file="trainer_module/run_fn.py",
        find="    if not cfg.keep_finished_checkpoints:\n",
        replace="    if False:\n",
        tests=("tests/trainer_module/test_trainer_export.py::test_run_fn_end_to_end_and_resume",),
    ),
    Mutation(
        name="fold-models-whole",
        promise="a fold Trainer of a frozen-documents recipe saves its query tower, not the "
        "whole model",
        file="pipelines/component_table.py",
        find='        training["custom_config"]["query_tower_only"] = True',
        replace="        pass",
        tests=(
            "tests/pipelines/test_pipeline.py::"
            "test_fold_trainers_export_their_query_tower_unless_a_tuner_may_change_frozen_parts",
        ),
    ),
    Mutation(
        name="pusher-archive-copied",
        promise="the Pusher's archive copy is hard links to the Trainer's files, not a copy",
        file="components/ranking_pusher/executor.py",
        find="copy_model(model_path, pushed.uri, files, link=True)",
        replace="copy_model(model_path, pushed.uri, files, link=False)",
        tests=(_ARCHIVE_TEST,),
    ),
    Mutation(
        name="card-written-through-link",
        promise="a file the model card replaces is never written through a hard link",
        file="components/ranking_pusher/executor.py",
        find="            if top and name in extra_files:",
        replace="            if False:",
        tests=(_ARCHIVE_TEST,),
    ),
    Mutation(
        name="linked-bytes-counted-twice",
        promise="`rankpipe runs` counts a hard-linked file once, as du does",
        file="pipelines/runs.py",
        find="            seen.add((stat.st_dev, stat.st_ino))\n",
        replace="",
        tests=(_ARCHIVE_TEST,),
    ),
)
