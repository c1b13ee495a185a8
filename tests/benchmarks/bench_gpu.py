"""`make bench-gpu`: rankpipe on an NVIDIA GPU, in one go (not in CI: CI has no GPU).

On a machine without a GPU it says so and exits 2, having measured nothing: a benchmark that
measured nothing must not read as a pass. `--cpu-code-path` runs steps 3 and 4 on the CPU instead,
to check this script's code on a machine without a GPU; its figures mean nothing.

1. The GPU: nvidia-smi's name, memory, driver and compute capability, and the GPUs TensorFlow
   sees in a fresh interpreter of .venv (`make bench-gpu` first installs requirements-gpu.lock's
   CUDA wheels there, tensorflow[and-cuda]'s, when nvidia-smi finds a GPU; TensorFlow finds them
   in site-packages/nvidia at import).
2. The image's GPU variant sees the GPU: the image `make image-gpu` builds (its source tag,
   pipelines/image_tag.py --target gpu) lists TensorFlow's GPUs from inside a container that is
   given the GPU: docker with the NVIDIA Container Toolkit (`--gpus all`), or podman with the
   toolkit's CDI spec (`--device nvidia.com/gpu=all`, on the vfs storage `make image` builds
   into with buildah). `--build-image` builds the image first (long: the CUDA wheels); without
   it, or without an engine that can hand a container the GPU, the step says why it did not run.
3. MiniLM fine-tuned in mixed bfloat16 through our loop (bench_trainer.py section 5): training
   pairs/s, model TFLOP/s and MFU against the card's dense bfloat16 peak (PEAK_BF16_TFLOPS, by
   the name nvidia-smi gives, or --peak-tflops).
4. `rankpipe run cranfield` on the GPU (bench_floor.py): its wall time, each component's
   seconds, the floor from this GPU's own plain loops, and the ratio.

The summary at the end repeats each step's result; `--json` also writes it. Each step runs as
its own process (bench_trainer.py, bench_floor.py), so the GPU's memory is free between them.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO_ROOT))

from pipelines import image_tag  # noqa: E402

# Dense bfloat16 tensor-core peaks, TFLOP/s (NVIDIA's datasheets; their "with sparsity" figures
# halved). The first key found as whole words in nvidia-smi's name wins ("H100 PCIe" before
# "H100"; "A10" is not "A10G" or "A100").
PEAK_BF16_TFLOPS = (
    ("H200", 989.0),
    ("GH200", 989.0),
    ("H100 NVL", 835.0),
    ("H100 PCIe", 756.0),
    ("H100", 989.0),  # SXM
    ("A100", 312.0),
    ("L40S", 362.0),
    ("L40", 181.0),
    ("L4", 121.0),
    ("A10", 125.0),
)
PODMAN = ["podman", "--storage-driver", "vfs"]  # where deploy/build-image.sh's buildah builds
NO_GPU = 2  # the exit status when there is no GPU to measure
_TF_GPUS = (
    "import json, tensorflow as tf; "
    "print(json.dumps([d.name for d in tf.config.list_physical_devices('GPU')]))"
)


def peak_tflops(name: str) -> float | None:
    """The dense bfloat16 peak of the GPU nvidia-smi calls `name`, or None when not listed."""
    found = (peak for key, peak in PEAK_BF16_TFLOPS if re.search(rf"\b{key}\b", name))
    return next(found, None)


def parse_nvidia_smi(text: str) -> list[dict]:
    """`nvidia-smi --query-gpu=name,memory.total,driver_version,compute_cap
    --format=csv,noheader` -> one dict per GPU."""
    keys = ("name", "memory", "driver", "compute_capability")
    return [
        dict(zip(keys, (f.strip() for f in line.split(","))))
        for line in text.splitlines()
        if line.strip()
    ]


def nvidia_gpus() -> tuple[list[dict], str]:
    """(the GPUs nvidia-smi lists, why there are none)."""
    if shutil.which("nvidia-smi") is None:
        return [], "nvidia-smi not found: no NVIDIA driver on this machine"
    query = "--query-gpu=name,memory.total,driver_version,compute_cap"
    proc = subprocess.run(
        ["nvidia-smi", query, "--format=csv,noheader"], capture_output=True, text=True, check=False
    )
    if proc.returncode != 0:
        return [], f"nvidia-smi failed (exit {proc.returncode}): {proc.stderr.strip()[-300:]}"
    gpus = parse_nvidia_smi(proc.stdout)
    return gpus, "" if gpus else "nvidia-smi lists no GPU"


def tensorflow_gpus() -> tuple[list[str], str]:
    """(the GPUs TensorFlow sees in a fresh interpreter of this environment, its error)."""
    proc = subprocess.run(
        [sys.executable, "-c", _TF_GPUS], capture_output=True, text=True, check=False
    )
    if proc.returncode != 0:
        return [], proc.stderr.strip()[-500:]
    return json.loads(proc.stdout.strip().splitlines()[-1]), ""


def gpu_engine(which=shutil.which, cdi_dirs=("/etc/cdi", "/var/run/cdi")) -> tuple[list, str]:
    """(the argv prefix of a `run` that hands a container every GPU, why there is none).

    docker: `--gpus all` needs the NVIDIA Container Toolkit's hook. podman: the toolkit's CDI
    spec (`nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml`), and the vfs storage that
    deploy/build-image.sh's buildah builds into."""
    docker_ok = (
        which("docker")
        and subprocess.run(["docker", "info"], capture_output=True, check=False).returncode == 0
    )
    if docker_ok and which("nvidia-container-runtime-hook"):
        return ["docker", "run", "--rm", "--gpus", "all"], ""
    cdi = [
        p
        for d in map(Path, cdi_dirs)
        if d.is_dir()
        for p in d.iterdir()
        if "nvidia.com/gpu" in p.read_text(errors="replace")
    ]
    if which("podman") and cdi:
        return [*PODMAN, "run", "--rm", "--device", "nvidia.com/gpu=all"], ""
    return [], (
        "no container engine here can hand a container the GPU: docker with the NVIDIA "
        "Container Toolkit (nvidia-container-runtime-hook), or podman with its CDI spec "
        "(nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml)"
    )


