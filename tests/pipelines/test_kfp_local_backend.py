"""tests/kfp_local/ (the local KFP backend), and the compiled demo pipeline run end to end
through it.

The end-to-end test is CI's proof that the compiled spec runs on KFP v2: every task is a
`python -m pipelines.kfp_entrypoint` process fed the ExecutorInput the backend's driver would
build, with object-store URIs, empty input types and the launcher's download and upload.
"""

from __future__ import annotations

import glob
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import kfp_local  # tests/kfp_local, tests/ on sys.path (tests/conftest.py)
import pytest
import yaml
from google.protobuf import json_format
from kfp.pipeline_spec import pipeline_spec_pb2 as pb
from kfp_local import BackendError, LocalKfpBackend
from tfx import v1 as tfx

from pipelines.config import COMPONENT_IDS
from pipelines.pipeline import SCHEMA_FILE

# ---- refusals, as the backend's compiler and driver refuse ------------------------------------


def _compile_small(tmp_path: Path, spec_2_1: bool, with_resolver: bool) -> pb.PipelineSpec:
    """A real TFX-compiled spec: ImportSchemaGen (and a latest-blessed-model Resolver)."""
    components = [tfx.components.ImportSchemaGen(schema_file=str(SCHEMA_FILE))]
    if with_resolver:
        components.append(
            tfx.dsl.Resolver(
                strategy_class=tfx.dsl.experimental.LatestBlessedModelStrategy,
                model=tfx.dsl.Channel(type=tfx.types.standard_artifacts.Model),
                model_blessing=tfx.dsl.Channel(type=tfx.types.standard_artifacts.ModelBlessing),
            ).with_id("latest_blessed_model_resolver")
        )
    runner = tfx.orchestration.experimental.KubeflowV2DagRunner(
        config=tfx.orchestration.experimental.KubeflowV2DagRunnerConfig(
            default_image="rankpipe:test",
            default_commands=["python", "-m", "pipelines.kfp_entrypoint"],
            use_pipeline_spec_2_1=spec_2_1,
        ),
        output_dir=str(tmp_path),
        output_filename="spec.yaml",
    )
    runner.run(
        tfx.dsl.Pipeline(pipeline_name="small", pipeline_root=str(tmp_path), components=components)
    )
    return kfp_local.load_spec(tmp_path / "spec.yaml")


def test_resolver_executors_are_refused(tmp_path: Path) -> None:
    spec = _compile_small(tmp_path, spec_2_1=True, with_resolver=True)
    with pytest.raises(BackendError, match="non-container and non-importer executor not impl"):
        LocalKfpBackend(tmp_path / "backend").run(spec)
    assert not (tmp_path / "backend" / "pod").exists()  # refused before any task ran


def test_schema_2_0_constant_value_is_refused(tmp_path: Path) -> None:
    spec = _compile_small(tmp_path, spec_2_1=False, with_resolver=False)
    task = spec.root.dag.tasks["ImportSchemaGen"]
    assert task.inputs.parameters["schema_file"].runtime_value.HasField("constant_value")
    with pytest.raises(
        BackendError,
        match=r"param runtime value spec of type \*pipelinespec"
        r"\.ValueOrRuntimeParameter_ConstantValue not implemented",
    ):
        LocalKfpBackend(tmp_path / "backend").run(spec)


def test_schema_2_0_legacy_parameter_type_fails_the_type_check(tmp_path: Path) -> None:
    spec = _compile_small(tmp_path, spec_2_1=False, with_resolver=False)
    param = spec.root.dag.tasks["ImportSchemaGen"].inputs.parameters["schema_file"]
    param.runtime_value.constant.string_value = param.runtime_value.constant_value.string_value
    definition = spec.components["ImportSchemaGen"].input_definitions.parameters["schema_file"]
    assert definition.type and not definition.parameter_type  # `type: STRING`, schema 2.0
    with pytest.raises(
        BackendError,
        match="input parameter 'schema_file' type mismatch: "
        "expect PARAMETER_TYPE_ENUM_UNSPECIFIED, got string",
    ):
        LocalKfpBackend(tmp_path / "backend").run(spec)


