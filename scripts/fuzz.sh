#!/usr/bin/env bash
# Builds the libFuzzer targets (fuzz/) with clang in build-fuzz/ and runs each
# for PTRAIN_FUZZ_SECONDS (default 20) from its seed corpus in fuzz/corpus/.
# New inputs go to build-fuzz/corpus/<target>, crashes to build-fuzz/crashes/.
# Exits non-zero when a target finds a crash, leak, sanitizer report or an
# uncaught exception (a rejection of the wrong kind).
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir="${PTRAIN_FUZZ_BUILD_DIR:-build-fuzz}"
seconds="${PTRAIN_FUZZ_SECONDS:-20}"
targets=(safetensors jsonl config tokenizer)

if [ ! -f "$build_dir/CMakeCache.txt" ]; then
  mkdir -p "$build_dir"
  CC=clang CXX=clang++ cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPTRAIN_FUZZ=ON \
    -DPTRAIN_BUILD_TESTS=OFF -DPTRAIN_BUILD_BENCH=OFF -DPTRAIN_USE_PCH=OFF > "$build_dir/configure.log"
fi
export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$PWD}" CCACHE_NOHASHDIR="${CCACHE_NOHASHDIR:-true}"
cmake --build "$build_dir" -j "${PTRAIN_JOBS:-$(nproc)}" --target "${targets[@]/#/fuzz_}"

mkdir -p "$build_dir/crashes"
status=0
for target in "${targets[@]}"; do
  mkdir -p "$build_dir/corpus/$target"
  echo "[fuzz] $target: ${seconds}s"
  # rss_limit: a reader allocating what a header merely claims is a finding too.
  if ! "$build_dir/bin/fuzz_$target" -max_total_time="$seconds" -rss_limit_mb=2048 -timeout=10 \
      -artifact_prefix="$build_dir/crashes/$target-" -print_final_stats=1 \
      "$build_dir/corpus/$target" "fuzz/corpus/$target" > "$build_dir/fuzz_$target.log" 2>&1; then
    echo "[fuzz] $target FAILED; the input is in $build_dir/crashes/, the report in $build_dir/fuzz_$target.log:"
    grep -E "ERROR|SUMMARY|terminate|what\(\)" "$build_dir/fuzz_$target.log" | head -20 || true
    status=1
  else
    grep -E "stat::number_of_executed_units|cov:" "$build_dir/fuzz_$target.log" | tail -2 | sed "s/^/[fuzz] $target: /"
  fi
done
exit $status
