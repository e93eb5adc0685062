#!/usr/bin/env bash
# Installs what is missing, builds ptrain and the SFT plugin, and runs the
# bundled SFT job (configs/sft.toml) into runs/sft.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh --target ptrain ptrain_plugin_sft
build_dir="${PTRAIN_BUILD_DIR:-build}"
"$build_dir/bin/ptrain" validate -c configs/sft.toml
exec "$build_dir/bin/ptrain" train -c configs/sft.toml --overwrite "$@"
