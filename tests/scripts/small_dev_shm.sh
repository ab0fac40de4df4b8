#!/usr/bin/env bash
# A /dev/shm too small for UCX's shared-memory transports (64 KiB, mounted in a private mount
# namespace; containers often keep it small): zcoll still starts and runs every collective of
# the probe on 2 emulated nodes x 2 ranks. Its own shm transport uses memfds, not /dev/shm; UCX
# starts without its shared-memory transports, with a warning that says so. With UCX_TLS set by
# the user, zcoll keeps it, and init fails with a message naming /dev/shm's free space.
# Exit 77 (skipped) where a mount namespace cannot be made (not root).
set -u
BUILD=${ZCOLL_BUILD_DIR:?}
SRC=${ZCOLL_SOURCE_DIR:?}
unshare -m true 2>/dev/null || { echo "skipped: unshare -m is not permitted here"; exit 77; }
log=$(mktemp)
trap 'rm -f "$log"' EXIT
fail() { echo "FAIL: $*"; cat "$log"; exit 1; }
# Runs "$@" with a 64 KiB /dev/shm of its own.
small_shm() {
  timeout 120 unshare -m sh -c 'mount -t tmpfs -o size=64k tmpfs /dev/shm && exec "$@"' sh "$@"
}

small_shm "$SRC/tools/zcollrun" -n 4 --nodes 2 "$BUILD/tests/zcoll_probe" ok >"$log" 2>&1 ||
  fail "the probe (all-reduce and qgZ) with a 64 KiB /dev/shm"
grep -q "starting it without them (UCX_TLS=^sm)" "$log" || fail "no warning about UCX_TLS=^sm"
echo "ok: 2 nodes x 2 ranks run with a 64 KiB /dev/shm, UCX without its shared memory"

UCX_TLS=posix,tcp small_shm "$SRC/tools/zcollrun" -n 2 "$BUILD/tests/zcoll_probe" ok >"$log" 2>&1 &&
  fail "UCX_TLS=posix,tcp started with a 64 KiB /dev/shm"
grep -q "(/dev/shm: 64 KiB free; UCX_TLS=posix,tcp)" "$log" || fail "the init error does not say why"
echo "ok: with UCX_TLS=posix,tcp init fails and names /dev/shm"
