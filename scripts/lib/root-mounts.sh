# Sourced by scripts/compat-trixie.sh and scripts/bare-gpu-build.sh, which run
# in a private mount namespace: mounts into the chroot directory $root, all
# undone when the script exits, however it exits.
#
#   mount_in_root <target inside the root> <mount arguments...>
#   mount_in_root /proc -t proc proc

root_mounts=()
unmount_root() {
  local status=$?
  # Unmount in reverse order; a process still holding a mount (an
  # interrupted test) only delays it (lazy unmount).
  for ((i = ${#root_mounts[@]} - 1; i >= 0; i--)); do
    umount "${root_mounts[i]}" 2>/dev/null || umount --lazy "${root_mounts[i]}" || true
  done
  exit "$status"
}
trap unmount_root EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

mount_in_root() {
  local target="$root$1"
  shift
  mkdir -p "$target"
  mount "$@" "$target"
  root_mounts+=("$target")
}