def test_pipeline_root_must_be_an_object_store(tmp_path: Path) -> None:
    spec = _compile_small(tmp_path, spec_2_1=True, with_resolver=False)
    with pytest.raises(BackendError, match="unsupported Cloud bucket"):
        LocalKfpBackend(tmp_path / "backend").run(spec, pipeline_root=str(tmp_path))


# ---- DAG order and the object store -----------------------------------------------------------


def test_topological_order_uses_dependencies_and_producers() -> None:
    dag = json_format.ParseDict(
        {
            "tasks": {
                "a": {"taskInfo": {"name": "a"}},
                "b": {
                    "inputs": {
                        "artifacts": {
                            "x": {
                                "taskOutputArtifact": {
                                    "producerTask": "c",
                                    "outputArtifactKey": "o",
                                }
                            }
                        }
                    }
                },
                "c": {"dependentTasks": ["a"]},
                "d": {
                    "inputs": {
                        "parameters": {
                            "p": {
                                "taskOutputParameter": {
                                    "producerTask": "b",
                                    "outputParameterKey": "q",
                                }
                            }
                        }
                    }
                },
            }
        },
        pb.DagSpec(),
    )
    assert kfp_local.task_order(dag) == ["a", "c", "b", "d"]
    dag.tasks["a"].dependent_tasks.append("d")
    with pytest.raises(BackendError, match="cycle"):
        kfp_local.task_order(dag)


def _sleep_spec(tasks: dict[str, list[str]], fail: str = "", cache: bool = True) -> pb.PipelineSpec:
    """A spec of container tasks that each append "<name> start|end <time>" to $STAMPS around a
    short sleep (task -> the tasks it depends on); `fail` exits 3 at once instead."""
    code = (
        "import os, sys, time; n = sys.argv[1]; f = open(os.environ['STAMPS'], 'a'); "
        "f.write(f'{n} start {time.time()}\\n'); f.flush(); "
        "n == sys.argv[2] and sys.exit(3); time.sleep(1.5); "
        "f.write(f'{n} end {time.time()}\\n'); f.close()"
    )
    spec = {
        "pipelineInfo": {"name": "sleepers"},
        "schemaVersion": "2.1.0",
        "components": {},
        "deploymentSpec": {"executors": {}},
        "root": {"dag": {"tasks": {}}},
    }
    for name, deps in tasks.items():
        spec["components"][f"comp-{name}"] = {"executorLabel": f"exec-{name}"}
        spec["deploymentSpec"]["executors"][f"exec-{name}"] = {
            "container": {"image": "x", "command": ["python", "-c", code, name, fail or "-"]}
        }
        spec["root"]["dag"]["tasks"][name] = {
            "taskInfo": {"name": name},
            "componentRef": {"name": f"comp-{name}"},
            "dependentTasks": deps,
            "cachingOptions": {"enableCache": cache},
        }
    return json_format.ParseDict(spec, pb.PipelineSpec())


def _stamps(path: Path) -> dict[tuple[str, str], float]:
    return {(n, what): float(t) for n, what, t in (ln.split() for ln in path.open())}


def test_independent_tasks_run_at_once_and_dependents_wait(tmp_path: Path) -> None:
    stamps = tmp_path / "stamps"
    env = dict(os.environ, STAMPS=str(stamps))
    backend = LocalKfpBackend(tmp_path / "backend", env=env, publish_logs=False)
    backend.run(_sleep_spec({"a": [], "b": [], "c": ["a", "b"]}))
    t = _stamps(stamps)
    # a and b overlap (Argo starts both at once); c starts after both ended.
    assert t[("a", "start")] < t[("b", "end")] and t[("b", "start")] < t[("a", "end")]
    assert t[("c", "start")] > max(t[("a", "end")], t[("b", "end")])
    stamps.unlink()
    LocalKfpBackend(tmp_path / "b2", env=env, publish_logs=False, parallelism=1).run(
        _sleep_spec({"a": [], "b": []})
    )
    t = _stamps(stamps)
    assert t[("b", "start")] >= t[("a", "end")] or t[("a", "start")] >= t[("b", "end")]


