"""`make bench-gpu` (tests/benchmarks/bench_gpu.py) on a machine without a GPU, as CI is: it
says so and measures nothing (exit 2), and the parts that decide what it runs on a GPU machine:
the card's peak by name, nvidia-smi's fields, the container engine that can hand a GPU over."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parent / "benchmarks" / "bench_gpu.py"
sys.path.insert(0, str(BENCH.parent))

import bench_gpu  # noqa: E402


def test_without_a_gpu_it_says_so_and_measures_nothing(tmp_path: Path) -> None:
    # No nvidia-smi on PATH: a machine without the NVIDIA driver, as CI's.
    proc = subprocess.run(
        [sys.executable, str(BENCH), "--outputs", str(tmp_path / "runs")],
        capture_output=True,
        text=True,
        env={"PATH": str(tmp_path), "HOME": str(tmp_path)},
        timeout=300,
    )
    assert proc.returncode == bench_gpu.NO_GPU, proc.stdout + proc.stderr
    assert "no GPU on this machine: nvidia-smi not found" in proc.stdout
    assert "Nothing was measured" in proc.stdout
    assert not (tmp_path / "runs").exists()  # no pipeline ran, nothing was written


def test_peak_by_the_name_nvidia_smi_gives() -> None:
    assert bench_gpu.peak_tflops("NVIDIA H200") == 989.0
    assert bench_gpu.peak_tflops("NVIDIA H100 80GB HBM3") == 989.0
    assert bench_gpu.peak_tflops("NVIDIA H100 PCIe") == 756.0
    assert bench_gpu.peak_tflops("NVIDIA A100-SXM4-80GB") == 312.0
    assert bench_gpu.peak_tflops("NVIDIA L40S") == 362.0
    assert bench_gpu.peak_tflops("NVIDIA L4") == 121.0
    assert bench_gpu.peak_tflops("NVIDIA A10") == 125.0
    assert bench_gpu.peak_tflops("NVIDIA A10G") is None  # not A10's
    assert bench_gpu.peak_tflops("Tesla T4") is None  # no bfloat16 tensor cores


def test_nvidia_smi_fields() -> None:
    text = "NVIDIA H200, 143771 MiB, 580.159.03, 9.0\nNVIDIA L4, 23034 MiB, 550.54, 8.9\n\n"
    assert bench_gpu.parse_nvidia_smi(text) == [
        {
            "name": "NVIDIA H200",
            "memory": "143771 MiB",
            "driver": "580.159.03",
            "compute_capability": "9.0",
        },
        {
            "name": "NVIDIA L4",
            "memory": "23034 MiB",
            "driver": "550.54",
            "compute_capability": "8.9",
        },
    ]


def test_podman_gets_the_gpu_through_the_toolkits_cdi_spec(tmp_path: Path) -> None:
    tools = {"podman": "/usr/bin/podman"}
    cdi = tmp_path / "cdi"
    cdi.mkdir()
    (cdi / "other.yaml").write_text("kind: example.com/fpga\n")
    engine, why = bench_gpu.gpu_engine(tools.get, (str(cdi), str(tmp_path / "absent")))
    assert engine == [] and "nvidia-ctk cdi generate" in why  # podman, but no GPU spec
    (cdi / "nvidia.yaml").write_text("cdiVersion: 0.5.0\nkind: nvidia.com/gpu\ndevices: []\n")
    engine, why = bench_gpu.gpu_engine(tools.get, (str(cdi),))
    assert engine == [*bench_gpu.PODMAN, "run", "--rm", "--device", "nvidia.com/gpu=all"]
    assert why == ""
    engine, why = bench_gpu.gpu_engine({}.get, (str(cdi),))  # the spec, but no podman
    assert engine == [] and "NVIDIA Container Toolkit" in why


def test_summary_of_a_gpu_run() -> None:
    # bench_trainer.py's section 5 row and bench_floor.py's --json, as a GPU machine gives them.
    found = {
        "gpu": {
            "nvidia_smi": bench_gpu.parse_nvidia_smi("NVIDIA H200, 143771 MiB, 580.159.03, 9.0"),
            "tensorflow": ["/physical_device:GPU:0"],
            "why_none": "",
        },
        "image": {"ran": True, "image": "rankpipe:src-x-gpu", "gpus": ["/physical_device:GPU:0"]},
        "peak_tflops": 989.0,
        "minilm": {
            "gpu_minilm": {
                "device": "NVIDIA H200",
                "train_pairs_per_s": 5000.0,
                "model_tflops_per_s": 123.4,
                "mfu": 123.4 / 989.0,
                "peak_device_mb": 2048.0,
            }
        },
        "cranfield": {
            "wall_s": 200.0,
            "floor_s": 50.0,
            "ratio": 4.0,
            "trainer_precision": "mixed_bfloat16",
            "components": {"RankingTrainer": {"seconds": 90.0}, "CorpusEncoder": {"seconds": 20.0}},
        },
    }
    lines = bench_gpu.summary(found)
    assert "NVIDIA H200, 143771 MiB, driver 580.159.03, compute capability 9.0" in lines[2]
    assert "rankpipe:src-x-gpu: TensorFlow sees ['/physical_device:GPU:0']" in lines[3]
    assert "5000 train pairs/s, 123.4 TFLOP/s, MFU 12.5% of 989.0 TFLOP/s" in lines[4]
    assert "200 s (floor 50.0 s, 4.00x)" in lines[5] and "RankingTrainer 90 s" in lines[5]
