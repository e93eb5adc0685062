#!/usr/bin/env bash
# Configures and builds ptrain into build/ (or $PTRAIN_BUILD_DIR), using ccache.
# Extra arguments are passed to `cmake --build` (e.g. --target ptrain).
# Environment: PTRAIN_JOBS, PTRAIN_CMAKE_ARGS (first configure), PTRAIN_BUILD_TESTS, PTRAIN_BUILD_BENCH,
# PTRAIN_TENSORBOARD, PTRAIN_REPORT, PTRAIN_PYTHON_REWARDS.
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir="${PTRAIN_BUILD_DIR:-build}"
jobs="${PTRAIN_JOBS:-$(nproc)}"
# These variables in the environment (ON or OFF) set the CMake options of the same names, also in an
# existing build directory (e.g. PTRAIN_BUILD_BENCH=ON where scripts/quickstart.sh left the benchmarks out).
options=()
for option in PTRAIN_BUILD_TESTS PTRAIN_BUILD_BENCH PTRAIN_TENSORBOARD PTRAIN_REPORT PTRAIN_PYTHON_REWARDS; do
  if [ -n "${!option:-}" ]; then options+=("-D$option=${!option}"); fi
done
# A new build dir uses Ninja where it is installed (install-deps.sh installs it):
# it prints "[N/M]" for each file it compiles, so a long cold build shows how far it is.
generator=()
if [ ! -f "$build_dir/CMakeCache.txt" ] && command -v ninja >/dev/null; then generator=(-G Ninja); fi
if [ ! -f "$build_dir/CMakeCache.txt" ] || [ ${#options[@]} -gt 0 ]; then
  cmake -S . -B "$build_dir" "${generator[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo ${PTRAIN_CMAKE_ARGS:-} "${options[@]}"
fi
# Relative paths under the checkout let clones in other directories (CI) hit the cache.
export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$PWD}" CCACHE_NOHASHDIR="${CCACHE_NOHASHDIR:-true}"
cmake --build "$build_dir" -j "$jobs" "$@"
