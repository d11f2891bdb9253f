#!/usr/bin/env bash
# One prepared survey run for a lent GPU (H200), <= 10 minutes: E1 incl. mode="reduce-overhead"
# (CUDA graphs), E2 on three workloads, E3 with 8 shapes. TVM arms are skipped (no TVM on the GPU
# image). Timing synchronizes the device; TF32 is pinned off (fp32 vs fp32); 1 torch thread.
#
#   bash experiments/survey/gpu_run.sh                          # on the GPU machine
#   bash experiments/survey/gpu_run.sh --device cpu --dry-run   # smoke test of the same path here
#
# Outputs go to $OUT (the device tool's output folder) or runs/survey-gpu/: e1_cuda.json,
# e2_cuda.json, e3_cuda.json, the report tables/plots and gpu_run.log.
set -uo pipefail
cd "$(dirname "$0")/../.."
DEVICE=cuda
DRY=()
while [ $# -gt 0 ]; do
  case "$1" in
    --device) DEVICE="$2"; shift 2 ;;
    --dry-run) DRY=(--dry-run); shift ;;
    *) echo "usage: $0 [--device cuda|cpu] [--dry-run]" >&2; exit 2 ;;
  esac
done
if [ -z "${PY:-}" ]; then
  if [ -x .venv/bin/python ]; then PY=.venv/bin/python; else PY=python3; fi
fi
DEST="${OUT:-runs/survey-gpu}"
if [ ${#DRY[@]} -gt 0 ]; then DEST="${OUT:-runs/survey-gpu-dry-run}"; fi
mkdir -p "$DEST"
LOG="$DEST/gpu_run.log"
export PYTHONUNBUFFERED=1
status=0
step() {  # step SECONDS NAME ARGS...: a hard time limit per experiment keeps the whole run <= 10 min
  local limit=$1 name=$2; shift 2
  echo "=== $name (limit ${limit}s) $(date +%T) load $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$LOG"
  timeout "$limit" "$PY" -m "experiments.survey.$name" --device "$DEVICE" "${DRY[@]}" --check "$@" 2>&1 \
    | grep -v -E "FutureWarning|return cls.__new__" | tee -a "$LOG"
  local rc=${PIPESTATUS[0]}
  [ "$rc" -eq 0 ] || { echo "!!! $name exited $rc" | tee -a "$LOG"; status=1; }
}
{ command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv; 
  "$PY" -c "import torch; print('torch', torch.__version__, 'cuda', torch.cuda.is_available())"; } 2>&1 | tee -a "$LOG"
step 300 e1_graph_opt --tvm none --sweep-batches 1,8,64 --out "$DEST/e1_$DEVICE.json"
step 120 e2_compile_overhead --workloads ew_chain_4M,bias_gelu_res_ln,transformer_block --repeats 1 \
  --out "$DEST/e2_$DEVICE.json"
step 120 e3_dynamic_shapes --shapes 8 --repeats 1 --tvm none --out "$DEST/e3_$DEVICE.json"
"$PY" -m experiments.survey.report --dir "$DEST" --device "$DEVICE" --no-readme 2>&1 | tee -a "$LOG"
echo "=== done $(date +%T) status $status" | tee -a "$LOG"
exit $status
