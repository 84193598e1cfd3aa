# Set-up and everyday commands. Each target installs what it needs into $(VENV), idempotently.
#   make run                 # one multi-step GRPO run on the embedded default (CPU, no downloads)
#   make test                # the test-suite (SLURM tests run when a cluster is up: see slurm/)
#   make test-oldest         # a subset on the oldest torch/transformers pyproject.toml claims (own venv)
#   make run ARGS="-m sweeps=demo"   # any rlvr-train arguments
VENV ?= .venv
PYTHON ?= python3
PY := $(VENV)/bin/python
# Exact tested versions come from constraints.txt (pyproject.toml declares compatible ranges). torch is
# installed first: on a machine without a CUDA GPU give it a CPU wheel index in TORCH_PIP_ARGS (PyPI's
# torch wheels are multi-GB CUDA builds).
TORCH_PIP_ARGS ?=
ARGS ?=
# The oldest torch/transformers that pyproject.toml claims, tested on CPU in their own venv. PyPI's
# torch 2.11.0 is a CUDA build: it imports and runs on a CPU only with its nvidia libraries installed
# (~4.7 GB venv, ~80 s to install here); `make clean` removes it.
VENV_OLDEST ?= .venv-oldest
OLDEST ?= torch==2.11.0 transformers==5.17.0 numpy==2.0.2
# What depends on torch/transformers: the shipped model loads and scores, trainer invariants (KV-cache
# and packed forwards), exact resume, per-sample gradients, FSDP2 over 2 processes, schemas compose.
OLDEST_TESTS ?= tests/core/test_embedded_asset.py tests/core/test_resume.py tests/core/test_trainer.py \
	tests/algorithms/test_per_sample.py tests/distributed/test_shares_and_keys.py \
	"tests/distributed/test_data_parallel.py::test_two_processes_equal_one[fsdp]" \
	tests/core/test_configs.py::test_every_option_composes tests/core/test_configs.py::test_bad_values_name_the_key

.PHONY: install run test test-oldest lint bench clean

$(VENV)/.installed: pyproject.toml constraints.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --disable-pip-version-check --upgrade pip
	$(PY) -m pip install -q -c constraints.txt torch $(TORCH_PIP_ARGS)
	$(PY) -m pip install -q -c constraints.txt -e ".[dev]"
	touch $@

install: $(VENV)/.installed

# constraints.txt with the oldest claimed versions in place of the tested ones (huggingface_hub left
# to the resolver: transformers 5.17 needs < 2.0)
$(VENV_OLDEST)/.installed: pyproject.toml constraints.txt
	test -x $(VENV_OLDEST)/bin/python || $(PYTHON) -m venv $(VENV_OLDEST)
	grep -vE '^(torch|transformers|numpy|huggingface_hub)==' constraints.txt > $(VENV_OLDEST)/constraints.txt
	printf '%s\n' $(OLDEST) >> $(VENV_OLDEST)/constraints.txt
	$(VENV_OLDEST)/bin/python -m pip install -q --disable-pip-version-check -c $(VENV_OLDEST)/constraints.txt \
		torch -e ".[dev]"
	touch $@

run: install
	$(VENV)/bin/rlvr-train $(ARGS)

test: install
	$(PY) -m pytest -q $(ARGS)

test-oldest: $(VENV_OLDEST)/.installed
	$(VENV_OLDEST)/bin/python -m pytest -q -p no:cacheprovider $(OLDEST_TESTS) $(ARGS)

lint: install
	$(VENV)/bin/ruff check rlvr_scaling analysis tests benchmarks hydra_plugins
	$(VENV)/bin/ruff format --check rlvr_scaling analysis tests benchmarks hydra_plugins

bench: install
	$(PY) benchmarks/cycle.py

clean:
	rm -rf $(VENV) $(VENV_OLDEST) .pytest_cache
