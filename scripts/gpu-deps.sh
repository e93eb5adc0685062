#!/usr/bin/env bash
# Downloads, into .gpu-deps/ (git-ignored, about 20 MB), the Debian 12
# packages that scripts/build-gpu.sh unpacks on a GPU machine which has
# PyTorch, a compiler, CMake, ninja and nvcc but none of these C++ libraries
# and no package registry. Run it here, where apt works; .gpu-deps/ then
# travels with the checkout (the device tool's `carry`).
#
#   scripts/gpu-deps.sh
#
# Headers, CMake and pkg-config packages, and the shared libraries they link
# (scripts/build-gpu.sh checks each before it configures). pkgconf is there
# for machines without pkg-config. Gloo is left out on purpose: see
# docs/devices.md#building-for-a-gpu.
set -euo pipefail
cd "$(dirname "$0")/.."
packages=(
  libboost1.74-dev libboost-program-options1.74-dev libboost-program-options1.74.0
  libboost-filesystem1.74-dev libboost-filesystem1.74.0 libboost-atomic1.74-dev libboost-atomic1.74.0
  libtomlplusplus-dev libtomlplusplus3 libspdlog-dev libspdlog1.10 libfmt-dev libfmt9 nlohmann-json3-dev
  zlib1g-dev zlib1g libssl-dev libssl3 catch2
  libpcre2-dev libpcre2-8-0 libpcre2-16-0 libpcre2-32-0 libpcre2-posix3   # tokenizer.json regexes
  libutf8proc-dev libutf8proc2                                             # Unicode normalizers
  pkgconf pkgconf-bin libpkgconf3                                          # finds the two above
  libgloo-dev                        # headers only, for c10d's Gloo process group (core/dist/CMakeLists.txt)
)
mkdir -p .gpu-deps
cd .gpu-deps
rm -f ./*.deb
apt-get download "${packages[@]}"
echo "gpu-deps: $(ls ./*.deb | wc -l) packages, $(du -sh . | cut -f1) in .gpu-deps/"
