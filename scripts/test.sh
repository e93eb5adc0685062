#!/usr/bin/env bash
# Installs what is missing (the test tools too), builds everything, and runs
# the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh --test
# The Python environment (.venv) of the tests labelled `clients` (ptrain next to
# transformers, PEFT and TRL), of those labelled `docs` (the docs' commands run
# with its Python) and of the other tests' helper scripts;
# PTRAIN_CLIENT_TESTS=OFF leaves out the environment and both labels.
ctest_args=()
if [ "${PTRAIN_CLIENT_TESTS:-ON}" != OFF ]; then
  scripts/python-env.sh
else
  ctest_args+=(--label-exclude 'clients|docs')
fi
build_dir="${PTRAIN_BUILD_DIR:-build}"
# A build dir that scripts/quickstart.sh made has the tests and benchmarks off.
if grep -qsiE '^PTRAIN_BUILD_(TESTS|BENCH):[A-Z]*=(OFF|0|NO|FALSE|N)$' "$build_dir/CMakeCache.txt"; then
  cmake -S . -B "$build_dir" -DPTRAIN_BUILD_TESTS=ON -DPTRAIN_BUILD_BENCH=ON
fi
scripts/build.sh
ctest --test-dir "$build_dir" --output-on-failure -j "${PTRAIN_JOBS:-$(nproc)}" --timeout 900 "${ctest_args[@]}"
