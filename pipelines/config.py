"""The typed pipeline config: one dataclass per section of the YAML files in pipelines/configs/.

`load_config(path, overrides)` reads a YAML file, applies `--set key=value` overrides, checks
every key and type, expands `${VAR}` in paths, and checks that input files exist, all before any
component runs (the checks across sections and of the input files: pipelines/config_checks.py).
Every field is documented in docs/config-reference.md (from the fields' comments).

Each section's dataclass lives beside its owner: collection and datagen in
components/ranking_datagen/config.py, evaluator and pusher in their component packages, trainer
in trainer_module/config.py. This module keeps the runner (Beam, Kubeflow) config and composes
the others into PipelineConfig.
"""

from __future__ import annotations

import dataclasses
import difflib
import os
from dataclasses import dataclass, field
from pathlib import Path

from components.ranking_datagen.config import CollectionConfig, DatagenConfig
from components.ranking_evaluator.config import EvaluatorConfig
from components.ranking_pusher.config import PusherConfig
from components.trainer_replicas.config import TrainerReplicasConfig
from pipelines.cpus import available_cpus
from rankcore import config_loader
from rankcore.config_loader import ConfigError
from trainer_module import pretrained
from trainer_module.config import TrainerConfig
from trainer_module.tuning_config import TunerConfig

REPO_ROOT = Path(__file__).resolve().parent.parent
CONFIG_DIR = Path(__file__).resolve().parent / "configs"
# What ${RANKPIPE_MINILM} and ${RANKPIPE_MPNET} expand to when the `pretrained` extra is not
# installed; a config that needs one then fails before any component runs, naming `make
# pretrained`.


def path_defaults() -> dict[str, str]:
    """Fallbacks for ${VAR} in config paths when the environment does not set them."""
    return {
        "RANKPIPE_SHARED_DATA": str(REPO_ROOT.parent / "shared" / "data"),
        "RANKPIPE_OUTPUTS": str(REPO_ROOT / "outputs"),
        # The `pretrained` extra's checkpoints (`make pretrained`; trainer_module/pretrained.py).
        **pretrained.path_defaults(),
    }


PATH_DEFAULTS = path_defaults()


# TFX's BaseBeamExecutor, unless the Beam args carry one of these flags, copies the whole TFX
# installation (48 MB) into a new /tmp directory and builds an sdist of it for Beam to stage to
# remote workers, for every Beam component of every run (about 1.5 s each; the copies are never
# removed: tfx/utils/dependency_utils.py make_beam_dependency_flags). The DirectRunner stages
# nothing (its workers are processes of this machine, their environment follows
# direct_running_mode), so on it `pipeline_args` names the SDK container image, which the
# DirectRunner does not read: TFX then builds nothing. Other runners are left to TFX.
TFX_DEPENDENCY_FLAGS = (
    "extra_packages",
    "extra_package",
    "setup_file",
    "requirements_file",
    "worker_harness_container_image",
    "sdk_container_image",
)
DIRECT_RUNNER_NO_STAGING = "--sdk_container_image=unused-by-the-direct-runner"
DIRECT_RUNNERS = ("DirectRunner", "direct", "BundleBasedDirectRunner", "SwitchingDirectRunner")


def _flag_value(args: list[str], name: str) -> str | None:
    """The last value of `--name=value` or `--name value` in args (None when absent)."""
    value = None
    for i, arg in enumerate(args):
        if arg.startswith(f"--{name}="):
            value = arg.split("=", 1)[1]
        elif arg == f"--{name}":
            value = args[i + 1] if i + 1 < len(args) else ""
    return value


def skips_tfx_staging(args: list[str]) -> bool:
    """Whether `DIRECT_RUNNER_NO_STAGING` belongs in these Beam args: the DirectRunner (no
    --runner, or a DirectRunner) and no dependency flag of the user's."""
    runner = _flag_value(args, "runner")
    if runner is not None and runner not in DIRECT_RUNNERS:
        return False
    return all(_flag_value(args, name) is None for name in TFX_DEPENDENCY_FLAGS)