def image_sees_gpu(build: bool) -> dict:
    """Step 2: what TensorFlow lists inside a container of the GPU image given the GPU."""
    engine, why = gpu_engine()
    if not engine:
        return {"ran": False, "why": why}
    image = f"rankpipe:{image_tag.source_tag(target='gpu')}"
    if engine[0] == "podman":  # buildah names what it builds localhost/...
        image = f"localhost/{image}"
        exists = [*PODMAN, "image", "exists", image]
    else:
        exists = ["docker", "image", "inspect", image]
    if subprocess.run(exists, capture_output=True, check=False).returncode != 0:
        if not build:
            return {
                "ran": False,
                "why": f"{image} is not built (`make image-gpu`, or --build-image)",
            }
        env = dict(os.environ, TARGET="gpu")
        subprocess.run([str(REPO_ROOT / "deploy" / "build-image.sh")], env=env, check=True)
    argv = [*engine, "--entrypoint", "python", image, "-c", _TF_GPUS]
    proc = subprocess.run(argv, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        return {"ran": True, "image": image, "gpus": [], "error": proc.stderr.strip()[-500:]}
    return {"ran": True, "image": image, "gpus": json.loads(proc.stdout.strip().splitlines()[-1])}


def bench(script: str, args: list[str], outputs: Path) -> dict:
    """Runs tests/benchmarks/SCRIPT with ARGS + --json as its own process, its output on the
    console and RANKPIPE_OUTPUTS under `outputs`; its figures."""
    figures = outputs / f"{Path(script).stem}.json"
    argv = [sys.executable, str(REPO_ROOT / "tests" / "benchmarks" / script), *args]
    env = dict(os.environ, RANKPIPE_OUTPUTS=str(outputs / "rankpipe"))
    print(f"\n$ {' '.join(argv[1:])} --json {figures}", flush=True)
    subprocess.run([*argv, "--json", str(figures)], cwd=REPO_ROOT, env=env, check=True)
    return json.loads(figures.read_text())


def summary(found: dict) -> list[str]:
    """The closing table: one line per step."""
    gpu, lines = found["gpu"], ["| step | result |", "|---|---|"]
    described = "; ".join(
        f"{g['name']}, {g['memory']}, driver {g['driver']}, compute "
        f"capability {g['compute_capability']}"
        for g in gpu["nvidia_smi"]
    )
    described = described or f"none ({gpu['why_none']})"
    lines.append(f"| 1. the GPU | {described}; TensorFlow sees {gpu['tensorflow']} |")
    image = found.get("image", {"ran": False, "why": "not reached"})
    seen = (
        f"{image.get('image')}: TensorFlow sees {image.get('gpus')}"
        if image["ran"]
        else (f"did not run: {image['why']}")
    )
    lines.append(
        f"| 2. the GPU image | {seen}{' ' + image['error'] if image.get('error') else ''} |"
    )
    row = found.get("minilm", {}).get("gpu_minilm")
    if row:
        lines.append(
            f"| 3. MiniLM, mixed bfloat16 | {row['device']}: {row['train_pairs_per_s']:.0f} "
            f"train pairs/s, {row['model_tflops_per_s']:.1f} TFLOP/s, MFU {row['mfu']:.1%} of "
            f"{found['peak_tflops']} TFLOP/s, peak device memory {row['peak_device_mb']:.0f} MB |"
        )
    run = found.get("cranfield")
    if run:
        parts = ", ".join(f"{n} {c['seconds']:.0f} s" for n, c in run["components"].items())
        lines.append(
            f"| 4. rankpipe run cranfield | {run['wall_s']:.0f} s (floor {run['floor_s']:.1f} "
            f"s, {run['ratio']:.2f}x), Trainer precision {run['trainer_precision']}: {parts} |"
        )
    return lines


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--outputs", type=Path, help="keep the runs here (default: a temp dir)")
    ap.add_argument("--json", type=Path, help="also write the summary's figures here")
    ap.add_argument("--peak-tflops", type=float, help="the GPU's dense bf16 peak, if not listed")
    ap.add_argument("--build-image", action="store_true", help="build the GPU image if missing")
    ap.add_argument(
        "--cpu-code-path", action="store_true", help="without a GPU: steps 3-4 on the CPU"
    )
    ap.add_argument("--floor-reuse", type=Path, help="step 4: measure this kept run again")
    args = ap.parse_args()
    found: dict = {}
    gpus, why = nvidia_gpus()
    seen, error = tensorflow_gpus() if gpus else ([], "")
    found["gpu"] = {"nvidia_smi": gpus, "tensorflow": seen, "why_none": why}
    if not gpus and not args.cpu_code_path:
        print(f"no GPU on this machine: {why}. Nothing was measured.")
        return NO_GPU
    if gpus and not seen:
        print(f"nvidia-smi lists {gpus}, but TensorFlow sees no GPU: {error or 'no error'}")
        print("(`make bench-gpu` installs requirements-gpu.lock's CUDA wheels into .venv.)")
        return 1
    outputs = args.outputs or Path(tempfile.mkdtemp(prefix="bench-gpu-"))
    outputs.mkdir(parents=True, exist_ok=True)
    found["image"] = image_sees_gpu(args.build_image)
    name = gpus[0]["name"] if gpus else "CPU"
    found["peak_tflops"] = args.peak_tflops or peak_tflops(name) or float("nan")
    trainer = ["--skip", "1,2,3,4,6", "--peak-tflops", str(found["peak_tflops"])]
    found["minilm"] = bench(
        "bench_trainer.py", trainer + (["--gpu-section-on-cpu"] if not gpus else []), outputs
    )
    floor = (
        ["--outputs", str(args.floor_reuse), "--reuse"]
        if args.floor_reuse
        else ["--outputs", str(outputs / "floor")]
    )
    found["cranfield"] = bench("bench_floor.py", floor, outputs)
    print("\n## rankpipe on " + name + "\n")
    print("\n".join(summary(found)))
    if args.json:
        args.json.write_text(json.dumps(found, indent=1))
    if not args.outputs:  # --outputs keeps the runs
        shutil.rmtree(outputs, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
