#!/usr/bin/env bash
# Builds ptrain with CUDA (NCCL, the GPU code paths) against the LibTorch of a
# PyTorch installation, into build-gpu/ (or $PTRAIN_BUILD_DIR), with ninja:
# every target, tests included. It needs a C++17 compiler, CMake, ninja, nvcc
# and a CUDA build of PyTorch; the C++ libraries a GPU machine lacks come as
# Debian packages in .gpu-deps/ (scripts/gpu-deps.sh, run where apt works),
# unpacked under the build directory. No GPU is needed to build.
#
#   scripts/build-gpu.sh [ARGS...]          ARGS go to `cmake --build` (e.g. --target ptrain)
#   scripts/build-gpu.sh --print-library-path   the LD_LIBRARY_PATH the executables need
#   scripts/build-gpu.sh --print-python         the Python whose PyTorch the build uses
#
# Environment: PYTHON (the Python with PyTorch; default: .venv/bin/python,
# else python3 on the PATH, whichever imports torch), PTRAIN_JOBS (all
# cores), PTRAIN_CUDA_ARCH (default: the visible GPU's, else 9.0 for
# H100/H200), PTRAIN_PYTHON_REWARDS (ON/OFF; default ON where that Python
# has its headers and shared library, OFF with a message otherwise).
# docs/devices.md#building-for-a-gpu describes the build.
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir="${PTRAIN_BUILD_DIR:-build-gpu}"
deps="$PWD/$build_dir/deps"
deps_lib="$deps/usr/lib/x86_64-linux-gnu"
library_path="$deps_lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

say() { echo "build-gpu: $*" >&2; }
fail() { say "$*"; exit 1; }

torch_python() {
  local candidate
  for candidate in ${PYTHON:-.venv/bin/python python3}; do
    if "$candidate" -c 'import torch' 2>/dev/null; then
      realpath -s "$(command -v "$candidate")"
      return
    fi
  done
  fail "no Python with PyTorch: tried ${PYTHON:-.venv/bin/python and python3 on the PATH}; set PYTHON"
}

case "${1:-}" in
  --print-library-path) echo "$library_path"; exit 0 ;;
  --print-python) torch_python; exit 0 ;;
esac
python="$(torch_python)"

# The tools first: one message naming everything that is missing.
export PATH="$PATH:/usr/local/cuda/bin"
missing=()
for tool in "${CXX:-g++}" cmake ninja nvcc; do
  command -v "$tool" >/dev/null || missing+=("$tool")
