#!/usr/bin/env bash
# The validators' GPU checks and fault hooks on one real GPU, end to end, in at most 8 minutes
# (benchmarks/gpu_device_check.py says what runs). Needs nvidia-smi, nvcc, PyTorch with CUDA and the
# NCCL wheel; no network (nccl-tests' source from NCCL_TESTS_SRC or .clusterforge/cache/).
#
#   benchmarks/gpu_device_check.sh [--dry-run] [--out DIR]     PYTHON=... to pick the interpreter
#
# --dry-run: the same steps on the CPU path (the tests run it). Prints one summary line last;
# exit 0 only when every required step passed.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(dirname "$here")"
python="${PYTHON:-}"
if [ -z "$python" ]; then
  if [ -x "$root/.venv/bin/python" ]; then python="$root/.venv/bin/python"; else python="python3"; fi
fi
# 8 minutes in all: the script's own steps are bounded well inside it; this is the last resort.
exec timeout --kill-after=10 480 "$python" "$here/gpu_device_check.py" --python "$python" "$@"
