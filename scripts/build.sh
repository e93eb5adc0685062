#!/usr/bin/env bash
# Configures and builds ptrain into build/ (or $PTRAIN_BUILD_DIR), using ccache.
# Extra arguments are passed to `cmake --build` (e.g. --target ptrain).
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir="${PTRAIN_BUILD_DIR:-build}"
jobs="${PTRAIN_JOBS:-$(nproc)}"
if [ ! -f "$build_dir/CMakeCache.txt" ]; then
  cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo ${PTRAIN_CMAKE_ARGS:-}
fi
# Relative paths under the checkout let clones in other directories (CI) hit the cache.
export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$PWD}" CCACHE_NOHASHDIR="${CCACHE_NOHASHDIR:-true}"
cmake --build "$build_dir" -j "$jobs" "$@"
