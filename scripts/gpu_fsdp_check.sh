#!/usr/bin/env bash
# The data-parallel GPU check (<= 10 minutes): one real model preset as an FSDP2 run on every GPU of
# this machine (torchrun, one process per GPU), reporting per-rank peak memory and throughput.
#
#   scripts/gpu_fsdp_check.sh [preset] [out dir]        # default: qwen2.5_1.5b, $OUT or ./gpu_fsdp_check
#
# Needs a Python with the project and a CUDA build of torch: $PYTHON, else .venv-gpu, else .venv,
# else python3. Without network a preset's architecture runs with random weights (see the benchmark).
set -euo pipefail
cd "$(dirname "$0")/.."
PRESET=${1:-qwen2.5_1.5b}
OUT_DIR=${2:-${OUT:-gpu_fsdp_check}}
mkdir -p "$OUT_DIR"
PY=${PYTHON:-}
for candidate in .venv-gpu/bin/python .venv/bin/python python3; do
  [ -n "$PY" ] && break
  if command -v "$candidate" >/dev/null 2>&1; then PY=$candidate; fi
done
GPUS=$(nvidia-smi -L 2>/dev/null | wc -l)
[ "$GPUS" -ge 1 ] || { echo "gpu_fsdp_check: no GPU (nvidia-smi -L lists none)"; exit 1; }
export HF_HUB_OFFLINE=${HF_HUB_OFFLINE:-1} WANDB_MODE=disabled PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,memory.total,memory.used --format=csv | tee "$OUT_DIR/environment.txt" || true
timeout 560 "$PY" -m torch.distributed.run --standalone --nproc_per_node="$GPUS" benchmarks/gpu/gpu_fsdp.py \
  --preset "$PRESET" --work "$OUT_DIR/work" --out "$OUT_DIR/gpu_fsdp.json" 2>&1 | tee "$OUT_DIR/gpu_fsdp.log"
rm -rf "$OUT_DIR/work"
