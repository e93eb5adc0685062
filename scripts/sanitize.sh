#!/usr/bin/env bash
# Builds the unit and bad-input tests with AddressSanitizer + UndefinedBehaviorSanitizer
# (PTRAIN_SANITIZE=ON) in build-asan/ and runs them. Any report fails the run.
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir="${PTRAIN_ASAN_BUILD_DIR:-build-asan}"
if [ ! -f "$build_dir/CMakeCache.txt" ]; then
  mkdir -p "$build_dir"
  cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPTRAIN_SANITIZE=ON -DPTRAIN_BUILD_BENCH=OFF \
    > "$build_dir/configure.log"
fi
export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$PWD}" CCACHE_NOHASHDIR="${CCACHE_NOHASHDIR:-true}"
cmake --build "$build_dir" -j "${PTRAIN_JOBS:-$(nproc)}" --target ptrain_unit_tests ptrain_bad_input_tests
# LibTorch and its OpenMP runtime are not built with ASan: their allocations at
# exit are not ours, so leak detection is off; every other check stays on.
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=0:abort_on_error=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
"$build_dir/bin/ptrain_unit_tests"
"$build_dir/bin/ptrain_bad_input_tests"
