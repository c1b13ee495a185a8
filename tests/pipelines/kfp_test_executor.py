"""A small TFX executor for the entrypoint tests: it reads a rankpipe.Qrels input and writes a
rankpipe.TrecRun directory, a system.HTML page (one file) and a Model with a Format-Serving/
subdirectory, all through TFX's fileio as TFX executors do."""

from __future__ import annotations

import os
from typing import Any

from tfx.dsl.components.base import base_executor
from tfx.dsl.io import fileio
from tfx.types import artifact_utils

from components import artifacts
from components.ranking_evaluator.component import HtmlReport


class Executor(base_executor.BaseExecutor):
    def Do(
        self,
        input_dict: dict[str, list],
        output_dict: dict[str, list],
        exec_properties: dict[str, Any],
    ) -> None:
        qrels = artifact_utils.get_single_instance(input_dict["qrels"])
        assert isinstance(qrels, artifacts.Qrels), type(qrels)
        with fileio.open(os.path.join(qrels.uri, artifacts.QRELS_FILE)) as f:
            lines = [line.split() for line in f.read().splitlines() if line.strip()]
        run = artifact_utils.get_single_instance(output_dict["run"])
        with fileio.open(os.path.join(run.uri, artifacts.RUN_FILE), "w") as f:
            for qid, _, docid, _ in lines:
                f.write(f"{qid} Q0 {docid} 1 1.0 {exec_properties['run_id']}\n")
        run.set_int_custom_property("num_lines", len(lines))
        # The Beam args the entrypoint handed over (TFX passes them to every executor).
        run.set_string_custom_property("extra_flags", " ".join(self._extra_flags or []))
        page = artifact_utils.get_single_instance(output_dict["page"])
        assert isinstance(page, HtmlReport)
        page.value = f"<p>{len(lines)} judgments</p>"
        model = artifact_utils.get_single_instance(output_dict["model"])
        serving = os.path.join(model.uri, "Format-Serving")
        fileio.makedirs(os.path.join(serving, "variables"))
        with fileio.open(os.path.join(serving, "saved_model.pb"), "wb") as f:
            f.write(b"not a real model")
