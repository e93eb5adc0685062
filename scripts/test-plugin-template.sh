#!/usr/bin/env bash
# The plugin SDK as a plugin author gets it: installs the built ptrain to a
# prefix, builds examples/plugin_template out of tree against that prefix only
# (find_package(ptrain)), runs the template's tests (ORPO closed form and the
# conformance harness, whose two-rank check runs the installed ptrain), and
# trains a few ORPO steps through the installed launcher.
# Runs under ctest as `plugin_template`; expects a complete build in
# $PTRAIN_BUILD_DIR (default build/).
set -euo pipefail
cd "$(dirname "$0")/.."
repo="$PWD"
build_dir="$(cd "${PTRAIN_BUILD_DIR:-build}" && pwd)"
jobs="${PTRAIN_JOBS:-$(nproc)}"
# Fixed paths under the build dir (not mktemp) so ccache hits on the next run.
work="$build_dir/plugin_template"
prefix="$work/prefix"
rm -rf "$work"
mkdir -p "$work"

echo "== install to $prefix"
cmake --install "$build_dir" --prefix "$prefix" > "$work/install.log"

echo "== build examples/plugin_template against the installed SDK"
launcher=()
if command -v ccache > /dev/null; then
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
  export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$repo}" CCACHE_NOHASHDIR="${CCACHE_NOHASHDIR:-true}"
fi
# The prefixes the build found its dependencies in (LibTorch outside the
# system, e.g. a PyPI torch for scripts/build-gpu.sh), after the install's.
build_prefixes="$(sed -n 's/^CMAKE_PREFIX_PATH:[A-Z]*=//p' "$build_dir/CMakeCache.txt")"
cmake -S examples/plugin_template -B "$work/build" -DCMAKE_PREFIX_PATH="$prefix${build_prefixes:+;$build_prefixes}" \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG" "${launcher[@]}" > "$work/configure.log"
cmake --build "$work/build" -j "$jobs"

echo "== the template's tests"
ctest --test-dir "$work/build" --output-on-failure

echo "== the installed ptrain finds its bundled plugins in the prefix"
ptrain="$prefix/bin/ptrain"
listed="$("$ptrain" plugins)"
echo "$listed"
for bundled in sft dpo grpo kto; do
  grep -q "$prefix/.*/ptrain/plugins/libptrain_plugin_$bundled.so" <<< "$listed" ||
    { echo "the installed ptrain does not list its bundled plugin $bundled from $prefix" >&2; exit 1; }
done

echo "== the installed ptrain loads the template plugin and trains"
"$ptrain" plugins --describe orpo --plugin-dir "$work/build"
"$ptrain" train -c examples/plugin_template/orpo.toml --plugin-dir "$work/build" \
  --set train.max_steps=3 --set schedule.warmup_steps=1 --set train.log_every=1 --set output_dir="\"$work/run\""
test -s "$work/run/final/model.safetensors"
test "$(wc -l < "$work/run/metrics.jsonl")" -eq 3
echo "plugin template: OK"
