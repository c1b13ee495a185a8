"""`rankpipe compile`: a KFP v2 PipelineSpec (schema 2.1) the kfp client accepts, a Vertex AI
PipelineJob, the same bytes for the same config, and nothing of the compiling machine inside.

No component runs here (the compiled demo spec runs end to end in test_kfp_local_backend.py).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from google.protobuf import json_format
from kfp.pipeline_spec import pipeline_spec_pb2

from pipelines import cli, kfp_entrypoint, kubeflow_runner
from pipelines.config import CONFIG_DIR, REPO_ROOT, load_config
from rankcore.config_loader import ConfigError

# Everything a shipped config points at, moved to a bucket (what a Kubeflow user passes).
CLUSTER = [
    "runner.pipeline_root=gs://bucket/rankpipe/root",
    "pusher.destination=gs://bucket/rankpipe/serving",
    "runner.image=registry.example/rankpipe:1.0",
    "collection.documents=gs://bucket/data/corpus.jsonl",
    "collection.queries=gs://bucket/data/queries.jsonl",
    "collection.qrels=gs://bucket/data/qrels.txt",
]
SHIPPED = sorted(p.name for p in CONFIG_DIR.glob("*.yaml"))


def cluster_overrides(config_name: str) -> list[str]:
    """CLUSTER, plus a gs:// URI for every other local path the config holds (vocabularies,
    checkpoints, runs, ...), found by walking the loaded config."""
    config = load_config(config_name, CLUSTER, check_inputs=False)
    extra = []
    for key, value in kubeflow_runner._config_leaves(config):
        if isinstance(value, str) and os.path.isabs(value) and "[" not in key:
            extra.append(f"{key}=gs://bucket/files/{key}")
    return CLUSTER + extra


def machine_paths_in(text: str) -> list[str]:
    """This checkout, its parent (the shared data), $HOME and the working directory, where they
    occur as paths of their own (gs://bucket/root/... is not /root)."""
    found = []
    for path in {str(REPO_ROOT), str(REPO_ROOT.parent), str(Path.home()), os.getcwd()}:
        if path in ("/", ""):
            continue
        found += re.findall(r"(?<![\w.:/-])" + re.escape(path) + r"(?![\w.-])", text)
    return found


def _compile_subprocess(out: Path, root: Path, seed: str, home: str) -> None:
    """`rankpipe compile` of the demo config, run from the checkout at `root`."""
    argv = ["compile", "demo", "--output", str(out)]
    for setting in cluster_overrides("demo"):
        argv += ["--set", setting]
    code = (
        "import sys; import pipelines.cli as cli; "
        "assert cli.__file__.startswith(sys.argv[1]), cli.__file__; "
        "sys.exit(cli.main(sys.argv[2:]))"
    )
    env = dict(os.environ, PYTHONHASHSEED=seed, PYTHONPATH=str(root), HOME=home)
    proc = subprocess.run(
        [sys.executable, "-c", code, str(root), *argv],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]


@pytest.fixture(scope="module")
def compiled(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo config compiled twice by the CLI: from this checkout, and from a copy of it
    elsewhere, with another $HOME and hash seed (what differs between two machines). Returns
    the first file; test_same_config_same_bytes compares the two."""
    tmp = tmp_path_factory.mktemp("compiled")
    other = tmp / "another" / "checkout"
    for package in ("pipelines", "components", "trainer_module", "schemas"):
        shutil.copytree(
            REPO_ROOT / package, other / package, ignore=shutil.ignore_patterns("__pycache__")
        )
    (tmp / "home").mkdir()
    _compile_subprocess(tmp / "a.yaml", REPO_ROOT, "1", os.environ.get("HOME", "/"))
    _compile_subprocess(tmp / "b.yaml", other, "2", str(tmp / "home"))
    return tmp / "a.yaml"


def _spec(path: Path) -> dict:
    return yaml.safe_load(path.read_text())


def test_same_config_same_bytes(compiled: Path) -> None:
    assert compiled.read_bytes() == (compiled.parent / "b.yaml").read_bytes()


def test_yaml_is_a_pipeline_spec_the_kfp_client_accepts(compiled: Path) -> None:
    from kfp import components
    from kfp.client.client import _extract_pipeline_yaml

    # What `kfp run create -f` / Client.create_run_from_pipeline_package parse.
    doc = _extract_pipeline_yaml(str(compiled))
    spec = doc.pipeline_spec
    assert spec.schema_version == "2.1.0"  # the only version the KFP API server accepts
    assert spec.pipeline_info.name == "rankpipe-demo"
    assert spec.default_pipeline_root == "gs://bucket/rankpipe/root"
    # Every component but the CorpusEncoder and the Tuner, which the demo does not have.
    assert set(spec.root.dag.tasks) == set(kubeflow_runner.DISPLAY_NAMES) - {
        "CorpusEncoder",
        "Tuner",
    }
    # No display names by default: KFP 2.0 - 2.5 record executions under taskInfo.name and look
    # producers up by task key, so the two must be equal there.
    assert all(key == task.task_info.name for key, task in spec.root.dag.tasks.items())
    assert components.load_component_from_file(str(compiled)).name == "rankpipe-demo"
    # Strict proto parsing (unknown fields fail), as the API server's protojson does.
    json_format.ParseDict(_spec(compiled), pipeline_spec_pb2.PipelineSpec())


def test_schema_2_1_parameters_and_our_entrypoint_no_resolver(compiled: Path) -> None:
    spec = _spec(compiled)
    text = json.dumps(spec)
    # Schema 2.0 fields the open-source driver does not implement.
    assert "constantValue" not in text and "resolver" not in text.lower()
    for name, component in spec["components"].items():
        for param in component.get("inputDefinitions", {}).get("parameters", {}).values():
            assert set(param) <= {"parameterType", "defaultValue", "isOptional"}, name
    for task in spec["root"]["dag"]["tasks"].values():
        for param in task.get("inputs", {}).get("parameters", {}).values():
            assert set(param.get("runtimeValue", {"constant": 0})) == {"constant"}
    executors = spec["deploymentSpec"]["executors"]
    assert len(executors) == 8
    for executor in executors.values():
        container = executor["container"]
        assert container["command"] == kubeflow_runner.ENTRYPOINT_COMMAND
        assert container["image"] == "registry.example/rankpipe:1.0"
        assert "--json_serialized_inputs_spec_args" in container["args"]
        # Beam's worker count is the pod's, not the compiling machine's CPU count.
        workers = [a for a in container["args"] if a.startswith("--direct_num_workers=")]
        assert workers == ["--direct_num_workers=0"]
    schema_task = spec["root"]["dag"]["tasks"]["ImportSchemaGen"]
    schema_file = schema_task["inputs"]["parameters"]["schema_file"]["runtimeValue"]["constant"]
    assert schema_file == "/rankpipe/schemas/ranking_examples/schema.pbtxt"
    assert (REPO_ROOT / schema_file.removeprefix("/rankpipe/")).is_file()
    assert not machine_paths_in(compiled.read_text())


def test_resources_and_display_names_from_config(tmp_path: Path) -> None:
    components = (
        "runner.kubeflow.components={Trainer: {cpu_limit: '8', memory_limit: 32Gi, "
        "accelerator_type: nvidia.com/gpu, accelerator_count: 2}, "
        "RankingDataGen: {display_name: Make examples, memory_request: 250M, memory_limit: 500M}}"
    )
    overrides = [*cluster_overrides("demo"), "runner.kubeflow.display_names=true", components]
    config = load_config("demo", overrides, check_inputs=False)
    spec = kubeflow_runner.build_pipeline_job(config)["pipelineSpec"]
    executors = spec["deploymentSpec"]["executors"]
    # Each field a component leaves unset comes from runner.kubeflow.defaults (demo.yaml's).
    assert executors["Trainer_executor"]["container"]["resources"] == {
        "cpuRequest": 1.0,
        "cpuLimit": 8.0,
        "memoryRequest": 2.0,
        "memoryLimit": pytest.approx(32 * 2**30 / 1e9),
        "accelerator": {"type": "nvidia.com/gpu", "count": "2"},
    }
    assert executors["RankingDataGen_executor"]["container"]["resources"] == {
        "cpuRequest": 1.0,
        "cpuLimit": 2.0,
        "memoryRequest": 0.25,
        "memoryLimit": 0.5,
    }
    assert executors["Pusher_executor"]["container"]["resources"] == {
        "cpuRequest": 1.0,
        "cpuLimit": 2.0,
        "memoryRequest": 2.0,
        "memoryLimit": 4.0,
    }
    no_defaults = [*overrides, "runner.kubeflow.defaults={}"]
    spec = kubeflow_runner.build_pipeline_job(load_config("demo", no_defaults, check_inputs=False))[
        "pipelineSpec"
    ]
    assert "resources" not in spec["deploymentSpec"]["executors"]["Pusher_executor"]["container"]
    assert not any("retryPolicy" in t for t in spec["root"]["dag"]["tasks"].values())
    names = {k: t["taskInfo"]["name"] for k, t in spec["root"]["dag"]["tasks"].items()}
    assert names["Trainer"] == "Train reranker" and names["RankingDataGen"] == "Make examples"
    assert names["RankingEvaluator"] == "Evaluate and bless"
    # Off (the default, for KFP 2.0 - 2.5): the task keys, and a display_name is refused.
    config = load_config("demo", cluster_overrides("demo"), check_inputs=False)
    assert config.runner.kubeflow.display_names is False
    spec = kubeflow_runner.build_pipeline_job(config)["pipelineSpec"]
    assert all(k == t["taskInfo"]["name"] for k, t in spec["root"]["dag"]["tasks"].items())
    with pytest.raises(ConfigError, match=r"components\.RankingDataGen\.display_name is set"):
        load_config("demo", [*cluster_overrides("demo"), components], check_inputs=False)


def test_cross_validation_compiles_to_parallel_fold_trainers() -> None:
    """Fold branches are KFP tasks of their own, none waiting for another (they run in
    parallel on the cluster), each with the Trainer's resources and a fold display name; the
    evaluator waits for all of them."""
    overrides = [
        *cluster_overrides("demo"),
        "evaluator.cross_validation.folds=3",
        "datagen.split.num_folds=3",
        "runner.kubeflow.display_names=true",
        "runner.kubeflow.defaults={}",
        "runner.kubeflow.components={Trainer: {cpu_limit: '4', accelerator_type: nvidia.com/gpu}}",
    ]
    job = kubeflow_runner.build_pipeline_job(load_config("demo", overrides, check_inputs=False))
    spec = job["pipelineSpec"]
    tasks = spec["root"]["dag"]["tasks"]
    trainers = ["Trainer", "Trainer_fold0", "Trainer_fold1", "Trainer_fold2"]
    assert set(trainers) <= set(tasks)
    for name in trainers:
        assert not set(tasks[name].get("dependentTasks", [])) & set(trainers)
        label = spec["components"][tasks[name]["componentRef"]["name"]]["executorLabel"]
        resources = spec["deploymentSpec"]["executors"][label]["container"]["resources"]
        assert resources == {
            "cpuLimit": 4.0,
            "accelerator": {"type": "nvidia.com/gpu", "count": "1"},
        }
    # What they ask for together is stated, in the YAML's header.
    header = kubeflow_runner.render(job, "yaml", "demo.yaml").split("\ncomponents:")[0]
    assert (
        "# 4 Trainer tasks at once (cross-validation): requests unset; limits 16 CPU; "
        "4 x nvidia.com/gpu." in header
    )
    assert tasks["Trainer_fold1"]["taskInfo"]["name"] == "Train reranker (fold 1)"
    assert set(trainers) <= set(tasks["RankingEvaluator"]["dependentTasks"])
    artifacts = tasks["RankingEvaluator"]["inputs"]["artifacts"]
    assert artifacts["fold_model_2"]["taskOutputArtifact"]["producerTask"] == "Trainer_fold2"


# Kubernetes settings a cluster user adds: a GCS key as a secret, a GPU node pool.
PLACEMENT = [
    "runner.kubeflow.defaults.secret_volumes={gcs-key: /secrets/gcs}",
    "runner.kubeflow.defaults.env={GOOGLE_APPLICATION_CREDENTIALS: /secrets/gcs/key.json}",
    "runner.kubeflow.components.Trainer.node_selector={cloud.google.com/gke-nodepool: gpu}",
    "runner.kubeflow.components.Trainer.tolerations="
    "[{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}]",
    "runner.kubeflow.components.Trainer.secret_env={HF_TOKEN: hf/token}",
]


def test_cranfield_spec_carries_requests_limits_retries_and_the_platform_spec(
    tmp_path: Path,
) -> None:
    """The shipped Cranfield config compiles to a spec with every task's requests and limits
    and retry policy, pipeline parameters with the config's values as defaults, and the
    Kubernetes settings as the platform spec (a second YAML document); kfp's own loaders read
    it, and the local KFP backend accepts it (executors, DAG, parameters)."""
    from kfp import components
    from kfp.client.client import _extract_pipeline_yaml
    from kfp.kubernetes import kubernetes_executor_config_pb2 as k8s

    sys.path.insert(0, str(REPO_ROOT / "tests"))
    from kfp_local import spec as local_spec

    config = load_config("cranfield", cluster_overrides("cranfield") + PLACEMENT, False)
    out = kubeflow_runner.compile_pipeline(config, str(tmp_path / "cranfield.yaml"))
    text = Path(out).read_text()
    assert (
        "# 6 Trainer tasks at once (cross-validation): requests 24 CPU, 96 GB; limits 48 " in text
    )
    doc = _extract_pipeline_yaml(out)  # what kfp.Client uploads and runs
    spec, platform = doc.pipeline_spec, doc.platform_spec
    component = components.load_component_from_file(out)  # kfp's component loader
    assert component.pipeline_spec == spec and component.platform_spec == platform

    executors = json_format.MessageToDict(spec.deployment_spec)["executors"]
    for name, task in spec.root.dag.tasks.items():
        label = spec.components[task.component_ref.name].executor_label
        resources = executors[label]["container"]["resources"]
        assert {"cpuRequest", "cpuLimit", "memoryRequest", "memoryLimit"} <= set(resources), name
        assert resources["cpuRequest"] <= resources["cpuLimit"]
        policy = json_format.MessageToDict(task.retry_policy)
        assert policy == {
            "maxRetryCount": 2,
            "backoffDuration": "60s",
            "backoffFactor": 2.0,
            "backoffMaxDuration": "3600s",
        }, name
        env = {e["name"]: e["value"] for e in executors[label]["container"]["env"]}
        assert env["GOOGLE_APPLICATION_CREDENTIALS"] == "/secrets/gcs/key.json"
        kube = json_format.MessageToDict(
            platform.platforms["kubernetes"].deployment_spec.executors[label]
        )
        assert kube["secretAsVolume"] == [{"secretName": "gcs-key", "mountPath": "/secrets/gcs"}]
        if name.startswith("Trainer"):  # Trainer and its fold copies
            assert resources["cpuRequest"] == 4.0 and resources["memoryLimit"] == 32.0
            assert kube["nodeSelector"] == {"labels": {"cloud.google.com/gke-nodepool": "gpu"}}
            assert kube["tolerations"] == [
                {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
            ]
            # What kfp-kubernetes' own API types accept (tolerations aside: see kubernetes_config).
            del kube["tolerations"]
            json_format.ParseDict(kube, k8s.KubernetesExecutorConfig())
            assert kube["secretAsEnv"] == [
                {"secretName": "hf", "keyToEnv": [{"secretKey": "token", "envVar": "HF_TOKEN"}]}
            ]
        else:
            assert "nodeSelector" not in kube
    # Pipeline parameters: the config's values as defaults, given to the tasks that read them.
    parameters = json_format.MessageToDict(spec.root.input_definitions)["parameters"]
    assert parameters == {
        "train_steps": {
            "parameterType": "NUMBER_INTEGER",
            "defaultValue": 120.0,
            "isOptional": True,
        },
        "learning_rate": {
            "parameterType": "NUMBER_DOUBLE",
            "defaultValue": config.trainer.learning_rate,
            "isOptional": True,
        },
        "push_destination": {
            "parameterType": "STRING",
            "defaultValue": "gs://bucket/rankpipe/serving",
            "isOptional": True,
        },
    }
    prefix = kfp_entrypoint.PARAMETER_PREFIX
    for name, task in spec.root.dag.tasks.items():
        given = {
            k[len(prefix) :]: p.component_input_parameter
            for k, p in task.inputs.parameters.items()
            if k.startswith(prefix)
        }
        expected = {
            "Trainer": {"train_steps": "train_steps", "learning_rate": "learning_rate"},
            "RankingEvaluator": {"push_destination": "push_destination"},
            "Pusher": {"push_destination": "push_destination"},
        }.get(name.split("_fold")[0], {})
        assert given == expected, name
    # The local KFP backend's checks: executors it can run, a DAG, the run's parameters.
    loaded = local_spec.load_spec(out)
    local_spec.check_executors(loaded)
    assert len(local_spec.task_order(loaded.root.dag)) == len(spec.root.dag.tasks)
    resolved = local_spec.root_parameters(loaded, {"train_steps": 500})
    assert resolved["train_steps"].number_value == 500
    assert resolved["learning_rate"].number_value == config.trainer.learning_rate


def test_the_default_image_is_tagged_with_the_source() -> None:
    from pipelines import image_tag

    overrides = [o for o in cluster_overrides("demo") if not o.startswith("runner.image=")]
    config = load_config("demo", overrides, check_inputs=False)
    assert config.runner.image == "rankpipe"
    spec = kubeflow_runner.build_pipeline_job(config)["pipelineSpec"]
    images = {e["container"]["image"] for e in spec["deploymentSpec"]["executors"].values()}
    assert images == {f"rankpipe:{image_tag.source_tag()}"}


@pytest.mark.parametrize(
    ("settings", "fmt", "message"),
    [
        (
            ["runner.kubeflow.defaults.memory_request=3G"],
            "yaml",
            r"runner\.kubeflow\.components\.Trainer over runner\.kubeflow\.defaults: "
            r"memory_request: '3G' is more than memory_limit '2G'",
        ),
        (
            ["runner.kubeflow.components.Trainer.node_selector={pool: gpu}"],
            "vertex",
            r"runner\.kubeflow\.components\.Trainer\.node_selector .*Vertex AI",
        ),
    ],
)
def test_resource_and_placement_errors_name_the_key(
    settings: list[str], fmt: str, message: str
) -> None:
    overrides = cluster_overrides("demo") + settings
    if "memory_request" in settings[0]:
        overrides.append("runner.kubeflow.components.Trainer.memory_limit=2G")
    config = load_config("demo", overrides, check_inputs=False)
    with pytest.raises(ConfigError, match=message):
        kubeflow_runner.build_pipeline_job(config, fmt)


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        (
            "runner.kubeflow.components.Trainer.cpu_request='4'",
            r"Trainer\.cpu_request: '4' is more",
        ),
        ("runner.kubeflow.defaults.retry_backoff=soon", r"defaults\.retry_backoff: 'soon'"),
        ("runner.kubeflow.defaults.retries=-1", r"defaults\.retries: must be >= 0"),
        ("runner.kubeflow.defaults.secret_env={TOKEN: hf}", r"secret_env\.TOKEN: 'hf'"),
        (
            "runner.kubeflow.defaults.tolerations=[{key: a, operator: Maybe}]",
            r"tolerations\[0\]\.operator: 'Maybe'",
        ),
        ("runner.kubeflow.defaults.display_name=x", r"defaults\.display_name"),
    ],
)
def test_kubeflow_settings_are_checked_naming_the_key(setting: str, message: str) -> None:
    overrides = [*cluster_overrides("demo"), "runner.kubeflow.components.Trainer.cpu_limit='2'"]
    with pytest.raises(ConfigError, match=message):
        load_config("demo", [*overrides, setting], check_inputs=False)


@pytest.mark.parametrize("config_name", SHIPPED)
def test_shipped_configs_compile_without_machine_paths(config_name: str, tmp_path: Path) -> None:
    config = load_config(config_name, cluster_overrides(config_name), check_inputs=False)
    for fmt, name in (("yaml", "p.yaml"), ("vertex", "p.json")):
        kubeflow_runner.compile_pipeline(config, str(tmp_path / name), fmt)
        text = (tmp_path / name).read_text()
        assert not machine_paths_in(text), (fmt, machine_paths_in(text))
        assert "resolver" not in text.lower()
    job = json.loads((tmp_path / "p.json").read_text())
    assert job["runtimeConfig"]["gcsOutputDirectory"] == "gs://bucket/rankpipe/root"
    assert job["pipelineSpec"] == _spec(tmp_path / "p.yaml")


def test_vertex_pipeline_job_loads_in_the_aiplatform_sdk(tmp_path: Path) -> None:
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import aiplatform

    config = load_config("demo", cluster_overrides("demo"), check_inputs=False)
    kubeflow_runner.compile_pipeline(config, str(tmp_path / "job.json"), "vertex")
    job = aiplatform.PipelineJob(
        display_name="rankpipe-demo",
        template_path=str(tmp_path / "job.json"),
        project="a-project",
        location="us-central1",
        credentials=AnonymousCredentials(),  # built offline: nothing is submitted
    )
    resource = job._gca_resource
    assert resource.runtime_config.gcs_output_directory == "gs://bucket/rankpipe/root"
    assert resource.pipeline_spec["schemaVersion"] == "2.1.0"
    # The pipeline parameters' defaults travel in runtimeConfig too (what `tfx run create`
    # and parameter_values override).
    assert resource.runtime_config.parameter_values["train_steps"] == 300
    assert resource.runtime_config.parameter_values["push_destination"] == (
        "gs://bucket/rankpipe/serving"
    )


def test_a_local_collection_path_is_a_config_error_naming_the_key(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    overrides = [*cluster_overrides("demo"), f"collection.qrels={tmp_path}/qrels.txt"]
    argv = ["compile", "demo", "--output", str(tmp_path / "p.yaml")]
    for setting in overrides:
        argv += ["--set", setting]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert "demo.yaml: collection.qrels:" in err and "is a path on this machine" in err
    assert "use a gs:// URI or a path inside the image (/rankpipe/..." in err
    assert not (tmp_path / "p.yaml").exists()


def test_every_key_the_cluster_cannot_use_is_named_in_one_error(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """A shipped config compiled as it is holds about ten paths of this machine: one error
    names them all, each with its fix, instead of one key a try."""
    argv = ["compile", "nfcorpus", "--output", str(tmp_path / "p.yaml")]
    argv += ["--set", "runner.pipeline_root=/tmp/root"]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    config = load_config("nfcorpus", ["runner.pipeline_root=/tmp/root"], check_inputs=False)
    leaves = kubeflow_runner._config_leaves(config)
    local = [k for k, v in leaves if isinstance(v, str) and v[:1] == "/"]
    assert {"runner.pipeline_root", "collection.documents", "datagen.split.dev_qrels"} <= {*local}
    for key in local:
        assert f"nfcorpus.yaml: {key}: " in err, key
        assert f"--set {key}=" in err or "make pretrained" in err, key
    assert err.count("rankpipe: config error:") == 1
    assert not (tmp_path / "p.yaml").exists()


# docs/kubeflow.md: the four variables the shipped configs take their paths from, set to bucket
# prefixes on the compiling machine.
BUCKET_ENV = {
    "RANKPIPE_OUTPUTS": "gs://bucket/rankpipe",
    "RANKPIPE_SHARED_DATA": "gs://bucket/data",
    "RANKPIPE_MINILM": "gs://bucket/all-MiniLM-L6-v2",
    "RANKPIPE_MPNET": "gs://bucket/all-mpnet-base-v2",
}


@pytest.fixture
def bucket_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in BUCKET_ENV.items():
        monkeypatch.setenv(name, value)


@pytest.mark.parametrize("config_name", SHIPPED)
@pytest.mark.usefixtures("bucket_env")
def test_four_variables_move_every_path_of_a_shipped_config_to_the_bucket(
    config_name: str,
) -> None:
    """No shipped config holds a path of its own: set to bucket prefixes, the four variables
    leave nothing the cluster cannot use, with no key overridden."""
    config = load_config(config_name, [], check_inputs=False)
    for fmt in ("yaml", "vertex"):
        kubeflow_runner.check_cluster_paths(config, fmt)
    leaves = kubeflow_runner._config_leaves(config)
    paths = [v for _, v in leaves if isinstance(v, str) and "/" in v]
    assert paths and not machine_paths_in("\n".join(paths))


@pytest.mark.usefixtures("bucket_env")
def test_the_documented_bucket_compile_of_nfcorpus(tmp_path: Path) -> None:
    """docs/kubeflow.md's command: the spec it writes reads and writes the bucket only."""
    out = tmp_path / "rankpipe-nfcorpus.yaml"
    argv = ["compile", "nfcorpus", "--output", str(out), "--set", "runner.image=REGISTRY/rankpipe"]
    assert cli.main(argv) == 0
    text = out.read_text()
    assert not machine_paths_in(text), machine_paths_in(text)
    for value in BUCKET_ENV.values():
        assert value in text, value


@pytest.mark.parametrize(
    ("setting", "fmt", "message"),
    [
        ("runner.pipeline_root=/tmp/root", "yaml", "runner.pipeline_root: '/tmp/root' is not a"),
        ("runner.pipeline_root=minio://b/r", "vertex", "runner.pipeline_root: 'minio://b/r'"),
        # TensorFlow in the image opens gs:// only: the components could not write or read these.
        ("pusher.destination=s3://b/serving", "yaml", "pusher.destination: 's3://b/serving'"),
        ("collection.documents=minio://b/c.jsonl", "yaml", "collection.documents: 'minio://b/c"),
        ("runner.pipeline_name=Rank_Pipe", "yaml", "runner.pipeline_name: 'Rank_Pipe'"),
    ],
)
def test_what_the_cluster_cannot_use_is_refused(setting: str, fmt: str, message: str) -> None:
    config = load_config("demo", [*cluster_overrides("demo"), setting], check_inputs=False)
    with pytest.raises(ConfigError, match=re.escape(message)):
        kubeflow_runner.check_cluster_paths(config, fmt)


@pytest.mark.parametrize(
    "beam_args",
    [
        ["--runner=DataflowRunner", "--project=p", "--temp_location=gs://b/tmp"],
        ["--runner=PortableRunner", "--job_endpoint=flink:8099", "--environment_type=DOCKER"],
    ],
)
def test_a_distributed_beam_runner_is_refused(beam_args: list[str]) -> None:
    """Its workers would read the launcher's pod-local copies of the input artifacts
    (docs/datagen.md, 'Distributed runners')."""
    config = load_config("demo", cluster_overrides("demo"), check_inputs=False)
    config.runner.beam.extra_args = beam_args
    with pytest.raises(ConfigError, match=r"runner\.beam\.extra_args: the Beam runner .*pod"):
        kubeflow_runner.check_cluster_paths(config)
    # Beam in the pod, in process (LOOPBACK workers) included, is fine.
    config.runner.beam.extra_args = [
        "--runner=PortableRunner",
        "--job_endpoint=embed",
        "--environment_type=LOOPBACK",
    ]
    kubeflow_runner.check_cluster_paths(config)


@pytest.mark.parametrize(
    "setting",
    [
        "collection.qrels=/rankpipe/data/qrels.txt",  # shipped in the image
        "runner.pipeline_root=minio://mlpipeline/v2/artifacts",  # the launcher moves artifacts
        "runner.pipeline_root=s3://bucket/root",
    ],
)
def test_what_the_cluster_can_use_is_accepted(setting: str) -> None:
    config = load_config("demo", [*cluster_overrides("demo"), setting], check_inputs=False)
    kubeflow_runner.check_cluster_paths(config)


def test_cranfield_spec_has_every_trainer_read_the_corpus_vectors(tmp_path: Path) -> None:
    """The compiled Cranfield spec runs the CorpusEncoder as a task of its own, and every
    Trainer (the pushed one and each fold's) and the evaluator take its rankpipe.CorpusVectors
    artifact as their `corpus_vectors` input (no Trainer pod embeds the corpus; RankingDataGen
    reads it only for hybrid retrieval, which Cranfield has not); the entrypoint knows the
    type."""
    from kfp.client.client import _extract_pipeline_yaml

    config = load_config("cranfield", cluster_overrides("cranfield"), False)
    out = kubeflow_runner.compile_pipeline(config, str(tmp_path / "cranfield.yaml"))
    spec = _extract_pipeline_yaml(out).pipeline_spec
    tasks = spec.root.dag.tasks
    readers = sorted(
        name
        for name, task in tasks.items()
        if "corpus_vectors" in task.inputs.artifacts
        and task.inputs.artifacts["corpus_vectors"].task_output_artifact.producer_task
        == "CorpusEncoder"
    )
    trainers = ["Trainer", *(f"Trainer_fold{i}" for i in range(5))]
    assert readers == sorted(["RankingEvaluator", *trainers])
    for name in ("CorpusEncoder", *trainers):
        assert name in tasks
    encoder = spec.components[tasks["CorpusEncoder"].component_ref.name]
    output = encoder.output_definitions.artifacts["corpus_vectors"]
    assert output.artifact_type.instance_schema.startswith("title: rankpipe.CorpusVectors\n")
    trainer = spec.components[tasks["Trainer_fold3"].component_ref.name]
    schema = trainer.input_definitions.artifacts["corpus_vectors"].artifact_type.instance_schema
    assert schema.startswith("title: rankpipe.CorpusVectors\n")
    assert "rankpipe.CorpusVectors" in kfp_entrypoint.ARTIFACT_TYPES
    executors = json_format.MessageToDict(spec.deployment_spec)["executors"]
    args = executors[encoder.executor_label]["container"]["args"]
    assert "components.corpus_encoder.executor.Executor" in args
    # Without a dense encoder anywhere (KNRM) there is no such task.
    knrm = load_config("cranfield-knrm", cluster_overrides("cranfield-knrm"), False)
    knrm_out = kubeflow_runner.compile_pipeline(knrm, str(tmp_path / "knrm.yaml"))
    assert "CorpusEncoder" not in _extract_pipeline_yaml(knrm_out).pipeline_spec.root.dag.tasks
