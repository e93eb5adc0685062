#!/usr/bin/env bash
# Issue 23's proof on a GPU machine, in phases that each fit one 10-minute
# device command; every phase writes its log and results under $OUT (or ./gpu-proof).
#
#   scripts/gpu-proof.sh build    scripts/build-gpu.sh (carry .gpu-deps from scripts/gpu-deps.sh)
#   scripts/gpu-proof.sh test     the ctest suite but the clients label; runtime.device = "auto" resolves to CUDA
#   scripts/gpu-proof.sh bench    bench/gpu_suite.py → bench/results_gpu.json
#   scripts/gpu-proof.sh parity   bench/hf_parity.py (the clients checks on CUDA) → bench/results_hf_parity.json
#
# Several phases in one call run in order ("build test"); a failing phase is
# recorded in $OUT/status.txt and the next one still runs.
set -uo pipefail
cd "$(dirname "$0")/.."
out="${OUT:-$PWD/gpu-proof}"
mkdir -p "$out"
# That machine's Python has PyTorch, transformers and PEFT (no .venv: nothing
# outside the machine is reachable there).
export PTRAIN_BUILD_DIR=build-gpu PTRAIN_PYTHON="${PYTHON:-python3}"
export LD_LIBRARY_PATH="$(scripts/build-gpu.sh --print-library-path)"

phase() {
  case "$1" in
    build) scripts/build-gpu.sh ;;
    # The tests labelled clients need the checkout's .venv; the parity phase runs their checks.
    test) ctest --test-dir build-gpu -j "${PTRAIN_TEST_JOBS:-8}" --timeout 600 --output-on-failure \
      --label-exclude clients ;;
    bench) (cd bench && "$PTRAIN_PYTHON" gpu_suite.py) && cp bench/results_gpu.json "$out/" ;;
    # TRL is not installed there; its checks take no device and run in CI (ctest -L clients).
    parity) "$PTRAIN_PYTHON" bench/hf_parity.py --device cuda --skip 'trl_*' &&
      cp bench/results_hf_parity.json "$out/" ;;
    *) echo "gpu-proof: unknown phase '$1' (build, test, bench, parity)" >&2; return 2 ;;
  esac
}

for name in "$@"; do
  start=$(date +%s)
  phase "$name" >"$out/$name.log" 2>&1
  status=$?
  echo "$name: exit $status in $(($(date +%s) - start)) s" | tee -a "$out/status.txt"
  tail -n 25 "$out/$name.log"
done
nvidia-smi >"$out/nvidia-smi.txt" 2>&1 || true
