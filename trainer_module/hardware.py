"""tf.distribute strategy and mixed-precision policy selection."""

from __future__ import annotations

import json
import logging
import os

import tensorflow as tf
import tf_keras as keras

from trainer_module.config import TrainerConfig
from trainer_module.models.registry import bf16_pays_on_cpu


def tf_config_tasks(environ: dict[str, str] | None = None) -> int:
    """How many tasks TF_CONFIG's cluster names (0 without TF_CONFIG): the replicas a Kubeflow
    Training Operator TFJob or a Vertex AI CustomJob started this process among."""
    raw = (os.environ if environ is None else environ).get("TF_CONFIG", "")
    if not raw.strip():
        return 0
    cluster = json.loads(raw).get("cluster") or {}
    # A parameter server or evaluator is not a MultiWorkerMirroredStrategy replica.
    return sum(len(cluster.get(kind) or []) for kind in ("chief", "worker"))


def make_strategy(cfg: TrainerConfig) -> tf.distribute.Strategy:
    """auto: TPU if tpu_name is set, MultiWorkerMirrored if TF_CONFIG names more than one task
    (the Trainer runs as replicas: docs/kubeflow.md), Mirrored if > 1 GPU, else the default
    strategy.

    Call before anything else uses the TF runtime: MultiWorkerMirroredStrategy must configure
    collectives at startup (physical device listing does not start the runtime).
    """
    kind = cfg.strategy
    if kind == "auto":
        many_gpus = len(tf.config.list_physical_devices("GPU")) > 1
        if cfg.tpu_name:
            kind = "tpu"
        elif tf_config_tasks() > 1:
            kind = "multi_worker"
        else:
            kind = "mirrored" if many_gpus else "default"
    if kind == "multi_worker":
        strategy: tf.distribute.Strategy = tf.distribute.MultiWorkerMirroredStrategy()
    elif kind == "tpu":
        resolver = tf.distribute.cluster_resolver.TPUClusterResolver(
            tpu=cfg.tpu_name, zone=cfg.tpu_zone, project=cfg.tpu_project
        )
        tf.config.experimental_connect_to_cluster(resolver)
        tf.tpu.experimental.initialize_tpu_system(resolver)
        strategy = tf.distribute.TPUStrategy(resolver)
    elif kind == "mirrored":
        # Without GPUs, mirror over the (logical) CPU devices, e.g. for tests.
        devices = [d.name for d in tf.config.list_logical_devices("GPU")] or [
            d.name for d in tf.config.list_logical_devices("CPU")
        ]
        strategy = tf.distribute.MirroredStrategy(devices)
    elif kind == "cpu":
        strategy = tf.distribute.OneDeviceStrategy("/cpu:0")
    else:
        strategy = tf.distribute.get_strategy()
    logging.info("strategy %s with %d replica(s)", kind, strategy.num_replicas_in_sync)
    return strategy


# The x86 feature flags of a CPU whose oneDNN kernels multiply bfloat16 natively: AVX512_BF16
# (Cooper Lake, Zen 4 and later) and AMX (Sapphire Rapids and later). Without them bfloat16 is
# emulated and slower than float32: a 1024x1024 matmul on one thread of the development machine,
# oneDNN held to AVX512_CORE (ONEDNN_MAX_CPU_ISA), ran 22 GFLOP/s in bfloat16 against 82 in
# float32 (99 and 252 with the flags).
CPU_BF16_FLAGS = frozenset({"avx512_bf16", "amx_bf16"})
# Where the flags are read. RANKPIPE_CPUINFO names another file (the tests point it at an empty
# one, so that their figures do not depend on the host, pipelines run in subprocesses included).
CPUINFO = os.environ.get("RANKPIPE_CPUINFO") or "/proc/cpuinfo"


def cpu_flags(cpuinfo: str | None = None) -> frozenset[str]:
    """The processor's feature flags as Linux lists them in `cpuinfo` (default CPUINFO; empty
    where there is none, e.g. macOS: float32 there). Read by hand: TensorFlow 2.16 has no
    public query for them, and py-cpuinfo would be a dependency for one line of a text file."""
    try:
        with open(cpuinfo or CPUINFO, encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("flags"):
                    return frozenset(line.partition(":")[2].split())
    except OSError:
        pass
    return frozenset()


def precision_policy(cfg: TrainerConfig, strategy: tf.distribute.Strategy) -> str:
    """auto: bfloat16 on TPU, on GPUs with native bf16 (compute capability >= 8), and on CPUs
    with native bf16 (CPU_BF16_FLAGS) for the models whose registry entry says bf16 pays on a
    CPU (the pretrained transformers); else off (float32). What it gains and costs on each
    shipped config: docs/speed.md "bfloat16 on the CPU".

    float16 (explicit only) uses dynamic loss scaling in the train step.
    """
    mode = cfg.mixed_precision
    if mode == "auto":
        if isinstance(strategy, tf.distribute.TPUStrategy):
            mode = "bfloat16"
        elif gpus := tf.config.list_physical_devices("GPU"):
            caps = [
                tf.config.experimental.get_device_details(g).get("compute_capability") for g in gpus
            ]
            mode = "bfloat16" if all(c and c[0] >= 8 for c in caps) else "off"
        else:
            native = bool(cpu_flags() & CPU_BF16_FLAGS)
            mode = "bfloat16" if native and bf16_pays_on_cpu(cfg.model) else "off"
    return {"off": "float32", "float16": "mixed_float16", "bfloat16": "mixed_bfloat16"}[mode]


def set_precision_policy(policy: str) -> None:
    keras.mixed_precision.set_global_policy(policy)
