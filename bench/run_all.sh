#!/usr/bin/env bash
# The benchmark suite of issue 8 in one command: builds what it needs, runs
# every figure next to its baseline and prints the table (also written to
# bench/out/table.txt and bench/results.json). About 10 minutes on 2 cores.
#
#   bench/run_all.sh                  # build/ and 2 threads per process
#   PTRAIN_BUILD_DIR=build-rel PTRAIN_BENCH_THREADS=4 bench/run_all.sh
set -euo pipefail
cd "$(dirname "$0")/.."
start_s=$SECONDS

# The suite and the PyTorch-eager baseline run in the project's Python
# environment (PyPI's PyTorch; docs/performance.md says why that baseline is fair).
scripts/python-env.sh
python="${PTRAIN_PYTHON:-$PWD/.venv/bin/python}"

# Only the targets the suite runs (plugins are loaded by `ptrain train`).
# PTRAIN_BUILD_BENCH=ON reconfigures an existing build directory, so that it
# has the bench targets even where scripts/quickstart.sh left them out.
build_dir="${PTRAIN_BUILD_DIR:-build}"
PTRAIN_BUILD_DIR="$build_dir" PTRAIN_BUILD_BENCH=ON scripts/build.sh --target ptrain \
  ptrain_plugin_sft ptrain_plugin_dpo ptrain_plugin_grpo \
  bench_matmul_peak bench_log_prob_memory bench_grpo_step bench_accumulation

status=0
PTRAIN_PYTHON="$python" "$python" bench/suite.py || status=$?
echo "[bench] run_all.sh took $(( (SECONDS - start_s) / 60 )) min $(( (SECONDS - start_s) % 60 )) s"
exit $status
