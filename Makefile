# Set-up and everyday commands. Each target installs what it needs into $(VENV), idempotently.
#   make run                 # one multi-step GRPO run on the embedded default (CPU, no downloads)
#   make test                # the test-suite (SLURM tests run when a cluster is up: see slurm/)
#   make run ARGS="-m sweeps=demo"   # any rlvr-train arguments
VENV ?= .venv
PYTHON ?= python3
PY := $(VENV)/bin/python
# torch is installed first and pinned: an unpinned torch resolves to a multi-GB CUDA build on CPU
# machines. Extra pip arguments for it (e.g. a CPU wheel index) go in TORCH_PIP_ARGS.
TORCH_PIP_ARGS ?=
ARGS ?=

.PHONY: install run test lint bench clean

$(VENV)/.installed: pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --disable-pip-version-check --upgrade pip
	$(PY) -m pip install -q torch==2.13.0 $(TORCH_PIP_ARGS)
	$(PY) -m pip install -q -e ".[dev]"
	touch $@

install: $(VENV)/.installed

run: install
	$(VENV)/bin/rlvr-train $(ARGS)

test: install
	$(PY) -m pytest -q $(ARGS)

lint: install
	$(VENV)/bin/ruff check rlvr_scaling analysis tests benchmarks hydra_plugins
	$(VENV)/bin/ruff format --check rlvr_scaling analysis tests benchmarks hydra_plugins

bench: install
	$(PY) benchmarks/cycle.py

clean:
	rm -rf $(VENV) .pytest_cache