@dataclass
class BeamConfig:
    # DirectRunner mode: in_memory, multi_threading or multi_processing (a component whose input
    # is under 16 MB runs multi_processing in_memory; $RANKPIPE_IN_PROCESS_BELOW_MB=0: never).
    direct_running_mode: str = "multi_processing"
    # DirectRunner workers; 0 = one per CPU this process may use: the cgroup CPU quota (a pod's
    # CPU limit) when set, else the CPU affinity (pipelines/cpus.py), resolved where it runs.
    direct_num_workers: int = 0
    # Extra Beam pipeline args, e.g. ["--runner=DataflowRunner", "--project=..."].
    extra_args: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        config_loader.one_of(
            "direct_running_mode",
            self.direct_running_mode,
            ("in_memory", "multi_threading", "multi_processing"),
        )

    def pipeline_args(self, resolve_workers: bool = True) -> list[str]:
        """Beam args. 0 workers becomes available_cpus() here (the cgroup CPU quota, not the
        machine's core count Beam itself would take). resolve_workers=False keeps 0: a compiled
        Kubeflow spec must not carry the compiling machine's count; the executors' entrypoint
        resolves it in the pod (pipelines/kfp_entrypoint.py resolve_beam_workers). On the
        DirectRunner they end with DIRECT_RUNNER_NO_STAGING (see there)."""
        workers = self.direct_num_workers or (available_cpus() if resolve_workers else 0)
        if self.direct_running_mode == "in_memory":
            workers = 1  # in_memory runs one worker whatever is asked; say so to Beam
        args = [
            f"--direct_running_mode={self.direct_running_mode}",
            f"--direct_num_workers={workers}",
            *self.extra_args,
        ]
        return [*args, DIRECT_RUNNER_NO_STAGING] if skips_tfx_staging(args) else args


# The pipeline's component ids, the keys of runner.kubeflow.components: the ids of the rows of
# pipelines/component_table.py, the one list of them.
from pipelines.component_table import COMPONENT_IDS  # noqa: E402


@dataclass
class TolerationConfig:
    """A Kubernetes toleration of the component's pod (its fields, as `kubectl explain
    pod.spec.tolerations` names them)."""

    key: str = ""  # the taint's key; empty with operator Exists: every taint
    operator: str = "Equal"  # Equal or Exists
    value: str = ""  # the taint's value (Equal only)
    effect: str = ""  # NoSchedule, PreferNoSchedule, NoExecute; empty: every effect
    toleration_seconds: int | None = None  # NoExecute only: how long the pod stays bound

    def __post_init__(self) -> None:
        if self.operator not in ("Equal", "Exists"):
            raise ValueError(f"operator: {self.operator!r}: one of Equal, Exists")
        if self.operator == "Exists" and self.value:
            raise ValueError("value: must be empty with operator Exists")
        if self.effect not in ("", "NoSchedule", "PreferNoSchedule", "NoExecute"):
            raise ValueError(
                f"effect: {self.effect!r}: one of NoSchedule, PreferNoSchedule, NoExecute"
            )
        if self.toleration_seconds is not None and self.effect != "NoExecute":
            raise ValueError("toleration_seconds: only with effect NoExecute")


