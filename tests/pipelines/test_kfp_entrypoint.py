"""pipelines/kfp_entrypoint.py: each fix, first reproduced with TFX's own entrypoint
(kubeflow_v2_run_executor) on the same ExecutorInput, then passing through ours.

The ExecutorInputs are shaped as the KFP v2 driver builds them (backend/src/v2/driver): input
artifacts with a numeric name and an empty instance schema, outputs with the output
definition's type, `executor-logs`, object-store URIs. The executor is a small real TFX executor
(kfp_test_executor.py); the end-to-end test in test_kfp_local_backend.py runs the pipeline's own.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from google.protobuf import json_format
from kfp.pipeline_spec import pipeline_spec_pb2 as pb
from tfx.orchestration.kubeflow.v2 import compiler_utils
from tfx.orchestration.kubeflow.v2.container import kubeflow_v2_run_executor
from tfx.types import standard_artifacts

from components import artifacts
from components.ranking_evaluator.component import HtmlReport
from pipelines import kfp_entrypoint

EXECUTOR = "kfp_test_executor.Executor"
QRELS = "1 0 d1 1\n1 0 d2 0\n2 0 d7 2\n"


def _schema(cls) -> str:
    schema = compiler_utils.get_artifact_schema(cls)  # bytes for TFX's own types
    return schema.decode() if isinstance(schema, bytes) else schema


INPUTS_SPEC = {
    "artifacts": {"qrels": {"artifactType": {"instanceSchema": _schema(artifacts.Qrels)}}},
    "parameters": {"run_id": {"parameterType": "STRING"}},
}


@pytest.fixture(autouse=True)
def _fresh_tfx_tables(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # Each test starts from TFX's own title table and its own local root.
    monkeypatch.setattr(
        compiler_utils, "TITLE_TO_CLASS_PATH", dict(compiler_utils.TITLE_TO_CLASS_PATH)
    )
    monkeypatch.setenv(kfp_entrypoint.LOCAL_ROOT_ENV, str(tmp_path / "pod"))


def _executor_input(root: str, tmp_path: Path, input_type: str | None, logs: bool) -> dict:
    """An ExecutorInput as the driver provisions it; `root` is the pipeline root."""
    task = f"{root}/Task/salt"
    outputs = {
        "run": _schema(artifacts.TrecRun),
        "page": _schema(HtmlReport),
        "model": _schema(standard_artifacts.Model),
    }
    executor_input = {
        "inputs": {
            "parameterValues": {"run_id": "bm25"},
            "artifacts": {
                "qrels": {
                    "artifacts": [
                        {
                            "name": "17",
                            "uri": f"{root}/DataGen/other-salt/qrels",
                            "metadata": {"display_name": "qrels"},
                            "type": {"instanceSchema": input_type}
                            if input_type is not None
                            else {},
                        }
                    ]
                }
            },
        },
        "outputs": {
            "artifacts": {
                key: {
                    "artifacts": [
                        {"name": key, "uri": f"{task}/{key}", "type": {"instanceSchema": s}}
                    ]
                }
                for key, s in outputs.items()
            },
            "outputFile": str(tmp_path / "task" / "output_metadata.json"),
        },
    }
    if logs:
        executor_input["outputs"]["artifacts"]["executor-logs"] = {
            "artifacts": [
                {
                    "name": "executor-logs",
                    "uri": f"{task}/executor-logs",
                    "type": {"schemaTitle": "system.Artifact"},
                }
            ]
        }
    return executor_input


def _local(uri: str) -> Path:
    path = kfp_entrypoint.local_path_for_uri(uri)
    return Path(path if path is not None else uri)


def _argv(
    executor_input: dict,
    with_spec: bool = True,
    beam: tuple[str, ...] = ("--direct_running_mode=in_memory",),
) -> list[str]:
    # The argument shape TFX's compiler emits for schema 2.1 (step_builder.py).
    argv = [
        "--executor_class_path",
        EXECUTOR,
        "--json_serialized_invocation_args",
        json.dumps(executor_input),
    ]
    if with_spec:
        argv += ["--json_serialized_inputs_spec_args", json.dumps(INPUTS_SPEC)]
    return argv + list(beam)


def _write_qrels(executor_input: dict) -> None:
    uri = executor_input["inputs"]["artifacts"]["qrels"]["artifacts"][0]["uri"]
    _local(uri).mkdir(parents=True, exist_ok=True)
    (_local(uri) / artifacts.QRELS_FILE).write_text(QRELS)


def _tfx_entrypoint(argv: list[str]) -> None:
    kubeflow_v2_run_executor.main(kubeflow_v2_run_executor._parse_flags(argv))


def _read_output(executor_input: dict) -> pb.ExecutorOutput:
    path = executor_input["outputs"]["outputFile"]
    return json_format.Parse(Path(path).read_text(), pb.ExecutorOutput())


def _case(tmp_path: Path, root: str, **kw) -> dict:
    if "://" not in root:
        root = str(tmp_path / root)
    executor_input = _executor_input(root, tmp_path, **kw)
    _write_qrels(executor_input)
    for key, artifact_list in executor_input["outputs"]["artifacts"].items():
        # What TFX's own entrypoint needs and never does itself (fix 4 covers it for ours);
        # `page` is a value artifact: a file at the URI.
        path = _local(artifact_list["artifacts"][0]["uri"])
        (path.parent if key == "page" else path).mkdir(parents=True, exist_ok=True)
    return executor_input


def test_custom_artifact_types_are_registered(tmp_path: Path) -> None:
    executor_input = _case(tmp_path, "store", input_type=_schema(artifacts.Qrels), logs=False)
    # TFX imports the schema title as a module path.
    with pytest.raises(ImportError, match="Could not import rankpipe.Qrels"):
        _tfx_entrypoint(_argv(executor_input))
    kfp_entrypoint.main(_argv(executor_input))
    output = _read_output(executor_input)
    assert set(output.artifacts) == {"run", "page", "model"}
    run = output.artifacts["run"].artifacts[0]
    assert run.metadata["num_lines"] == 3
    assert (Path(run.uri) / artifacts.RUN_FILE).read_text().count("bm25") == 3
    # Every title the entrypoint registers imports to the class of that type name.
    from tfx.utils import import_utils

    for title, path in kfp_entrypoint.ARTIFACT_TYPES.items():
        assert import_utils.import_class_by_path(path).TYPE_NAME == title


def test_empty_input_types_are_restored_from_the_inputs_spec(tmp_path: Path) -> None:
    kfp_entrypoint.register_artifact_types()  # fix 1 alone does not help here
    executor_input = _case(tmp_path, "store", input_type="", logs=False)
    with pytest.raises(AttributeError, match="'NoneType' object has no attribute 'get'"):
        _tfx_entrypoint(_argv(executor_input))
    kfp_entrypoint.main(_argv(executor_input))
    assert _read_output(executor_input).artifacts["run"].artifacts[0].metadata["num_lines"] == 3


def test_empty_input_type_without_inputs_spec_is_a_clear_error(tmp_path: Path) -> None:
    executor_input = _case(tmp_path, "store", input_type="", logs=False)
    with pytest.raises(kfp_entrypoint.EntrypointError, match="'qrels'.*use_pipeline_spec_2_1"):
        kfp_entrypoint.main(_argv(executor_input, with_spec=False))


def test_launcher_logs_output_is_hidden_from_tfx(tmp_path: Path) -> None:
    kfp_entrypoint.register_artifact_types()
    executor_input = _case(tmp_path, "store", input_type=_schema(artifacts.Qrels), logs=True)
    with pytest.raises(ImportError, match="Could not import system.Artifact"):
        _tfx_entrypoint(_argv(executor_input))
    kfp_entrypoint.main(_argv(executor_input))
    assert set(_read_output(executor_input).artifacts) == {"run", "page", "model"}


@pytest.mark.parametrize("root", ["minio://mlpipeline/v2/artifacts", "s3://bucket/p"])
def test_object_store_uris_map_to_the_launchers_local_paths(tmp_path: Path, root: str) -> None:
    kfp_entrypoint.register_artifact_types()
    executor_input = _case(tmp_path, root, input_type=_schema(artifacts.Qrels), logs=False)
    scheme = root.split("://")[0]
    with pytest.raises(Exception, match=f"File system scheme '{scheme}' not implemented"):
        _tfx_entrypoint(_argv(executor_input))
    kfp_entrypoint.main(_argv(executor_input))
    output = _read_output(executor_input)
    pod = Path(os.environ[kfp_entrypoint.LOCAL_ROOT_ENV])
    mount = {"minio": "minio", "s3": "s3"}[scheme]
    for key, artifact_list in output.artifacts.items():
        # The launcher records these URIs and uploads from LocalPathForURI(uri).
        uri = artifact_list.artifacts[0].uri
        assert uri == f"{root}/Task/salt/{key}"
        assert (pod / mount / uri.split("://")[1]).exists()
    local_run = pod / mount / root.split("://")[1] / "Task/salt/run" / artifacts.RUN_FILE
    assert local_run.read_text().count("bm25") == 3


def test_gs_uris_map_to_gcs_mount() -> None:
    assert kfp_entrypoint.local_path_for_uri("gs://b/p/T/s/model", "/") == "/gcs/b/p/T/s/model"
    assert kfp_entrypoint.local_path_for_uri("/data/x", "/") is None


def test_output_directories_are_plain_local_directories(tmp_path: Path) -> None:
    kfp_entrypoint.register_artifact_types()
    # The launcher creates only the parents of the output paths (prepareOutputFolders); TFX's
    # entrypoint never creates output directories (on GCS it never had to), so an executor
    # writing into its output directory on a local path fails.
    local_input = _executor_input(
        str(tmp_path / "local"), tmp_path, input_type=_schema(artifacts.Qrels), logs=False
    )
    _write_qrels(local_input)
    with pytest.raises(Exception, match="No such file or directory|NotFound"):
        _tfx_entrypoint(_argv(local_input))

    executor_input = _executor_input(
        "minio://mlpipeline/v2/artifacts", tmp_path, input_type="", logs=True
    )
    _write_qrels(executor_input)
    kfp_entrypoint.main(_argv(executor_input))
    pod = Path(os.environ[kfp_entrypoint.LOCAL_ROOT_ENV])
    task = pod / "minio/mlpipeline/v2/artifacts/Task/salt"
    # Directory artifacts are directories of regular files (the launcher's Go upload writes
    # one object per file: no zero-byte directory markers, kubeflow/pipelines#13476) ...
    files = sorted(str(p.relative_to(task)) for p in task.rglob("*") if p.is_file())
    assert files == ["model/Format-Serving/saved_model.pb", "page", "run/run.txt"]
    assert all(p.is_dir() or (p.is_file() and not p.is_symlink()) for p in task.rglob("*"))
    # ... and a value artifact (system.HTML) is the file at the URI, as the KFP UI reads it.
    assert (task / "page").read_text() == "<p>3 judgments</p>"


def test_empty_input_directory_is_recreated(tmp_path: Path) -> None:
    # An empty directory artifact uploads no object, so the launcher downloads nothing.
    executor_input = _case(tmp_path, "minio://b/r", input_type="", logs=False)
    uri = executor_input["inputs"]["artifacts"]["qrels"]["artifacts"][0]["uri"]
    spec_input = json_format.ParseDict(executor_input, pb.ExecutorInput())
    (_local(uri) / artifacts.QRELS_FILE).unlink()
    _local(uri).rmdir()
    kfp_entrypoint.register_artifact_types()
    kfp_entrypoint.restore_input_types(
        spec_input, json_format.ParseDict(INPUTS_SPEC, pb.ComponentInputsSpec())
    )
    kfp_entrypoint.localize_uris(spec_input)
    assert _local(uri).is_dir() and not any(_local(uri).iterdir())


def test_beam_workers_zero_becomes_the_pods_cpus(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The compiled spec says 0; TFX hands it to the executor as is, and Beam's DirectRunner would
    # then start multiprocessing.cpu_count() workers: the node's cores, not the pod's limit.
    kfp_entrypoint.register_artifact_types()
    beam = ("--direct_running_mode=multi_processing", "--direct_num_workers=0")
    executor_input = _case(tmp_path, "store", input_type=_schema(artifacts.Qrels), logs=False)
    _tfx_entrypoint(_argv(executor_input, beam=beam))
    run = _read_output(executor_input).artifacts["run"].artifacts[0]
    assert run.metadata["extra_flags"] == " ".join(beam)

    from pipelines import cpus

    monkeypatch.setattr(cpus, "available_cpus", lambda root="/": 3)  # a pod limited to 3 CPUs
    kfp_entrypoint.main(_argv(executor_input, beam=beam))
    run = _read_output(executor_input).artifacts["run"].artifacts[0]
    assert run.metadata["extra_flags"] == (
        "--direct_running_mode=multi_processing --direct_num_workers=3"
    )


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--direct_num_workers=0"], ["--direct_num_workers=5"]),
        (["--direct_num_workers", "0", "--x=1"], ["--direct_num_workers", "5", "--x=1"]),
        (["--direct_num_workers=2"], ["--direct_num_workers=2"]),  # an explicit count stays
        (["--runner=DataflowRunner"], ["--runner=DataflowRunner"]),
    ],
)
def test_resolve_beam_workers(args: list[str], expected: list[str]) -> None:
    assert kfp_entrypoint.resolve_beam_workers(args, cpus=5) == expected


def _task_input(parameters: dict) -> tuple[pb.ExecutorInput, pb.ComponentInputsSpec]:
    executor_input = json_format.ParseDict(
        {"inputs": {"parameterValues": parameters}}, pb.ExecutorInput()
    )
    spec = pb.ComponentInputsSpec()
    for key in parameters:
        spec.parameters[key].parameter_type = pb.ParameterType.STRING
    return executor_input, spec


def test_pipeline_parameters_reach_the_exec_properties_they_stand_for() -> None:
    prefix = kfp_entrypoint.PARAMETER_PREFIX
    card = json.dumps({"trainer": {"train_steps": 300, "learning_rate": 0.003}, "pusher": {}})
    trainer, spec = _task_input(
        {
            "train_args": json.dumps({"splits": ["train"], "num_steps": 300}),
            "custom_config": json.dumps({"trainer": {"train_steps": 300, "learning_rate": 0.003}}),
            prefix + "train_steps": 25,
            prefix + "learning_rate": 0.01,
        }
    )
    given = kfp_entrypoint.apply_pipeline_parameters(trainer, spec)
    assert given == {"train_steps": 25, "learning_rate": 0.01}
    values = json_format.MessageToDict(trainer.inputs)["parameterValues"]
    assert json.loads(values["train_args"]) == {"splits": ["train"], "num_steps": 25}
    assert json.loads(values["custom_config"])["trainer"] == {
        "train_steps": 25,
        "learning_rate": 0.01,
    }
    # The parameters' own inputs are gone, from the inputs spec too: TFX sees its properties.
    assert not [k for k in values if k.startswith(prefix)]
    assert not [k for k in spec.parameters if k.startswith(prefix)]

    pusher, _ = _task_input(
        {
            "push_destination": json.dumps({"filesystem": {"base_directory": "gs://a/old"}}),
            "model_card_config": card,
            prefix + "push_destination": "gs://b/new",
        }
    )
    kfp_entrypoint.apply_pipeline_parameters(pusher)
    values = json_format.MessageToDict(pusher.inputs)["parameterValues"]
    assert json.loads(values["push_destination"]) == {
        "filesystem": {"base_directory": "gs://b/new"}
    }
    assert json.loads(values["model_card_config"])["pusher"] == {"destination": "gs://b/new"}

    evaluator, _ = _task_input(
        {"push_destination": "gs://a/old", prefix + "push_destination": "gs://b/new"}
    )
    kfp_entrypoint.apply_pipeline_parameters(evaluator)
    assert evaluator.inputs.parameter_values["push_destination"].string_value == "gs://b/new"


def test_a_task_without_pipeline_parameters_is_left_alone() -> None:
    executor_input, spec = _task_input({"train_args": '{"num_steps": 3}'})
    before = executor_input.SerializeToString()
    assert kfp_entrypoint.apply_pipeline_parameters(executor_input, spec) == {}
    assert executor_input.SerializeToString() == before
