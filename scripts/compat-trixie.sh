#!/usr/bin/env bash
# Builds ptrain and runs the whole test suite in a Debian trixie root
# (LibTorch 2.6, Catch2 3, g++ 14), next to the host's bookworm build
# (LibTorch 1.13, Catch2 2), without the optional outputs (see in_root).
# Needs root (or sudo) for debootstrap, mount and chroot.
#
# The root lives in ~/.cache/ptrain/trixie-root and is reused once complete,
# by every checkout on the machine (a fresh CI clone included: creating it and
# installing LibTorch 2.6 into it takes ~10 minutes); the build goes to
# build-trixie/ in the checkout, through the host's ccache directory so
# repeated runs on one machine are warm.
#
# Usage: scripts/compat-trixie.sh [command...]   (see "With arguments" below)
# Environment: PTRAIN_TRIXIE_ROOT (root directory), PTRAIN_TRIXIE_MIRROR
# (Debian mirror), PTRAIN_JOBS (build and test parallelism).
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "$(id -u)" -ne 0 ]; then
  exec sudo --preserve-env=PTRAIN_TRIXIE_ROOT,PTRAIN_TRIXIE_MIRROR,PTRAIN_JOBS,CCACHE_DIR "$0" "$@"
fi

# Every mount below is made in a private mount namespace: none can leak to the
# host or survive the run, even if this script is killed before its trap runs.
if [ -z "${PTRAIN_TRIXIE_NAMESPACE:-}" ]; then
  export PTRAIN_TRIXIE_NAMESPACE=1
  exec unshare --mount --propagation private "$0" "$@"
fi

checkout="$PWD"
root="$(realpath -m "${PTRAIN_TRIXIE_ROOT:-$HOME/.cache/ptrain/trixie-root}")"
[ "$root" != / ] || { echo "[trixie] PTRAIN_TRIXIE_ROOT must not be /" >&2; exit 2; }
mirror="${PTRAIN_TRIXIE_MIRROR:-http://deb.debian.org/debian}"
marker="$root/.ptrain-root-complete"
ccache_dir="${CCACHE_DIR:-$(ccache -k cache_dir 2>/dev/null || echo "$HOME/.cache/ccache")}"

log() { echo "[trixie] $*"; }
elapsed() { printf '%dm%02ds' $((SECONDS / 60)) $((SECONDS % 60)); }

if [ ! -f "$marker" ]; then
  command -v debootstrap >/dev/null || { echo "[trixie] debootstrap is missing: run scripts/install-deps.sh --test" >&2; exit 1; }
  # A root without the marker is a debootstrap that did not finish: start over.
  # (Nothing can be mounted in it: mounts live only in this namespace.)
  rm -rf "$root"
  mkdir -p "$(dirname "$root")"
  log "creating a minimal trixie root in $root"
  debootstrap --variant=minbase trixie "$root" "$mirror"
  touch "$marker"
  log "root created in $(elapsed)"
fi

# shellcheck source=scripts/lib/root-mounts.sh
source scripts/lib/root-mounts.sh
mount_in_root /proc -t proc proc
mount_in_root /dev/shm -t tmpfs -o mode=1777,nosuid,nodev shm  # POSIX shared memory and semaphores
mount_in_root /src --bind "$checkout"
mkdir -p "$ccache_dir"
mount_in_root /ccache --bind "$ccache_dir"
cp /etc/resolv.conf "$root/etc/resolv.conf"  # apt inside the root resolves the mirror

# This build is also the one without the optional outputs (no TensorBoard
# event files, no HTML report, no Python rewards; CMake options
# PTRAIN_TENSORBOARD, PTRAIN_REPORT, PTRAIN_PYTHON_REWARDS): it needs neither
# protobuf's compiler, dygraphs nor libpython, and its suite checks the errors
# that say so. Those outputs do not depend on the LibTorch version; the host's
# bookworm build tests them. The tests labelled clients (ptrain next to
# transformers, PEFT and TRL) run on the host only too: the checkout's .venv
# is made from the host's Python. The other tests' helper scripts take the
# root's python3.
in_root() {
  chroot "$root" /usr/bin/env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root \
    LANG=C.UTF-8 CCACHE_DIR=/ccache PTRAIN_BUILD_DIR=build-trixie PTRAIN_JOBS="${PTRAIN_JOBS:-$(nproc)}" \
    PTRAIN_TENSORBOARD=OFF PTRAIN_REPORT=OFF PTRAIN_PYTHON_REWARDS=OFF PTRAIN_CLIENT_TESTS=OFF \
    PTRAIN_CMAKE_ARGS=-DPTRAIN_PYTHON=/usr/bin/python3 /bin/bash -c "cd /src && $1"
}

# With arguments, run them in the root instead of the suite (e.g. `bash` for a
# shell, or `scripts/build.sh -- -k` to list every compile error at once).
if [ $# -gt 0 ]; then
  in_root "$(printf '%q ' "$@")"
  exit
fi

# An install interrupted half-way leaves packages unconfigured: finish them first.
in_root "dpkg --configure -a"
# The same package list as the host: trixie has every name with newer versions
# (LibTorch 2.6, Catch2 3, g++ 14); installs only what is missing.
in_root "scripts/install-deps.sh --test"
log "dependencies ready at $(elapsed)"
log "$(in_root "dpkg-query -W -f='\${Package} \${Version}, ' libtorch-dev catch2 cmake; g++ --version | head -1")"
in_root "scripts/test.sh"
log "trixie build and tests passed in $(elapsed)"