def test_a_failed_task_stops_scheduling_but_running_tasks_end(tmp_path: Path) -> None:
    stamps = tmp_path / "stamps"
    backend = LocalKfpBackend(
        tmp_path / "backend", env=dict(os.environ, STAMPS=str(stamps)), publish_logs=False
    )
    with pytest.raises(BackendError, match="task 'a': failed to execute component: exit status 3"):
        backend.run(_sleep_spec({"a": [], "b": [], "c": ["a"], "d": ["b"]}, fail="a"))
    t = _stamps(stamps)
    # a failed at once while b slept: b ended and was recorded, and nothing new started.
    assert ("a", "end") not in t and ("b", "end") in t and "b" in backend.tasks
    assert not {("c", "start"), ("d", "start")} & set(t)  # nothing new started after a failed


def test_cache_reuses_an_execution_with_the_same_fingerprint(tmp_path: Path) -> None:
    stamps = tmp_path / "stamps"
    env = dict(os.environ, STAMPS=str(stamps))
    backend = LocalKfpBackend(tmp_path / "backend", env=env, publish_logs=False)
    spec = _sleep_spec({"a": [], "b": ["a"]})
    first = backend.run(spec)
    second = backend.run(spec)
    assert len(stamps.read_text().splitlines()) == 4  # the second run launched nothing
    assert all(t.cached and t.returncode is None for t in second.tasks.values())
    assert {n: t.fingerprint for n, t in second.tasks.items()} == {
        n: t.fingerprint for n, t in first.tasks.items()
    }
    # Another command is another fingerprint; caching off in the task or the server runs it.
    changed = _sleep_spec({"a": [], "b": ["a"]}, fail="nobody")
    assert not any(t.cached for t in backend.run(changed).tasks.values())
    assert not any(
        t.cached for t in backend.run(_sleep_spec({"a": []}, cache=False)).tasks.values()
    )
    off = LocalKfpBackend(tmp_path / "off", env=env, publish_logs=False, cache_disabled=True)
    off.run(spec)
    assert not any(t.cached for t in off.run(spec).tasks.values())


def _flaky_spec(failures: int, retry: dict | None) -> pb.PipelineSpec:
    """One task that appends "start <time>" to $STAMPS and exits 3 while fewer than `failures`
    starts are recorded there (a file outside the pod: each attempt is a fresh pod)."""
    code = (
        "import os, sys, time; p = os.environ['STAMPS']; "
        "n = len(open(p).readlines()) if os.path.exists(p) else 0; "
        "open(p, 'a').write(f'start {time.time()}\\n'); sys.exit(3 if n < int(sys.argv[1]) else 0)"
    )
    spec = _sleep_spec({"a": []}, cache=False)
    executor = json_format.MessageToDict(spec.deployment_spec)
    executor["executors"]["exec-a"]["container"]["command"] = ["python", "-c", code, str(failures)]
    spec.deployment_spec.Clear()
    spec.deployment_spec.update(executor)
    if retry is not None:
        json_format.ParseDict(retry, spec.root.dag.tasks["a"].retry_policy)
    return spec


def test_a_task_that_fails_once_is_retried_after_its_backoff(tmp_path: Path) -> None:
    stamps = tmp_path / "stamps"
    env = dict(os.environ, STAMPS=str(stamps))
    policy = {"maxRetryCount": 2, "backoffDuration": "1s", "backoffFactor": 2.0}
    backend = LocalKfpBackend(tmp_path / "backend", env=env, publish_logs=False)
    task = backend.run(_flaky_spec(1, policy)).tasks["a"]
    starts = [float(line.split()[1]) for line in stamps.open()]
    assert task.returncode == 0 and task.attempts == 2 and task.retry_waits == [1.0]
    assert len(starts) == 2 and starts[1] - starts[0] >= 1.0  # a new pod after the backoff
    # Failing every time: the first try and maxRetryCount retries, waits growing by the factor.
    stamps.unlink()
    with pytest.raises(BackendError, match="exit status 3"):
        backend.run(_flaky_spec(5, policy))
    starts = [float(line.split()[1]) for line in stamps.open()]
    assert len(starts) == 3 and starts[2] - starts[1] >= 2.0
    # No retryPolicy: the first failure fails the task; backoffMaxDuration stops retries too.
    for retry, runs in ((None, 1), ({**policy, "backoffMaxDuration": "1s"}, 1)):
        stamps.unlink()
        with pytest.raises(BackendError, match="exit status 3"):
            backend.run(_flaky_spec(1, retry))
        assert len(stamps.read_text().splitlines()) == runs


