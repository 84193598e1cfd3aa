# Set-up and everyday commands. Each target installs what it needs into $(VENV), idempotently.
#   make run                 # one multi-step GRPO run on the embedded default (CPU, no downloads)
#   make test                # the test-suite (SLURM tests run when a cluster is up: see slurm/)
#   make run ARGS="-m sweeps=demo"   # any rlvr-train arguments
#   make gpu-wheels          # the wheel folder scripts/gpu_check.sh installs on an offline GPU node
VENV ?= .venv
PYTHON ?= python3
PY := $(VENV)/bin/python
# torch is installed first and pinned: an unpinned torch resolves to a multi-GB CUDA build on CPU
# machines. Extra pip arguments for it (e.g. a CPU wheel index) go in TORCH_PIP_ARGS.
TORCH_PIP_ARGS ?=
ARGS ?=

# The GPU check's wheel folder (scripts/gpu_check.sh): the project's small pure-Python dependencies that
# a CUDA node with torch and transformers lacks, and TRL for the side-by-side cycle; never torch,
# transformers or nvidia packages. Wheels for this Python and for $(GPU_PYTHON) (the node's).
GPU_WHEELS ?= gpu_wheels
GPU_PYTHON ?= 3.12
GPU_PINS = hydra-core==1.3.8 omegaconf==2.3.1 antlr4-python3-runtime==4.9.3 submitit==1.5.4 \
	hydra-submitit-launcher==1.2.0 hydra-joblib-launcher==1.2.0 math-verify==0.9.0 latex2sympy2_extended==1.11.0 \
	trl==1.16.0 accelerate==1.15.0 datasets==4.7.0 dill==0.4.0 multiprocess==0.70.18

.PHONY: install run test lint bench clean gpu-wheels

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

gpu-wheels: install
	rm -rf $(GPU_WHEELS) && mkdir -p $(GPU_WHEELS)
	$(PY) -m pip wheel -q --no-deps --wheel-dir $(GPU_WHEELS) $(GPU_PINS)
	$(PY) -m pip download -q --no-deps --only-binary=:all: --python-version $(GPU_PYTHON) \
		--dest $(GPU_WHEELS) multiprocess==0.70.18
	printf '%s\n' $(GPU_PINS) > $(GPU_WHEELS)/requirements.txt
	@size=$$(du -sm $(GPU_WHEELS) | cut -f1); echo "$(GPU_WHEELS): $$size MiB"; test $$size -le 64

clean:
	rm -rf $(VENV) .pytest_cache