@dataclass
class KubeflowComponentConfig:
    """One component's container on Kubeflow Pipelines / Vertex AI. A field left at its default
    takes runner.kubeflow.defaults' value (and unset there too: the cluster's default)."""

    # Name shown in the KFP UI graph; None: the built-in one ("Train reranker", ...).
    display_name: str | None = None
    # What the scheduler reserves for the pod (Kubernetes requests; Vertex AI ignores them).
    cpu_request: str | None = None  # CPU cores, Kubernetes style: "4", "0.5", "500m"
    memory_request: str | None = None  # e.g. "16G", "512Mi" (K, M, G, T, with or without i)
    # What the pod may use at most (Kubernetes limits; Vertex AI picks its machine from them).
    cpu_limit: str | None = None  # CPU cores, as cpu_request; Beam's workers follow it
    memory_limit: str | None = None  # as memory_request; beyond it the pod is OOM-killed
    # KFP: a Kubernetes resource name, e.g. "nvidia.com/gpu"; Vertex: e.g. "NVIDIA_TESLA_T4".
    accelerator_type: str | None = None
    accelerator_count: int = 0  # accelerators of accelerator_type (1 when only the type is set)
    # Retries of a failed task (the spec's retryPolicy; Argo's retryStrategy on KFP). Every
    # component is safe to retry: each resumes from its checkpoints or rewrites whole outputs.
    retries: int = 0
    retry_backoff: str = "30s"  # wait before the first retry ("30s", "2m", "1h")
    retry_backoff_factor: float = 2.0  # each further wait is this many times the last
    # No retry starts once this long has passed since the first attempt began (at most 1h).
    retry_backoff_max: str = "3600s"
    # Pod placement (KFP only, the kfp-kubernetes platform spec): node labels the node must
    # carry, e.g. {cloud.google.com/gke-accelerator: nvidia-tesla-t4}.
    node_selector: dict[str, str] = field(default_factory=dict)
    # Taints the pod tolerates, e.g. a GPU node pool's [{key: nvidia.com/gpu, operator:
    # Exists, effect: NoSchedule}].
    # (Each: key, operator Equal or Exists, value, effect, toleration_seconds.)
    tolerations: list[TolerationConfig] = field(default_factory=list)
    # Kubernetes secrets mounted as files: secret name -> mount path, e.g. {gcs-key:
    # /secrets/gcs}; with env GOOGLE_APPLICATION_CREDENTIALS=/secrets/gcs/key.json the pod
    # reads gs:// with that service-account key instead of the node's identity.
    secret_volumes: dict[str, str] = field(default_factory=dict)
    # Environment variables from secrets: VARIABLE -> "secret-name/key" (KFP only).
    secret_env: dict[str, str] = field(default_factory=dict)
    # Plain environment variables of the container: VARIABLE -> value.
    env: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # The parsers of the kfp SDK (what PipelineTask.set_cpu_limit etc. accept), so a
        # value here means what it means in a kfp pipeline.
        from kfp.dsl.pipeline_task import PipelineTask
        from kfp.dsl.structures import convert_duration_to_seconds

        parsed = {}
        for key, parse in (
            ("cpu_request", PipelineTask._validate_cpu_request_limit),
            ("cpu_limit", PipelineTask._validate_cpu_request_limit),
            ("memory_request", PipelineTask._validate_memory_request_limit),
            ("memory_limit", PipelineTask._validate_memory_request_limit),
        ):
            value = getattr(self, key)
            if value is not None:
                try:
                    parsed[key] = parse(None, value)
                except ValueError as e:
                    raise ValueError(f"{key}: {value!r}: {e}") from None
        for what in ("cpu", "memory"):
            request, limit = parsed.get(f"{what}_request"), parsed.get(f"{what}_limit")
            if request is not None and limit is not None and request > limit:
                raise ValueError(
                    f"{what}_request: {getattr(self, what + '_request')!r} is more than "
                    f"{what}_limit {getattr(self, what + '_limit')!r}"
                )
        if self.accelerator_count < 0:
            raise ValueError(f"accelerator_count: must be >= 0, got {self.accelerator_count}")
        if self.accelerator_count and not self.accelerator_type:
            raise ValueError("accelerator_count: set accelerator_type too")
        if self.retries < 0:
            raise ValueError(f"retries: must be >= 0, got {self.retries}")
        for key in ("retry_backoff", "retry_backoff_max"):
            value = getattr(self, key)
            try:
                convert_duration_to_seconds(value)
            except (ValueError, IndexError):
                raise ValueError(
                    f"{key}: {value!r}: a duration such as '30s', '5m', '1h'"
                ) from None
        if self.retry_backoff_factor < 1:
            raise ValueError(f"retry_backoff_factor: must be >= 1, got {self.retry_backoff_factor}")
        for variable, ref in self.secret_env.items():
            secret, _, key = ref.partition("/")
            if not secret or not key:
                raise ValueError(f"secret_env.{variable}: {ref!r}: write 'secret-name/key'")
        for name, path in self.secret_volumes.items():
            if not path.startswith("/"):
                raise ValueError(f"secret_volumes.{name}: {path!r}: an absolute mount path")

    def merged_over(self, defaults: KubeflowComponentConfig) -> KubeflowComponentConfig:
        """This component's settings, each field left at its default taken from `defaults`."""
        values = {}
        for f in dataclasses.fields(self):
            own = getattr(self, f.name)
            unset = f.default_factory() if f.default is dataclasses.MISSING else f.default
            values[f.name] = getattr(defaults, f.name) if own == unset else own
        return KubeflowComponentConfig(**values)


