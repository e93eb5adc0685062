#!/usr/bin/env bash
# Installs what building and running ptrain needs (not the test tools), builds
# ptrain and the SFT plugin, and runs the bundled SFT job (configs/sft.toml)
# into runs/sft.
set -euo pipefail
cd "$(dirname "$0")/.."
start=$SECONDS
step() { echo "[quickstart] $* ($((SECONDS - start)) s so far)"; }
step "1/4 installing the Debian packages that are missing (scripts/install-deps.sh)"
scripts/install-deps.sh
# A build dir made here leaves out the tests (they need Catch2) and the
# benchmarks; scripts/test.sh turns both on, `PTRAIN_BUILD_BENCH=ON
# scripts/build.sh` the benchmarks alone. An existing build dir is kept as it is.
step "2/4 configuring and building ptrain and the SFT plugin ([N/M]: files compiled of those to compile)"
PTRAIN_CMAKE_ARGS="-DPTRAIN_BUILD_TESTS=OFF -DPTRAIN_BUILD_BENCH=OFF ${PTRAIN_CMAKE_ARGS:-}" \
  scripts/build.sh --target ptrain ptrain_plugin_sft
build_dir="${PTRAIN_BUILD_DIR:-build}"
step "3/4 validating configs/sft.toml"
"$build_dir/bin/ptrain" validate -c configs/sft.toml
step "4/4 training (configs/sft.toml, 300 steps, into runs/sft)"
exec "$build_dir/bin/ptrain" train -c configs/sft.toml --overwrite "$@"
