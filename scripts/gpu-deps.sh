#!/usr/bin/env bash
# Downloads, into .gpu-deps/ (git-ignored, about 17 MB), the Debian 12
# packages that scripts/build-gpu.sh unpacks on a GPU machine which has
# PyTorch, CMake, ninja and nvcc but neither these C++ libraries nor a
# package registry. Run it here, where apt works; .gpu-deps/ then travels
# with the checkout (the device tool's `carry`).
#
#   scripts/gpu-deps.sh
#
# Only headers, CMake packages and the shared libraries they link: gloo is
# left out on purpose (a LibTorch distribution's c10d needs its own gloo
# version; without it the GPU build is NCCL-only, see core/dist/CMakeLists.txt).
set -euo pipefail
cd "$(dirname "$0")/.."
packages=(
  libboost1.74-dev libboost-program-options1.74-dev libboost-program-options1.74.0
  libboost-filesystem1.74-dev libboost-filesystem1.74.0 libboost-atomic1.74-dev libboost-atomic1.74.0
  libtomlplusplus-dev libtomlplusplus3 libspdlog-dev libspdlog1.10 libfmt-dev libfmt9 nlohmann-json3-dev
  zlib1g-dev zlib1g libssl-dev libssl3 catch2
)
mkdir -p .gpu-deps
cd .gpu-deps
rm -f ./*.deb
apt-get download "${packages[@]}"
echo "gpu-deps: $(ls ./*.deb | wc -l) packages, $(du -sh . | cut -f1) in .gpu-deps/"