def test_pipeline_parameters_take_the_run_value_or_the_default(tmp_path: Path) -> None:
    """A root input parameter given to a task (componentInputParameter), as TFX compiles a
    RuntimeParameter: the run's value when it gives one, else the spec's default."""
    out = tmp_path / "seen"
    spec = _sleep_spec({"a": []}, cache=False)
    code = "import os, sys; open(os.environ['OUT'], 'a').write(sys.argv[1] + '\\n')"
    executor = json_format.MessageToDict(spec.deployment_spec)
    executor["executors"]["exec-a"]["container"]["command"] = ["python", "-c", code]
    executor["executors"]["exec-a"]["container"]["args"] = ["{{$.inputs.parameters['steps']}}"]
    spec.deployment_spec.Clear()
    spec.deployment_spec.update(executor)
    json_format.ParseDict(
        {"parameters": {"steps": {"parameterType": "NUMBER_INTEGER"}}},
        spec.components["comp-a"].input_definitions,
    )
    json_format.ParseDict(
        {
            "parameters": {
                "steps": {
                    "parameterType": "NUMBER_INTEGER",
                    "defaultValue": 300,
                    "isOptional": True,
                }
            }
        },
        spec.root.input_definitions,
    )
    spec.root.dag.tasks["a"].inputs.parameters["steps"].component_input_parameter = "steps"
    backend = LocalKfpBackend(tmp_path / "backend", env=dict(os.environ, OUT=str(out)))
    backend.run(spec)
    backend.run(spec, parameters={"steps": 25})
    assert out.read_text().split() == ["300", "25"]
    with pytest.raises(BackendError, match="not parameters of the pipeline"):
        backend.run(spec, parameters={"stpes": 25})
    with pytest.raises(BackendError, match="is not a NUMBER_INTEGER"):
        backend.run(spec, parameters={"steps": "many"})


def test_object_store_keeps_files_not_directories(tmp_path: Path) -> None:
    backend = LocalKfpBackend(tmp_path / "backend")
    local = tmp_path / "pod" / "model"
    (local / "Format-Serving" / "variables").mkdir(parents=True)
    (local / "Format-Serving" / "saved_model.pb").write_bytes(b"pb")
    (local / "empty").mkdir()
    uri = "minio://mlpipeline/v2/artifacts/Trainer/salt/model"
    backend._upload(local, uri)
    stored = backend.store_path(uri)
    assert sorted(str(p.relative_to(stored)) for p in stored.rglob("*")) == [
        "Format-Serving",
        "Format-Serving/saved_model.pb",
    ]  # empty directories upload nothing, as in an object store
    backend._download(uri, tmp_path / "pod2" / "model")
    assert (tmp_path / "pod2" / "model" / "Format-Serving" / "saved_model.pb").read_bytes() == b"pb"
    (tmp_path / "page").write_text("<p>x</p>")
    backend._upload(tmp_path / "page", "minio://b/T/s/report")
    backend._download("minio://b/T/s/report", tmp_path / "pod3" / "report")
    assert (tmp_path / "pod3" / "report").read_text() == "<p>x</p>"


