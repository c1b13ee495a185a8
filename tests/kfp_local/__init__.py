"""A local stand-in for the open-source Kubeflow Pipelines v2 backend, for tests and benchmarks.

`LocalKfpBackend(workdir).run(spec)` executes a compiled PipelineSpec (YAML or JSON; the first
YAML document, as the KFP client reads a package) the way the backend's Argo compiler, driver
and launcher do, read from kubeflow/pipelines `backend/src/v2` at 7b70c7b (the same behaviour
in 2.14 - 2.17):

- at run creation, a `resolver` executor (or any that is neither container nor importer) is
  refused with the compiler's message (compiler/visitor.go; compiler/argocompiler/dag.go);
- tasks run as Argo runs a DAG: every task whose producers (dependentTasks plus the tasks its
  inputs name) are done starts at once, in a thread of its own (at most `parallelism` at a
  time when set); after a failure nothing new starts, the running tasks end, and the run fails;
- caching as the driver does it (driver/cache.go, cacheutils/cache.go): a task whose
  `cachingOptions.enableCache` is set and whose fingerprint (input artifact ids, parameter
  values, output specs, image, command and arguments) matches an earlier successful execution
  of the same pipeline on this backend reuses that execution's outputs without running; so an
  unchanged second run is served from the cache entirely, as on a cluster;
- per task, the driver (driver/container.go, driver/resolve.go, driver/driver.go
  provisionOutputs) builds the ExecutorInput: `inputs.parameterValues` only, from `constant`
  runtime values (schema 2.0 `constantValue` is refused as resolve.go refuses it, and a legacy
  `type` instead of `parameterType` fails its type check); input artifacts as read back from
  MLMD (metadata/client.go, metadata/converter.go): numeric `name` (the MLMD id), the producer's
  merged URI and metadata, and an EMPTY instance schema; outputs at
  `<pipeline root>/<task>/<uuid salt>/<key>` with the output definition's type, the
  launcher-written `executor-logs` output, and `outputFile` under the task root's local path;
- the launcher (component/launcher_v2.go) runs in a fresh directory standing for the pod's
  filesystem: it downloads input artifacts from the object store to their local paths
  (LocalPathForURI: /minio/..., /s3/..., /gcs/...), creates the output paths' parents,
  substitutes `{{$}}` and the `{{$.inputs/outputs...}}` placeholders (compileCmdAndArgs), runs
  the container's command and args as a subprocess, reads the ExecutorOutput, merges each
  output's `uri` (when non-empty) and `metadata` into the provisioned artifact
  (mergeRuntimeArtifacts), uploads the output local paths and records the artifacts with the
  type named by their schema title (SchemaToArtifactType) and a default `display_name`;
- importer tasks (component/importer_launcher.go) record the constant artifact URI;
- pipeline parameters as the root DAG's driver resolves them: `run(spec, parameters=...)`, the
  root input definitions' `defaultValue` for the others, typed (an undeclared name or a wrong
  type fails the run), reaching tasks through `componentInputParameter`;
- a task's `retryPolicy` as Argo's retryStrategy runs it: a failed attempt gets a new pod with
  the same ExecutorInput after `backoffDuration` x `backoffFactor`^(n-1), up to
  `maxRetryCount` times and not after `backoffMaxDuration` since the first attempt
  (`fail_first` kills a task's next pods, to exercise it on a compiled spec).

The object store is a directory (`<workdir>/object-store/<minio|s3|gcs>/<bucket>/<key>`) with
the Go object store's semantics (objectstore/object_store.go): an upload writes one object per
file (no directory objects, so an empty directory uploads nothing), a download writes every
object under the key's prefix. MLMD is an in-memory record of the run's artifacts.

Where a task's container runs is a pluggable "pod" (`pods`, a PodFactory: one fresh Pod per
task). The default, HostPods, differs from a cluster on purpose, for CI: the container runs in
this machine's environment (its `python` is the interpreter running this package, i.e. the
project's venv, and the working directory is the checkout, as the image's WORKDIR holds the
project), and the launcher's local paths are rebased under the task's directory, which the
command learns from $RANKPIPE_KFP_LOCAL_ROOT (pipelines/kfp_entrypoint.py honours it). A pod
with `rebased = False` runs the spec's command and arguments unchanged in a file system of its
own where the launcher's paths are the real ones (tests/image/buildah_pods.py: the built image,
`make image-test`). The run stops at the first failed task (after its retries); container
resources are not enforced and the platform spec (the YAML's second document: node selectors,
tolerations, secrets) is not applied. Written by hand because no tool runs a TFX
spec this way: kfp 2.5's `kfp.local` runs single components only, and later versions' pipeline
support needs a protobuf 4 stack and rewrites TFX artifacts as `dsl.Artifact`s.

Not shipped: this is a test double, kept in the test tree (outside the packages deploy/Dockerfile
copies) and imported as `kfp_local` with tests/ on sys.path (pytest puts it there for
tests/conftest.py; tests/benchmarks/bench_kfp.py and tests/image insert it). One module per part
of the backend it stands for:
- records.py: what a run returns (RunResult, TaskResult, Artifact as recorded in MLMD);
- spec.py: reading and checking a compiled spec (the API server and the Argo compiler), the DAG
  order, and MLMD's value and type conversions;
- pods.py: where a task's container runs (the Pod protocol, HostPod);
- driver.py: the driver (inputs, provisioned outputs) and its cache;
- launcher.py: the launcher (object store, placeholders, the command, outputs);
- backend.py: LocalKfpBackend, running the DAG as Argo does, importer tasks, MLMD records.
"""

from kfp_local.backend import LocalKfpBackend
from kfp_local.pods import HostPod, Pod, PodFactory, mount_namespaces_work
from kfp_local.records import (
    DEFAULT_PIPELINE_ROOT,
    LOGS_KEY,
    REPO_ROOT,
    Artifact,
    BackendError,
    RunResult,
    TaskResult,
)
from kfp_local.spec import check_executors, load_spec, task_order, task_producers

__all__ = [
    "DEFAULT_PIPELINE_ROOT",
    "LOGS_KEY",
    "REPO_ROOT",
    "Artifact",
    "BackendError",
    "HostPod",
    "LocalKfpBackend",
    "Pod",
    "PodFactory",
    "RunResult",
    "TaskResult",
    "check_executors",
    "load_spec",
    "mount_namespaces_work",
    "task_order",
    "task_producers",
]
