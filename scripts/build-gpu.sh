#!/usr/bin/env bash
# Builds ptrain with CUDA (NCCL, the GPU code paths) against the LibTorch of
# the machine's PyTorch, into build-gpu/ (or $PTRAIN_BUILD_DIR), with ninja.
# For a GPU machine with PyTorch, CMake, ninja and nvcc: the C++ libraries it
# lacks come as Debian packages in .gpu-deps/ (scripts/gpu-deps.sh, run where
# apt works), unpacked here under the build directory.
#
#   scripts/build-gpu.sh [--target T ...]     extra arguments go to `cmake --build`
#
# Environment: PYTHON (python3), PTRAIN_JOBS (all cores), PTRAIN_CUDA_ARCH
# (the visible GPU's, e.g. 9.0 for H100/H200). Afterwards, for the tests and
# the executable: export LD_LIBRARY_PATH="$(scripts/build-gpu.sh --print-library-path)".
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir="${PTRAIN_BUILD_DIR:-build-gpu}"
python="${PYTHON:-python3}"
deps="$PWD/$build_dir/deps"
library_path="$deps/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
if [ "${1:-}" = "--print-library-path" ]; then
  echo "$library_path"
  exit 0
fi

fail() { echo "build-gpu: $*" >&2; exit 1; }
read -r torch_prefix torch_version cuda_version cxx11_abi capability < <("$python" - <<'PY'
import torch
cap = torch.cuda.get_device_capability() if torch.cuda.is_available() else (9, 0)
print(torch.utils.cmake_prefix_path, torch.__version__, torch.version.cuda,
      int(torch.compiled_with_cxx11_abi()), f"{cap[0]}.{cap[1]}")
PY
) || fail "$python cannot import torch"
[ "$cuda_version" != "None" ] || fail "$python's torch $torch_version is built without CUDA"
# Debian's libraries (Boost's std::string API) are built with the C++11 ABI.
[ "$cxx11_abi" = 1 ] || fail "torch $torch_version uses the pre-C++11 std::string ABI; Debian's libraries need the C++11 one"

prefixes="$torch_prefix"
if compgen -G ".gpu-deps/*.deb" >/dev/null; then
  if [ ! -f "$deps/.unpacked" ]; then
    rm -rf "$deps" && mkdir -p "$deps"
    for deb in .gpu-deps/*.deb; do dpkg-deb -x "$deb" "$deps"; done
    touch "$deps/.unpacked"
  fi
  prefixes="$prefixes;$deps/usr"
else
  echo "build-gpu: no .gpu-deps/ (scripts/gpu-deps.sh): using the system's C++ libraries" >&2
fi
export LD_LIBRARY_PATH="$library_path"

echo "build-gpu: torch $torch_version, CUDA $cuda_version, compute capability ${PTRAIN_CUDA_ARCH:-$capability}"
if [ ! -f "$build_dir/CMakeCache.txt" ]; then
  # The tests' Python (PTRAIN_PYTHON) is the one with this torch: on a GPU
  # machine without the checkout's .venv, that machine's.
  cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$prefixes" \
    -DOPENSSL_ROOT_DIR="$deps/usr" -DTORCH_CUDA_ARCH_LIST="${PTRAIN_CUDA_ARCH:-$capability}" \
    -DPTRAIN_WITH_CUDA=ON -DPTRAIN_ONEDNN=OFF -DPTRAIN_TENSORBOARD=OFF -DPTRAIN_REPORT=OFF \
    -DPTRAIN_PYTHON="$("$python" -c 'import sys; print(sys.executable)')"
fi
cmake --build "$build_dir" -j "${PTRAIN_JOBS:-$(nproc)}" "$@"
