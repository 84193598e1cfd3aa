#!/usr/bin/env bash
# The GPU check (<= 8 minutes on one H100/H200-class GPU, one try): on an offline node that has a CUDA
# torch and transformers, install the project's small pure-Python dependencies from the wheel folder
# `make gpu-wheels` builds (into a temporary directory on PYTHONPATH: the node's packages are not
# touched), then run benchmarks/gpu/gpu_check.py: random-initialised Qwen2.5-0.5B and -1.5B shapes, a short
# multi-step GRPO cycle in bf16 with fp32 master weights through our trainer (HF engine; vLLM colocated
# where importable) and through TRL's GRPOTrainer, reported as JSON after every part.
#
#   make gpu-wheels                       # where pip works: ./gpu_wheels (~3 MiB), carried to the node
#   scripts/gpu_check.sh                  # on the node: report in $OUT or ./gpu_check
#   scripts/gpu_check.sh --cpu-smoke      # the same path on a CPU with a tiny shape (CI, <= 2 minutes)
#
# Options: --out DIR, --wheels DIR (default ./gpu_wheels). PYTHON: the interpreter that holds torch
# (default python3). The project runs from this checkout (on PYTHONPATH, where its conf/ is found).
set -euo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd)
PY=${PYTHON:-python3}
OUT_DIR=${OUT:-gpu_check}
WHEELS=$REPO/gpu_wheels
SMOKE=()
while [ $# -gt 0 ]; do
  case $1 in
    --cpu-smoke) SMOKE=(--cpu-smoke) ;;
    --out) OUT_DIR=$2; shift ;;
    --wheels) WHEELS=$2; shift ;;
    *) echo "usage: scripts/gpu_check.sh [--cpu-smoke] [--out DIR] [--wheels DIR]" >&2; exit 2 ;;
  esac
  shift
done
mkdir -p "$OUT_DIR"
OUT_DIR=$(cd "$OUT_DIR" && pwd)
export HF_HUB_OFFLINE=1 WANDB_MODE=disabled PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false
versions() {
  "$PY" -c 'import torch, transformers; print(torch.__version__, torch.__file__, transformers.__version__, transformers.__file__)'
}
before=$(versions)
if [ -f "$WHEELS/requirements.txt" ]; then
  SITE=$(mktemp -d "${TMPDIR:-/tmp}/rlvr-gpu-site.XXXXXX")
  # --no-deps --no-index: exactly the pinned wheels of the folder, nothing resolved, nothing fetched
  "$PY" -m pip install -q --no-deps --no-index --no-compile --disable-pip-version-check \
    --find-links "$WHEELS" --target "$SITE" -r "$WHEELS/requirements.txt"
  export PYTHONPATH="$SITE:$REPO${PYTHONPATH:+:$PYTHONPATH}"
  echo "gpu_check: installed $(wc -l < "$WHEELS/requirements.txt") pinned wheels into $SITE"
else
  echo "gpu_check: no wheel folder at $WHEELS (make gpu-wheels): using the packages installed here" >&2
  export PYTHONPATH="$REPO${PYTHONPATH:+:$PYTHONPATH}"
fi
after=$(versions)
if [ "$before" != "$after" ]; then
  echo "gpu_check: torch/transformers changed ($before -> $after); refusing to go on" >&2
  exit 1
fi
echo "gpu_check: torch/transformers as found: $after"
cd "$REPO"
status=0
# the script keeps its own budget (470 s; smoke 110 s) and writes the report after every part
timeout 500 "$PY" benchmarks/gpu/gpu_check.py run "${SMOKE[@]}" --out "$OUT_DIR/gpu_check.json" 2>&1 \
  | tee "$OUT_DIR/gpu_check.log" || status=$?
echo "gpu_check: report $OUT_DIR/gpu_check.json (exit $status)"
exit "$status"
