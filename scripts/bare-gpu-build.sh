#!/usr/bin/env bash
# Builds the CUDA configuration (scripts/build-gpu.sh) the way a bare GPU
# machine does, and runs its test suite on the CPU: in a minimal Debian root
# that has a compiler, CMake, ninja, Python and dpkg and no C++ library, with
# this checkout (its .gpu-deps/ and its .venv's PyTorch) and the host's CUDA
# toolkit mounted in. A dependency that .gpu-deps/ lacks fails here as it
# would there.
#
#   scripts/bare-gpu-build.sh            build every target, then run the suite
#   scripts/bare-gpu-build.sh CMD...     run CMD in the root instead (e.g. bash)
#
# Needs root (or sudo), debootstrap, .gpu-deps/ (scripts/gpu-deps.sh), a .venv
# with PyTorch (scripts/python-env.sh) and the CUDA toolkit in /usr/local/cuda.
# The root lives in ~/.cache/ptrain/gpu-bare-root (PTRAIN_GPU_ROOT), is made
# once (a few minutes) and reused; the build goes to build-gpu-bare/ through
# the host's ccache directory. Environment: PTRAIN_JOBS, PTRAIN_TRIXIE_MIRROR
# (the Debian mirror), PTRAIN_BARE_CTEST_ARGS (ctest arguments, e.g. -L device).
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "$(id -u)" -ne 0 ]; then
  exec sudo --preserve-env=PTRAIN_GPU_ROOT,PTRAIN_TRIXIE_MIRROR,PTRAIN_JOBS,PTRAIN_BARE_CTEST_ARGS,CCACHE_DIR "$0" "$@"
fi
# Mounts live in a private mount namespace: none leaks to the host or
# survives the run (scripts/compat-trixie.sh does the same).
if [ -z "${PTRAIN_BARE_NAMESPACE:-}" ]; then
  export PTRAIN_BARE_NAMESPACE=1
  exec unshare --mount --propagation private "$0" "$@"
fi

checkout="$PWD"
root="$(realpath -m "${PTRAIN_GPU_ROOT:-$HOME/.cache/ptrain/gpu-bare-root}")"
[ "$root" != / ] || { echo "[bare-gpu] PTRAIN_GPU_ROOT must not be /" >&2; exit 2; }
mirror="${PTRAIN_TRIXIE_MIRROR:-http://deb.debian.org/debian}"
marker="$root/.ptrain-root-complete"
ccache_dir="${CCACHE_DIR:-$(ccache -k cache_dir 2>/dev/null || echo "$HOME/.cache/ccache")}"
log() { echo "[bare-gpu] $*"; }

compgen -G ".gpu-deps/*.deb" >/dev/null || { log "no .gpu-deps/: run scripts/gpu-deps.sh" >&2; exit 1; }
venv="$(realpath -e .venv 2>/dev/null)" || { log "no .venv: run scripts/python-env.sh" >&2; exit 1; }
[ -x /usr/local/cuda/bin/nvcc ] || { log "no CUDA toolkit in /usr/local/cuda" >&2; exit 1; }

if [ ! -f "$marker" ]; then
  command -v debootstrap >/dev/null || { log "debootstrap is missing: run scripts/install-deps.sh --test" >&2; exit 1; }
  rm -rf "$root"
  mkdir -p "$(dirname "$root")"
  # What the GPU machines have besides PyTorch: a compiler, CMake, ninja and
  # Python (the venv's interpreter); dpkg (in minbase) unpacks .gpu-deps/.
  # ccache only makes the repeated builds fast; no library comes with these.
  log "creating a minimal bookworm root in $root"
  debootstrap --variant=minbase --include=g++,cmake,ninja-build,python3,ccache bookworm "$root" "$mirror"
  touch "$marker"
fi

# shellcheck source=scripts/lib/root-mounts.sh
source scripts/lib/root-mounts.sh
mount_in_root /proc -t proc proc
mount_in_root /dev/shm -t tmpfs -o mode=1777,nosuid,nodev shm
# The checkout and the venv at their own paths, so the venv's links and the
# build's absolute paths hold inside the root as outside.
mount_in_root "$checkout" --bind "$checkout"
[[ "$venv" == "$checkout"/* ]] || mount_in_root "$venv" --bind "$venv" -o ro
mount_in_root /usr/local/cuda --bind "$(realpath /usr/local/cuda)" -o ro
mkdir -p "$ccache_dir"
mount_in_root /ccache --bind "$ccache_dir"
# The host's name resolves as it does outside (Gloo binds to the hostname's address).
cp /etc/hosts /etc/resolv.conf "$root/etc/"

in_root() {
  # CCACHE_COMPILERCHECK=content: the root's compiler is another file than
  # the host's, so ccache hashes what it is, not when it was installed.
  chroot "$root" /usr/bin/env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root \
    LANG=C.UTF-8 CCACHE_DIR=/ccache CCACHE_COMPILERCHECK=content PTRAIN_BUILD_DIR=build-gpu-bare \
    PTRAIN_JOBS="${PTRAIN_JOBS:-$(nproc)}" /bin/bash -c "cd '$checkout' && $1"
}

if [ $# -gt 0 ]; then
  in_root "$(printf '%q ' "$@")"
  exit
fi
start=$SECONDS
in_root "scripts/build-gpu.sh"
log "built in $((SECONDS - start)) s"
# PTRAIN_BARE_CTEST_ARGS splits into words, each quoted for the root's shell
# (a label regex such as unit|bad_inputs holds a `|`).
# shellcheck disable=SC2086
ctest_args=""
[ -z "${PTRAIN_BARE_CTEST_ARGS:-}" ] || ctest_args="$(printf '%q ' ${PTRAIN_BARE_CTEST_ARGS})"
# shellcheck disable=SC2016  # expanded inside the root
in_root 'export LD_LIBRARY_PATH="$(scripts/build-gpu.sh --print-library-path)" &&
  ctest --test-dir build-gpu-bare --output-on-failure -j "$PTRAIN_JOBS" --timeout 900 '"$ctest_args"
log "build and tests passed in $((SECONDS - start)) s"