def test_input_artifacts_come_back_as_from_mlmd() -> None:
    recorded = kfp_local.Artifact(
        7, "examples", "tfx.Examples", "minio://b/x", {"split_names": "[]", "span": 0.0}
    )
    artifact = LocalKfpBackend._as_input(recorded)
    assert artifact.name == "7" and artifact.uri == "minio://b/x"
    assert artifact.type.WhichOneof("kind") == "instance_schema"
    assert artifact.type.instance_schema == ""
    assert json_format.MessageToDict(artifact.metadata) == {"split_names": "[]", "span": 0.0}


# ---- the compiled demo pipeline, end to end -------------------------------------------------

# The demo (KNRM) reads no corpus vectors and has no Tuner (tuner.max_trials 0).
COMPONENTS = set(COMPONENT_IDS) - {"CorpusEncoder", "Tuner"}


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """Three runs through the local backend, as a cluster with caching on would see them: the
    compiled demo spec, the same spec again (served from the cache), and the spec compiled with
    another trainer seed (only the Trainer and what follows it run again); and one
    LocalDagRunner run of the first config (its own pipeline root and push destination)."""
    import kfp_testing

    work = tmp_path_factory.mktemp("kfp-e2e")
    common = ["runner.pipeline_name=rankpipe-kfp-ci", "runner.kubeflow.defaults.retry_backoff=1s"]
    kfp = [
        f"runner.pipeline_root={kfp_testing.PIPELINE_ROOT}",
        f"pusher.destination={work / 'serving'}",
    ]
    config = kfp_testing.demo_config(work / "outputs", common + kfp)  # writes the collection
    spec_file = kfp_testing.compile_for_local_backend(config, work / "pipeline.yaml")
    reseeded = kfp_testing.demo_config(work / "outputs", common + kfp + ["trainer.seed=7"])
    reseeded_file = kfp_testing.compile_for_local_backend(reseeded, work / "reseeded.yaml")

    # The LocalDagRunner run goes alongside the KFP runs (mostly one core each: the KFP tasks
    # spend most of their time importing): the test takes the time of the KFP runs alone.
    local = [f"runner.pipeline_root={work / 'ldr'}", f"pusher.destination={work / 'ldr-serving'}"]
    args = [sys.executable, "-m", "pipelines.cli", "run", "demo"]
    for override in kfp_testing.SMALL_DEMO + common + local:
        args += ["--set", override]
    env = dict(os.environ, RANKPIPE_OUTPUTS=str(work / "outputs"))
    with open(work / "ldr.log", "wb") as log:
        ldr = subprocess.Popen(
            args, cwd=kfp_local.REPO_ROOT, env=env, stdout=log, stderr=subprocess.STDOUT
        )
        try:
            backend = LocalKfpBackend(work / "backend", timeout=900)
            first = backend.run(spec_file)
            second = backend.run(spec_file)
            versions_after_second = sorted(p.name for p in (work / "serving").iterdir())
            third = backend.run(reseeded_file)
            # A pipeline parameter set for the run, without recompiling, and a Trainer pod
            # killed once: its retryPolicy (demo.yaml's retries, backoff shortened below)
            # starts it again.
            backend.fail_first = {"Trainer": 1}
            fourth = backend.run(spec_file, parameters={"train_steps": 30})
        except BaseException:
            ldr.kill()
            ldr.wait()
            raise
        returncode = ldr.wait(timeout=900)
    assert returncode == 0, (work / "ldr.log").read_text()[-5000:]
    [ldr_metrics] = glob.glob(
        str(work / "ldr" / "RankingEvaluator" / "evaluation" / "*" / "metrics.json")
    )
    return {
        "work": work,
        "spec": yaml.safe_load(spec_file.read_text()),
        "backend": backend,
        "first": first,
        "second": second,
        "third": third,
        "fourth": fourth,
        "versions_after_second": versions_after_second,
        "ldr_metrics": json.loads(Path(ldr_metrics).read_text()),
    }


def _metrics(backend: LocalKfpBackend, result: kfp_local.RunResult) -> dict:
    evaluation = result.tasks["RankingEvaluator"].outputs["evaluation"]
    return json.loads((backend.store_path(evaluation.uri) / "metrics.json").read_text())