@dataclass
class KubeflowConfig:
    """What `rankpipe compile` writes into the Kubeflow / Vertex pipeline spec."""

    # Settings of every component (resources, retries, placement, secrets) unless
    # components.<id> sets the field itself.
    defaults: KubeflowComponentConfig = field(default_factory=KubeflowComponentConfig)
    # Per component id (CorpusEncoder, RankingDataGen, StatisticsGen, ImportSchemaGen,
    # ExampleValidator, ExampleGate, Trainer, RankingEvaluator, Pusher): display name and what
    # defaults has.
    # Trainer's settings hold for each cross-validation fold's Trainer too, all running at once.
    components: dict[str, KubeflowComponentConfig] = field(default_factory=dict)
    # Write display names ("Train reranker", ...) as the tasks' taskInfo.name. Off by default:
    # KFP 2.0 to 2.5 (Kubeflow 1.8 to 1.10) record each execution under taskInfo.name and look
    # producers up by task key (backend/src/v2/driver/driver.go: Container sets ecfg.TaskName
    # from taskInfo.name, resolveUpstreamArtifacts reads tasks[producerTask] from
    # metadata/client.go GetExecutionsInDAG), so every task with an input fails with "cannot
    # find producer task". true: KFP >= 2.14 (the task key travels as --task_name,
    # kubeflow/pipelines#11938 and kubeflow/pipelines#12061) or Vertex AI.
    display_names: bool = False
    # The Trainer as N replicas (a TFJob on open-source KFP, worker pools on Vertex AI), each
    # running TFX's Trainer executor under TF_CONFIG (docs/kubeflow.md, "Trainer replicas").
    trainer_replicas: TrainerReplicasConfig = field(default_factory=TrainerReplicasConfig)

    def __post_init__(self) -> None:
        if self.defaults.display_name is not None:
            raise ValueError(
                "defaults.display_name: display names are per component; set "
                "components.<id>.display_name"
            )
        named = sorted(k for k, c in self.components.items() if c.display_name is not None)
        if named and not self.display_names:
            raise ValueError(
                f"components.{named[0]}.display_name is set but display_names is false (the "
                "default, which KFP 2.0 to 2.5 need); set display_names: true (KFP >= 2.14, "
                "Vertex AI) or remove the display_name"
            )
        for name in self.components:
            if name not in COMPONENT_IDS:
                close = difflib.get_close_matches(name, COMPONENT_IDS, n=1)
                hint = f" (did you mean {close[0]!r}?)" if close else ""
                raise ValueError(
                    f"components.{name}: no such component{hint}; one of "
                    + ", ".join(COMPONENT_IDS)
                )


@dataclass
class RunnerConfig:
    pipeline_name: str = "rankpipe"  # also names the default pipeline root and push base
    # Local runs keep artifacts and the SQLite MLMD store under this root. Kubeflow: an
    # object-store URI (gs://, s3://, minio://), the spec's defaultPipelineRoot, which only the
    # KFP UI's run form reads: `rankpipe submit` sends it with the run (docs/kubeflow.md).
    pipeline_root: str = "${RANKPIPE_OUTPUTS}/pipelines/${RANKPIPE_PIPELINE_NAME}"
    enable_cache: bool = True  # reuse a component's outputs when its inputs are unchanged
    beam: BeamConfig = field(default_factory=BeamConfig)
    # Kubeflow: container image holding this project (deploy/). Without a tag or digest,
    # `rankpipe compile` appends the source tag `make image` builds (src-<hash of what the
    # image holds>, pipelines/image_tag.py); name a registry, e.g. REGISTRY/rankpipe.
    image: str = "rankpipe"
    kubeflow: KubeflowConfig = field(default_factory=KubeflowConfig)

    @property
    def metadata_path(self) -> str:
        return os.path.join(self.pipeline_root, "metadata.sqlite")


