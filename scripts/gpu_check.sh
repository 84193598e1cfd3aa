#!/usr/bin/env bash
# The GPU check (<= 10 minutes on one H100/H200-class GPU): one real model preset end to end with vLLM
# colocated (benchmarks/gpu_real_model.py), reporting generation throughput, weight-push time and memory.
#
#   scripts/gpu_check.sh [preset] [out dir]        # default: qwen2.5_1.5b, $OUT or ./gpu_check
#
# Needs a Python with the project, torch (CUDA build) and vllm importable: $PYTHON, else .venv-gpu,
# else .venv, else python3. A GPU machine without network runs the preset's architecture with random
# weights unless the model is in the Hugging Face cache or under $RLVR_MODEL_DIR (see the benchmark).
set -euo pipefail
cd "$(dirname "$0")/.."
PRESET=${1:-qwen2.5_1.5b}
OUT_DIR=${2:-${OUT:-gpu_check}}
mkdir -p "$OUT_DIR"
PY=${PYTHON:-}
for candidate in .venv-gpu/bin/python .venv/bin/python python3; do
  [ -n "$PY" ] && break
  if command -v "$candidate" >/dev/null 2>&1; then PY=$candidate; fi
done
export HF_HUB_OFFLINE=${HF_HUB_OFFLINE:-1} WANDB_MODE=disabled PYTHONUNBUFFERED=1
{
  echo "== $(date -u +%FT%TZ) preset=$PRESET python=$PY"
  nvidia-smi --query-gpu=name,memory.total,memory.used,driver_version --format=csv || true
  "$PY" - <<'PY'
import importlib.util, sys
import torch
print(f"torch {torch.__version__}, cuda {torch.version.cuda}, device {torch.cuda.get_device_name() if torch.cuda.is_available() else None}")
missing = [m for m in ("vllm", "transformers", "rlvr_scaling") if importlib.util.find_spec(m) is None]
if missing or not torch.cuda.is_available():
    sys.exit(f"gpu_check: not ready (missing: {missing or 'none'}, cuda: {torch.cuda.is_available()})")
import vllm
print(f"vllm {vllm.__version__}")
PY
} 2>&1 | tee "$OUT_DIR/environment.txt"
timeout 560 "$PY" benchmarks/gpu_real_model.py --preset "$PRESET" --out "$OUT_DIR/gpu_check.json" \
  2>&1 | tee "$OUT_DIR/gpu_check.log"
nvidia-smi > "$OUT_DIR/nvidia-smi-after.txt" 2>&1 || true