@pytest.mark.e2e
def test_every_task_ran_from_object_store_uris(runs: dict) -> None:
    spec = runs["spec"]
    assert spec["schemaVersion"] == "2.1.0" and spec["defaultPipelineRoot"].startswith("minio://")
    for result in (runs["first"], runs["second"], runs["third"]):
        assert set(result.tasks) == COMPONENTS
        assert all(task.returncode in (0, None) for task in result.tasks.values())
        assert all(task.cached == (task.returncode is None) for task in result.tasks.values())
        assert result.pipeline_root == "minio://mlpipeline/v2/artifacts"
        for name, task in result.tasks.items():
            for key, artifact in task.outputs.items():
                # The launcher recorded the object-store URI, not the executor's local path.
                assert artifact.uri == (
                    f"{result.pipeline_root}/{name}/{artifact.uri.split('/')[-2]}/{key}"
                ), (name, key, artifact.uri)
    # Input artifacts reached the executors with an empty type, as the driver sends them.
    trainer = runs["first"].tasks["Trainer"].executor_input["inputs"]["artifacts"]
    assert {a["artifacts"][0]["type"]["instanceSchema"] for a in trainer.values()} == {""}


@pytest.mark.e2e
def test_kubeflow_ui_artifacts(runs: dict) -> None:
    backend, outputs = runs["backend"], runs["first"].tasks["RankingEvaluator"].outputs
    types = {key: a.type_name for key, a in outputs.items()}
    assert types["report"] == "system.HTML" and types["report_markdown"] == "system.Markdown"
    assert types["metrics"] == "system.Metrics"
    for key in ("report", "report_markdown"):  # the UI reads the file at the URI
        assert backend.store_path(outputs[key].uri).is_file()
    assert "<html" in backend.store_path(outputs["report"].uri).read_text().lower()
    metrics = _metrics(backend, runs["first"])
    scalars = outputs["metrics"].custom_properties
    main = metrics["main_metric"]
    assert scalars[f"{main} (candidate)"] == pytest.approx(metrics["aggregate"]["candidate"][main])
    assert scalars[f"{main} (first stage)"] == pytest.approx(
        metrics["aggregate"]["first_stage"][main]
    )
    assert scalars["display_name"] == "Ranking metrics"


@pytest.mark.e2e
def test_metrics_equal_a_local_dag_runner_run(runs: dict) -> None:
    kfp = _metrics(runs["backend"], runs["first"])
    local = runs["ldr_metrics"]
    assert kfp["num_queries"] == local["num_queries"] > 0
    for system in ("first_stage", "candidate"):
        assert kfp["aggregate"][system] == pytest.approx(local["aggregate"][system], abs=1e-6)
        per_query = {(q, m): v for q, d in kfp["per_query"][system].items() for m, v in d.items()}
        expected = {(q, m): v for q, d in local["per_query"][system].items() for m, v in d.items()}
        assert per_query == pytest.approx(expected, abs=1e-6)
    assert kfp["blessed"] == local["blessed"]


@pytest.mark.e2e
def test_unchanged_second_run_is_served_from_the_cache(runs: dict) -> None:
    first, second = runs["first"], runs["second"]
    assert not any(task.cached for task in first.tasks.values())
    # Every task: the driver found the same fingerprint, no launcher ran, and the outputs are
    # the first run's own MLMD artifacts (so nothing new was pushed).
    for name, task in second.tasks.items():
        assert task.cached and task.returncode is None, name
        assert task.fingerprint == first.tasks[name].fingerprint
        assert {k: a.id for k, a in task.outputs.items()} == {
            k: a.id for k, a in first.tasks[name].outputs.items()
        }
    destination = Path(
        first.tasks["Pusher"].outputs["pushed_model"].custom_properties["pushed_destination"]
    )
    assert destination.parent == runs["work"] / "serving"
    assert runs["versions_after_second"] == [destination.name]