done
[ ${#missing[@]} -eq 0 ] || fail "missing tools: ${missing[*]} (nvcc: the CUDA toolkit, in /usr/local/cuda or on the PATH)"

read -r torch_dir torch_version cuda_version cxx11_abi capability < <("$python" - <<'PY'
import os, torch
cap = torch.cuda.get_device_capability() if torch.cuda.is_available() else (9, 0)
print(os.path.dirname(torch.__file__), torch.__version__, torch.version.cuda,
      int(torch.compiled_with_cxx11_abi()), f"{cap[0]}.{cap[1]}")
PY
) || fail "$python cannot import torch"
[ "$cuda_version" != "None" ] || fail "$python's torch $torch_version is built without CUDA"
# Debian's libraries (Boost's std::string API) are built with the C++11 ABI.
[ "$cxx11_abi" = 1 ] || fail "torch $torch_version uses the pre-C++11 std::string ABI; Debian's libraries need the C++11 one"

# .gpu-deps/*.deb unpacked into $deps, again whenever the set of packages changes.
unpack_gpu_deps() {
  local manifest
  manifest="$deps $(stat -c '%n %s' .gpu-deps/*.deb)"
  if [ "$(cat "$deps/.unpacked" 2>/dev/null)" = "$manifest" ]; then return; fi
  command -v dpkg-deb >/dev/null || fail "dpkg-deb is missing: it unpacks .gpu-deps/*.deb"
  rm -rf "$deps" && mkdir -p "$deps"
  for deb in .gpu-deps/*.deb; do dpkg-deb -x "$deb" "$deps"; done
  # pkg-config files name their install prefix (/usr): point them at the
  # unpacked tree, where CMake's pkg-config search (CMAKE_PREFIX_PATH) finds them.
  sed -i "s|^prefix=/usr\$|prefix=$deps/usr|" "$deps"/usr/lib/x86_64-linux-gnu/pkgconfig/*.pc "$deps"/usr/share/pkgconfig/*.pc 2>/dev/null || true
  echo "$manifest" >"$deps/.unpacked"
}
# The torch package directory first: its lib/ holds libtorch.so, which CMake
# must find before any system LibTorch (Debian's libtorch-dev in /usr/lib).
prefixes="$torch_dir"
include_dirs=() cmake_args=()
if compgen -G ".gpu-deps/*.deb" >/dev/null; then
  unpack_gpu_deps
  prefixes="$prefixes;$deps/usr"
  # Multiarch headers (OpenSSL's configuration.h) lie in include/x86_64-linux-gnu,
  # which the compiler searches last for /usr only: this tree gets the same place.
  multiarch_include="$deps/usr/include/x86_64-linux-gnu"
  include_dirs=(-I"$deps/usr/include" -isystem "$multiarch_include")
  cmake_args+=(-DCMAKE_CXX_STANDARD_INCLUDE_DIRECTORIES="$multiarch_include")
else
  say "no .gpu-deps/ (scripts/gpu-deps.sh): using the system's C++ libraries"
fi
export LD_LIBRARY_PATH="$library_path"

# Every header and library the build needs, checked at once before CMake
# runs, each named with the Debian package scripts/gpu-deps.sh downloads.
has_header() {
  printf '#include <%s>\n' "$1" | "${CXX:-g++}" -std=c++17 -x c++ -E - -o /dev/null -DPCRE2_CODE_UNIT_WIDTH=8 "${include_dirs[@]}" 2>/dev/null
}
has_library() {
  echo 'int main() {}' | "${CXX:-g++}" -x c++ - -o /dev/null -L"$deps_lib" -l"$1" 2>/dev/null
}
check_libraries() {
  local missing=() entry header library package
  for entry in boost/program_options.hpp:boost_program_options:libboost-program-options1.74-dev \
    boost/filesystem.hpp:boost_filesystem:libboost-filesystem1.74-dev toml++/toml.h::libtomlplusplus-dev \
    spdlog/spdlog.h:spdlog:libspdlog-dev fmt/core.h:fmt:libfmt-dev nlohmann/json.hpp::nlohmann-json3-dev \
    zlib.h:z:zlib1g-dev openssl/evp.h:crypto:libssl-dev pcre2.h:pcre2-8:libpcre2-dev \
    utf8proc.h:utf8proc:libutf8proc-dev gloo/algorithm.h::libgloo-dev; do
    IFS=: read -r header library package <<<"$entry"
    has_header "$header" || missing+=("$header ($package)")
    [ -z "$library" ] || has_library "$library" || missing+=("lib$library.so ($package)")
  done
  has_header catch2/catch.hpp || has_header catch2/catch_all.hpp || missing+=("Catch2's headers (catch2)")
  if ! command -v pkg-config >/dev/null; then
    if [ -x "$deps/usr/bin/pkgconf" ]; then
      cmake_args+=(-DPKG_CONFIG_EXECUTABLE="$deps/usr/bin/pkgconf")
    else
      missing+=("pkg-config (pkgconf, pkgconf-bin, libpkgconf3)")
    fi
  fi
  if [ ${#missing[@]} -gt 0 ]; then
    say "missing C++ dependencies:"
    printf '  %s\n' "${missing[@]}" >&2
    fail "run scripts/gpu-deps.sh where apt works and carry .gpu-deps/, or install those packages"
  fi
}
check_libraries

# Python rewards embed the interpreter: they need that Python's headers and
# shared library, and pybind11 (PyTorch ships it in its include directory).
python_rewards_args() {
  local include library reason
  read -r include library < <("$python" - <<'PY'
import os, sysconfig
include = sysconfig.get_paths()["include"]
libdir, ldlibrary = sysconfig.get_config_var("LIBDIR"), sysconfig.get_config_var("LDLIBRARY")
library = os.path.join(libdir or "", ldlibrary or "")
print(include if os.path.isfile(os.path.join(include, "Python.h")) else "-",
      library if ldlibrary and ldlibrary.endswith(".so") and os.path.isfile(library) else "-")
PY
  )
  if [ "${PTRAIN_PYTHON_REWARDS:-ON}" = OFF ]; then
    reason="PTRAIN_PYTHON_REWARDS=OFF"
  elif [ "$include" = - ]; then
    reason="$python has no Python.h (its -dev package)"
  elif [ "$library" = - ]; then
    reason="$python has no shared libpython"
  else
    echo "-DPTRAIN_PYTHON_REWARDS=ON -DPython3_INCLUDE_DIR=$include -DPython3_LIBRARY=$library"
    return
  fi
  say "Python rewards off: $reason; a python: reward spec is then a config error naming the option"
  echo "-DPTRAIN_PYTHON_REWARDS=OFF"
}

echo "build-gpu: torch $torch_version ($torch_dir), CUDA $cuda_version, compute capability ${PTRAIN_CUDA_ARCH:-$capability}"
if [ ! -f "$build_dir/CMakeCache.txt" ]; then
  # The tests' Python (PTRAIN_PYTHON) is the one with this torch: on a GPU
  # machine without the checkout's .venv, that machine's.
  # shellcheck disable=SC2046  # python_rewards_args prints separate arguments
  cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$prefixes" \
    -DOPENSSL_ROOT_DIR="$deps/usr" -DTORCH_CUDA_ARCH_LIST="${PTRAIN_CUDA_ARCH:-$capability}" \
    -DPTRAIN_WITH_CUDA=ON -DPTRAIN_ONEDNN=OFF -DPTRAIN_TENSORBOARD=OFF -DPTRAIN_REPORT=OFF \
    -DPTRAIN_PYTHON="$python" "${cmake_args[@]}" $(python_rewards_args)
fi
# Relative paths under the checkout let clones in other directories (CI) hit the cache.
export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$PWD}" CCACHE_NOHASHDIR="${CCACHE_NOHASHDIR:-true}"
cmake --build "$build_dir" -j "${PTRAIN_JOBS:-$(nproc)}" "$@"
