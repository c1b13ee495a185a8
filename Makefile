# The two commands of the README. Both set everything up first (scripts/setup.sh is a no-op
# when .venv already matches requirements.lock).
.PHONY: setup demo test lint lock bench

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

bench: setup
	.venv/bin/python tests/benchmarks/bench_metrics.py
