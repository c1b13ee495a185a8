"""Typed configuration of the Trainer's replicas: `runner.kubeflow.trainer_replicas`.

Beside its owner; pipelines/config.py composes it into KubeflowConfig and pipelines/pipeline.py
picks the Trainer component from it when `rankpipe compile` builds the spec.
"""

from __future__ import annotations

from dataclasses import dataclass

from rankcore import config_loader

BACKENDS = ("tfjob", "vertex")


@dataclass
class TrainerReplicasConfig:
    # Processes that train the model together (MultiWorkerMirroredStrategy over the TF_CONFIG
    # each replica gets; trainer.batch_size stays the global batch). 1: the Trainer trains in
    # its own pod. Kubeflow / Vertex only: `rankpipe run` always trains in one process.
    count: int = 1
    # Who starts the replicas: tfjob (the Trainer's pod creates a Kubeflow Training Operator
    # TFJob, kubeflow.org/v1, Chief + Worker, and waits for it; open-source KFP) or vertex
    # (TFX's Vertex AI Trainer extension: a CustomJob with one worker pool per replica type).
    backend: str = "tfjob"
    # tfjob: each replica's CPU limit (and request), Kubernetes style, e.g. "8".
    cpu_limit: str | None = None
    # tfjob: each replica's memory limit (and request), e.g. "32G".
    memory_limit: str | None = None
    # tfjob: a Kubernetes resource name ("nvidia.com/gpu"); vertex: e.g. "NVIDIA_TESLA_T4".
    accelerator_type: str | None = None
    accelerator_count: int = 0  # per replica (1 when only the type is set)
    # tfjob: where the replicas share the inputs, checkpoints and outputs: a gs:// URI (or a
    # path every replica's pod mounts at the same place). Required with backend tfjob: the
    # launcher's copies of the inputs live in the Trainer's pod only.
    staging_dir: str | None = None
    # tfjob: the namespace of the TFJob; None: the Trainer pod's own.
    namespace: str | None = None
    # tfjob: the service account of the replicas' pods; None: the namespace's default.
    service_account: str | None = None
    # tfjob: restarts of failed replicas before the job fails (runPolicy.backoffLimit); a
    # replica restarts from the last checkpoint (restartPolicy OnFailure).
    backoff_limit: int = 3
    # tfjob: seconds the job may run before it is stopped (runPolicy.activeDeadlineSeconds);
    # 0: no limit.
    active_deadline_seconds: int = 0
    # vertex: the Google Cloud project of the CustomJob.
    vertex_project: str | None = None
    # vertex: the Google Cloud region the CustomJob runs in (its Vertex AI endpoint), e.g.
    # europe-west4.
    vertex_region: str = "us-central1"
    # vertex: each replica's machine (machine_spec.machine_type).
    vertex_machine_type: str = "n1-standard-8"

    def __post_init__(self) -> None:
        config_loader.one_of("backend", self.backend, BACKENDS)
        if self.count < 1:
            raise ValueError(f"count: must be >= 1, got {self.count}")
        if self.accelerator_count < 0:
            raise ValueError(f"accelerator_count: must be >= 0, got {self.accelerator_count}")
        if self.accelerator_count and not self.accelerator_type:
            raise ValueError("accelerator_count: set accelerator_type too")
        if self.backoff_limit < 0 or self.active_deadline_seconds < 0:
            raise ValueError("backoff_limit and active_deadline_seconds must be >= 0")
        if self.count > 1 and self.backend == "tfjob" and not self.staging_dir:
            raise ValueError(
                "staging_dir: required with backend tfjob and count > 1 (a gs:// URI every "
                "replica can read and write)"
            )
        if self.count > 1 and self.backend == "vertex" and not self.vertex_project:
            raise ValueError("vertex_project: required with backend vertex and count > 1")

    @property
    def enabled(self) -> bool:
        """Whether the Trainer runs as replicas (count > 1)."""
        return self.count > 1
