#!/usr/bin/env bash
# Installs the Debian packages ptrain needs, only those not installed yet.
#   scripts/install-deps.sh          building and running ptrain and its plugins
#                                    (what scripts/quickstart.sh needs)
#   scripts/install-deps.sh --test   that, and the test tools: the suite
#                                    (scripts/test.sh) and CI's fuzz and trixie steps
# Safe to run repeatedly; needs root (or sudo) only when something is missing.
set -euo pipefail

case "${1:-}" in
  "") with_test_tools=0 ;;
  --test) with_test_tools=1 ;;
  *) echo "usage: scripts/install-deps.sh [--test]" >&2; exit 2 ;;
esac

packages=(
  build-essential cmake ccache
  ninja-build                  # scripts/build.sh's generator: "[N/M]" progress on a cold build
  libtorch-dev libgloo-dev
  libopenblas0-openmp          # LibTorch is ~15x slower on the reference BLAS
  libdnnl-dev                  # oneDNN's GEMM for the model's matrix products (core/model/gemm.h)
  libboost-dev libboost-program-options-dev libboost-filesystem-dev
  libtomlplusplus-dev libspdlog-dev nlohmann-json3-dev
  zlib1g-dev                   # CRC-32 of checkpoint files
  libssl-dev                   # SHA-256 of loaded plugins (OpenSSL EVP)
  pkg-config libpcre2-dev libutf8proc-dev   # tokenizer.json: pre-tokenizer regexes, Unicode normalization
  python3                      # scripts/make_*_data.py: more data like the bundled sets
)
# The optional outputs (CMake options of the same names; scripts/build.sh
# passes these variables on): PTRAIN_TENSORBOARD=OFF or PTRAIN_REPORT=OFF in
# the environment leaves out what only they need; so does PTRAIN_PYTHON_REWARDS=OFF.
if [ "${PTRAIN_TENSORBOARD:-ON}" != OFF ]; then
  packages+=(libprotobuf-dev protobuf-compiler)   # TensorBoard event files (messages generated at build time)
fi
if [ "${PTRAIN_REPORT:-ON}" != OFF ]; then
  packages+=(libjs-dygraphs)                      # the report page's charting library, compiled into ptrain
fi
if [ "${PTRAIN_PYTHON_REWARDS:-ON}" != OFF ]; then
  packages+=(python3-dev pybind11-dev)            # GRPO reward functions in Python (an embedded interpreter)
fi

test_packages=(
  catch2                       # the test suite (PTRAIN_BUILD_TESTS) and examples/plugin_template's tests
  clang libclang-rt-dev        # libFuzzer targets (scripts/fuzz.sh)
  debootstrap                  # scripts/compat-trixie.sh: the LibTorch 2.x build root
  python3-venv                 # scripts/python-env.sh: .venv for the client tests and the benchmarks
)
if [ "${PTRAIN_REPORT:-ON}" != OFF ]; then
  test_packages+=(chromium)    # the report's browser test (headless, driven by the .venv's playwright)
fi
what="build dependencies"
if [ "$with_test_tools" = 1 ]; then
  packages+=("${test_packages[@]}")
  what="build and test dependencies"
fi

missing=()
for package in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$package")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "[deps] all $what are installed"
  exit 0
fi

sudo_cmd=()
if [ "$(id -u)" -ne 0 ]; then sudo_cmd=(sudo); fi
echo "[deps] installing: ${missing[*]}"
"${sudo_cmd[@]}" apt-get update -qq
DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
