"""`rankpipe submit` against a local fake of the KFP v2beta1 REST API (kfp_fake_api.py): the
run request carries the compiled spec and `runtime_config.pipeline_root` (the backend ignores
the spec's own defaultPipelineRoot), through the real kfp.Client 2.5.0 and HTTP.

Also the failures: a config the cluster cannot use (exit 2, nothing sent), no API at the
address (exit 1 naming it), the API refusing the run (exit 1 with its status).
"""

from __future__ import annotations

import re
import socket
from pathlib import Path

import kfp
import pytest
from kfp_fake_api import PREFIX, FakeKfpApi
from test_kubeflow_runner import cluster_overrides

from pipelines import cli, kubeflow_runner
from pipelines.config import load_config

ROOT = "gs://bucket/rankpipe/root"  # runner.pipeline_root in cluster_overrides


@pytest.fixture(autouse=True)
def _kfp_context(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # kfp.Client() writes its context (namespace) to ~/.config/kfp/context.json: not ours.
    monkeypatch.setattr(kfp.Client, "_LOCAL_KFP_CONTEXT", str(tmp_path / "kfp" / "context.json"))


def _argv(host: str, *extra: str) -> list[str]:
    argv = ["submit", "demo", "--host", host]
    for setting in cluster_overrides("demo"):
        argv += ["--set", setting]
    return argv + list(extra)


def test_run_carries_the_spec_and_the_pipeline_root(capsys: pytest.CaptureFixture) -> None:
    with FakeKfpApi() as api:
        assert cli.main(_argv(api.host, "--experiment", "ranking", "--run-name", "first")) == 0
        first_out = capsys.readouterr().out
        # The root given on the command line wins, in the run and in the spec alike.
        other = "gs://other-bucket/root"
        assert cli.main(_argv(api.host, "--pipeline-root", other, "--experiment", "ranking")) == 0
        second_out = capsys.readouterr().out
    calls = [(r.method, r.path.removeprefix(PREFIX)) for r in api.requests]
    assert calls == [
        ("GET", "/healthz"),  # kfp.Client(): multi-user or not (no namespace given)
        ("GET", "/experiments"),  # by name: none yet
        ("POST", "/experiments"),
        ("POST", "/runs"),
        ("GET", "/healthz"),
        ("GET", "/experiments"),  # found: reused
        ("POST", "/runs"),
    ]
    assert api.requests[1].query["namespace"] == [""]  # single-user: none
    assert api.requests[2].body["display_name"] == "ranking"
    experiment_id = api.experiments[0]["experiment_id"]

    first, second = api.runs()
    assert first["runtime_config"]["pipeline_root"] == ROOT
    assert first["display_name"] == "first" and first["experiment_id"] == experiment_id
    config = load_config("demo", cluster_overrides("demo"), check_inputs=False)
    assert first["pipeline_spec"] == kubeflow_runner.build_pipeline_job(config)["pipelineSpec"]
    assert first["pipeline_spec"]["defaultPipelineRoot"] == ROOT

    assert second["runtime_config"]["pipeline_root"] == other
    assert second["pipeline_spec"]["defaultPipelineRoot"] == other
    assert second["experiment_id"] == experiment_id
    assert re.fullmatch(r"rankpipe-demo \d{4}-\d\d-\d\d \d\d:\d\d:\d\d", second["display_name"])

    run_id = re.search(r"\(([0-9a-f-]{36})\)", first_out).group(1)
    assert f"Run details: {api.host}/#/runs/details/{run_id}" in first_out
    assert f"Pipeline root: {ROOT}" in first_out and f"Pipeline root: {other}" in second_out
    assert "Experiment details:" not in first_out  # kfp's own prints are replaced by ours


def test_namespace_goes_to_the_experiment() -> None:
    with FakeKfpApi() as api:
        assert cli.main(_argv(api.host, "--namespace", "team-a")) == 0
    calls = [(r.method, r.path.removeprefix(PREFIX)) for r in api.requests]
    assert calls == [("GET", "/experiments"), ("POST", "/experiments"), ("POST", "/runs")]
    assert api.requests[0].query["namespace"] == ["team-a"]
    assert api.requests[1].body["namespace"] == "team-a"
    assert api.runs()[0]["runtime_config"]["pipeline_root"] == ROOT


def test_pipeline_parameters_and_service_account_go_with_the_run(
    capsys: pytest.CaptureFixture,
) -> None:
    with FakeKfpApi() as api:
        extra = ["--param", "train_steps=500", "--param", "push_destination=gs://b/serving"]
        assert cli.main(_argv(api.host, *extra, "--service-account", "rankpipe-gcs")) == 0
        for bad in ("steps=5", "train_steps=many", "learning_rate=fast"):
            assert cli.main(_argv(api.host, "--param", bad)) == 2
            assert "--param" in capsys.readouterr().err
    [run] = api.runs()  # the refused ones sent nothing
    assert run["runtime_config"]["parameters"] == {
        "train_steps": 500,
        "push_destination": "gs://b/serving",
    }
    assert run["service_account"] == "rankpipe-gcs"
    declared = run["pipeline_spec"]["root"]["inputDefinitions"]["parameters"]
    assert set(run["runtime_config"]["parameters"]) <= set(declared)


def test_a_root_the_cluster_cannot_write_is_a_config_error(
    capsys: pytest.CaptureFixture, tmp_path: Path
) -> None:
    with FakeKfpApi() as api:
        code = cli.main(_argv(api.host, "--pipeline-root", str(tmp_path / "root")))
    assert code == 2
    assert "runner.pipeline_root:" in capsys.readouterr().err
    assert api.requests == []  # nothing was sent


def test_no_api_at_the_address_exits_1_naming_it(capsys: pytest.CaptureFixture) -> None:
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        host = f"http://127.0.0.1:{s.getsockname()[1]}"
    assert cli.main(_argv(host)) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"rankpipe: cannot reach the KFP API at {host}: ")
    assert "Connection refused" in err and "Traceback" not in err and "<urllib3" not in err


def test_a_refused_run_exits_1_with_the_status(capsys: pytest.CaptureFixture) -> None:
    with FakeKfpApi(fail_runs=500) as api:
        assert cli.main(_argv(api.host)) == 1
    err = capsys.readouterr().err
    assert f"rankpipe: the KFP API at {api.host} refused the request: HTTP 500" in err
    assert "boom" in err