@dataclass
class PipelineConfig:
    collection: CollectionConfig  # (required section)
    datagen: DatagenConfig = field(default_factory=DatagenConfig)
    trainer: TrainerConfig = field(default_factory=TrainerConfig)
    # The Tuner (docs/trainer.md "Tuner"): trainer keys tried on the dev queries before the
    # Trainer trains the best; max_trials 0 (the default): no Tuner.
    tuner: TunerConfig = field(default_factory=TunerConfig)
    evaluator: EvaluatorConfig = field(default_factory=EvaluatorConfig)
    pusher: PusherConfig = field(default_factory=PusherConfig)
    runner: RunnerConfig = field(default_factory=RunnerConfig)
    # Where this config came from (set by load_config; not a YAML key).
    source: str = field(default="<memory>", repr=False, compare=False)


def resolve_config_path(name: str) -> Path:
    """Accepts a path or a bare name of a file in pipelines/configs/ (`demo`, `cranfield.yaml`)."""
    path = Path(name)
    if path.exists():
        return path
    for candidate in (CONFIG_DIR / name, CONFIG_DIR / f"{name}.yaml"):
        if candidate.exists():
            return candidate
    raise ConfigError(f"{name}: no such config file (looked in . and {CONFIG_DIR})")


def load_config(
    path: str | Path, overrides: list[str] | None = None, check_inputs: bool = True
) -> PipelineConfig:
    """Loads, overrides, type-checks and path-checks a pipeline config.

    Every problem found in a stage is reported at once (one ConfigError, a line each): the
    --set keys, the keys and types of all sections, then the checks across sections and the
    input paths, then the first records of the collection files and the qrels' grades (which
    read files, so only once the paths are right)."""
    path = resolve_config_path(str(path))
    source = str(path)
    data = config_loader.load_yaml(path)
    problems: list[str] = []
    overridden: list[str] = []
    for text in overrides or []:
        try:
            key, value = config_loader.parse_override(text)
            config_loader.check_key(PipelineConfig, key)  # a typo names the --set, not the file
            config_loader.apply_override(data, key, value)
        except ConfigError as e:
            problems.extend(e.problems)
        else:
            overridden.append(key)
    if "collection" not in data:
        problems.append(f"{source}: missing section 'collection'")
        # Placeholder paths, so that the other sections' problems are found in this round too.
        data["collection"] = dict.fromkeys(("documents", "queries", "qrels"), "-")
    try:
        config = config_loader.build(PipelineConfig, data, source, overrides=overridden)
    except ConfigError as e:
        problems.extend(e.problems)
    if problems:
        raise ConfigError(problems)
    config.source = source
    # Imported here: pipelines/config_checks.py imports this module's path constants.
    from pipelines import config_checks

    checks: list = [
        config_checks.check_cross_validation,
        config_checks.check_companion_weights,
        config_checks.check_training_lists,
        config_checks.check_corpus_case,
        config_checks.expand_paths,
        config_checks.check_tuner,
    ]
    if check_inputs:
        checks += [
            config_checks.check_input_paths,
            config_checks.check_tuner_paths,
            config_checks.check_worker_paths,
        ]
    for check in checks:
        try:
            check(config)
        except ConfigError as e:
            problems.extend(e.problems)
            if check is config_checks.expand_paths:
                break  # the paths checked next would be the unexpanded ones
    if problems:
        raise ConfigError(problems)
    if check_inputs:
        config_checks.check_input_contents(config)
        config_checks.check_positive_threshold(config)
    return config
