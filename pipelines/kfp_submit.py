"""`rankpipe submit`: compiles a config and starts a run on a Kubeflow Pipelines v2 API, with
the pipeline root passed with the run.

Why not just upload the compiled spec: its `defaultPipelineRoot` is read only by the KFP UI's
run form (kubeflow/pipelines frontend/src/pages/NewRunV2.tsx fills the form's root from it). A
run created through the API (`kfp.Client`, the `kfp` CLI) has the root its request carries in
`runtime_config.pipeline_root` or none: the API server hands that value to the root DAG driver as
the runtime config's `gcsOutputDirectory` (backend/src/apiserver/server/api_converter.go), and
the driver, given none, takes the namespace's `kfp-launcher` default,
`minio://mlpipeline/v2/artifacts` (backend/src/v2/driver/root_dag.go RootDAG, driver.go in
2.0 to 2.5; backend/src/v2/config/env.go), never the spec's. And kfp 2.5's `kfp run create`
has no option for the root (kfp/cli/run.py `create` calls `Client.run_pipeline` without
`pipeline_root`). So this module compiles exactly as `rankpipe compile` does
(pipelines/kubeflow_runner.py compile_pipeline, into a temporary `.yaml`, the only package
kind `kfp.Client` reads as a bare PipelineSpec) and calls
`kfp.Client.create_run_from_pipeline_package(..., pipeline_root=runner.pipeline_root)`.

What that call sends (kfp 2.5.0, kfp/client/client.py; tests/pipelines/kfp_fake_api.py serves
the same): GET /apis/v2beta1/experiments?filter=<display_name equals NAME>, POST
/apis/v2beta1/experiments when there is none, POST /apis/v2beta1/runs with `pipeline_spec`,
`runtime_config.pipeline_root` and `experiment_id`. Before those, `kfp.Client()` calls GET
/apis/v2beta1/healthz when it knows no namespace (no --namespace and no namespace in the kfp
CLI's ~/.config/kfp/context.json) to learn whether the deployment is multi-user; it retries a
failing healthz answer 5 times, 5 s apart (Client.get_kfp_healthz).
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import io
import logging
import os
import re
import tempfile
import warnings
from typing import Any

from pipelines import kubeflow_runner
from pipelines.config import PipelineConfig


class SubmitError(RuntimeError):
    """The KFP API could not be reached, or it refused the run (the message names the host)."""


@dataclasses.dataclass(frozen=True)
class SubmittedRun:
    run_id: str
    run_name: str
    experiment: str
    pipeline_root: str
    url: str


def _reason(error: BaseException) -> str:
    """The innermost cause of a connection failure (urllib3 wraps it in MaxRetryError), without
    the connection object's repr urllib3 puts first."""
    reason = getattr(error, "reason", None)
    text = str(reason if isinstance(reason, BaseException) else error)
    return re.sub(r"^<[^>]*>: ", "", text)


def submit_run(
    config: PipelineConfig,
    host: str,
    experiment: str | None = None,
    run_name: str | None = None,
    namespace: str | None = None,
    parameters: dict[str, Any] | None = None,
    service_account: str | None = None,
) -> SubmittedRun:
    """Compiles `config` for Kubeflow and creates a run of it on the KFP API at `host`, in
    `experiment` (created when missing; default: the pipeline name), with the run's pipeline
    root = config.runner.pipeline_root. A config the cluster cannot use raises ConfigError
    before anything is sent; a failed connection or a refused request raises SubmitError.
    `parameters` are the run's pipeline parameters (kubeflow_runner.PIPELINE_PARAMETERS; the
    config's values otherwise), `service_account` the Kubernetes service account its pods run
    as (e.g. one bound to a GCP service account through Workload Identity, for gs://)."""
    import kfp
    import kfp_server_api
    import urllib3

    experiment = experiment or config.runner.pipeline_name
    run_name = run_name or (
        f"{config.runner.pipeline_name} {datetime.datetime.now():%Y-%m-%d %H:%M:%S}"
    )
    root = config.runner.pipeline_root
    with tempfile.TemporaryDirectory(prefix="rankpipe-submit-") as tmp:
        package = os.path.join(tmp, f"{config.runner.pipeline_name}.yaml")
        kubeflow_runner.compile_pipeline(config, package, "yaml")
        # urllib3 logs each of its 3 connection retries; the SubmitError below says it once.
        urllib3_log = logging.getLogger("urllib3.connectionpool")
        level = urllib3_log.level
        urllib3_log.setLevel(logging.ERROR)
        with warnings.catch_warnings():
            # "This client only works with Kubeflow Pipeline v2.0.0-beta.2 and later versions."
            warnings.simplefilter("ignore", FutureWarning)
            # kfp prints "Experiment details: ..." / "Run details: ..."; we print our own.
            with contextlib.redirect_stdout(io.StringIO()):
                try:
                    # Without a namespace this already calls the API (healthz).
                    client = kfp.Client(
                        host=host, **({"namespace": namespace} if namespace else {})
                    )
                    result = client.create_run_from_pipeline_package(
                        package,
                        run_name=run_name,
                        experiment_name=experiment,
                        namespace=namespace,
                        pipeline_root=root,
                        arguments=parameters or None,
                        service_account=service_account,
                    )
                except kfp_server_api.ApiException as e:
                    body = (e.body or "").strip().replace("\n", " ")[:500]
                    raise SubmitError(
                        f"the KFP API at {host} refused the request: HTTP {e.status} {e.reason}"
                        + (f": {body}" if body else "")
                    ) from None
                except (urllib3.exceptions.HTTPError, OSError) as e:
                    raise SubmitError(
                        f"cannot reach the KFP API at {host}: {_reason(e)} (is the address "
                        "right, and the port-forward or ingress up?)"
                    ) from None
                finally:
                    urllib3_log.setLevel(level)
    return SubmittedRun(
        run_id=result.run_id,
        run_name=run_name,
        experiment=experiment,
        pipeline_root=root,
        url=f"{host.rstrip('/')}/#/runs/details/{result.run_id}",
    )