@pytest.mark.e2e
def test_model_pushed_then_used_as_the_baseline(runs: dict) -> None:
    backend = runs["backend"]
    # A changed trainer seed changes the Trainer's parameters: it and the tasks fed by its
    # model run again; everything before it comes from the cache.
    ran = {name for name, task in runs["third"].tasks.items() if not task.cached}
    assert ran == {"Trainer", "RankingEvaluator", "Pusher"}
    first, second = _metrics(backend, runs["first"]), _metrics(backend, runs["third"])
    assert first["blessed"] and first["baseline_model"] is None
    pushed = runs["first"].tasks["Pusher"].outputs["pushed_model"].custom_properties
    assert pushed["pushed"] == 1
    destination = pushed["pushed_destination"]
    assert Path(destination, "saved_model.pb").is_file()
    # The third run finds the model the first one pushed (the served one) under the
    # destination. It is a fair reference only on the queries held out from it: the demo's
    # test split, 4 queries here, too few for the randomization test to ever give p < 0.05,
    # so the verdict names it and says why it is not compared (components/ranking_evaluator/
    # baseline.py; compared on enough held-out queries: tests/components/ranking_evaluator/
    # test_baseline.py).
    assert second["baseline_model"] is None and "baseline" not in second["comparisons"]
    skipped = second["baseline_skipped"]
    assert destination in skipped and "held out from it" in skipped and "too few" in skipped


@pytest.mark.e2e
def test_a_run_parameter_retrains_and_a_killed_pod_is_retried(runs: dict) -> None:
    """The compiled spec's train_steps parameter, set for one run (the config said 20): the
    Trainer runs again with 30 steps, and what its model feeds; the rest is served from the
    cache. Its first pod was killed; the retry policy started a second one after the backoff."""
    fourth = runs["fourth"]
    ran = {name for name, task in fourth.tasks.items() if not task.cached}
    assert ran == {"Trainer", "RankingEvaluator", "Pusher"}
    trainer = fourth.tasks["Trainer"]
    assert trainer.attempts == 2 and trainer.retry_waits == [1.0]
    given = trainer.executor_input["inputs"]["parameterValues"]
    assert given["rankpipe_param_train_steps"] == 30
    # The entrypoint put it where the Trainer reads it (the other parameters at their defaults).
    assert re.search(r"pipeline parameters of this run: \{[^}]*'train_steps': 30\b", trainer.log)
    assert all(t.attempts == 1 for n, t in fourth.tasks.items() if n != "Trainer")
    first = runs["first"].tasks["Trainer"].executor_input["inputs"]["parameterValues"]
    assert first["rankpipe_param_train_steps"] == 20  # the default: the config's value


@pytest.mark.e2e
def test_cross_validation_runs_on_the_backend_with_parallel_fold_trainers(
    tmp_path: Path,
) -> None:
    """Issue 17: the compiled 3-fold pipeline runs on KFP v2: the fold Trainers are tasks of
    their own that the backend starts together, and the evaluator ranks every judged query."""
    import kfp_testing

    overrides = [
        "runner.pipeline_name=rankpipe-kfp-cv",
        f"runner.pipeline_root={kfp_testing.PIPELINE_ROOT}",
        f"pusher.destination={tmp_path / 'serving'}",
        "evaluator.cross_validation.folds=3",
        "datagen.split.num_folds=3",
    ]
    config = kfp_testing.demo_config(tmp_path / "outputs", overrides)
    spec_file = kfp_testing.compile_for_local_backend(config, tmp_path / "pipeline.yaml")
    backend = LocalKfpBackend(tmp_path / "backend", timeout=900)
    result = backend.run(spec_file)
    folds = {f"Trainer_fold{i}" for i in range(3)}
    assert set(result.tasks) == COMPONENTS | folds
    assert all(task.returncode == 0 for task in result.tasks.values())
    # The fold branches overlapped in time: none waited for another.
    tasks = [result.tasks[t] for t in sorted(folds | {"Trainer"})]
    assert max(t.started for t in tasks) < min(t.started + t.seconds for t in tasks)
    metrics = _metrics(backend, result)
    per_fold = metrics["cross_validation"]["per_fold"]
    assert [f["fold"] for f in per_fold] == [0, 1, 2]
    assert sum(f["queries"] for f in per_fold) == metrics["num_queries"]
