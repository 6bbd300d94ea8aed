# The two commands of the README: `make demo` and `make test`. Each builds .venv on first use.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
# Pinned first: on a CPU-only machine this resolves to the local CPU wheel; an open range
# would pull several GB of CUDA packages. The package's own `torch>=2.4` then installs nothing.
TORCH_PIN ?= torch==2.13.0
STAMP := $(VENV)/.installed

.PHONY: demo test test-slow lint typecheck docs clean

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet "$(TORCH_PIN)"
	$(PY) -m pip install --quiet -e ".[dev]"
	touch $(STAMP)

demo: $(STAMP)
	$(PY) -m torchpace demo

test: $(STAMP)
	$(PY) -m ruff check src tests examples benchmarks
	$(PY) -m ruff format --check src tests examples benchmarks
	$(PY) -m mypy
	$(PY) -m pytest

test-slow: $(STAMP)
	$(PY) -m pytest -m slow

docs: $(STAMP)
	$(PY) -m torchpace techniques --write-docs docs/techniques.md

clean:
	rm -rf $(VENV) build dist src/*.egg-info .pytest_cache .mypy_cache .ruff_cache
