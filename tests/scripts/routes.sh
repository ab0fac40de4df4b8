# The per-peer transport choice as a user sees it: `zcoll_info --routes` as every rank of a job
# of 4 ranks on 2 emulated nodes (tools/zcollrun). Each rank must list one route per peer:
# `self` for itself, `shm` for the other rank of its node, `ucx` for the other node, with the
# reason matching where the peer is; with ZCOLL_TRANSPORT=ucx, `ucx` for both others.
set -u
BUILD=${ZCOLL_BUILD_DIR:?ZCOLL_BUILD_DIR must name the build directory}
SRC=${ZCOLL_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
INFO=$BUILD/tools/zcoll_info
[ -x "$INFO" ] || { echo "no $INFO: skipped"; exit 77; }
FAILED=0
fail() { echo "FAIL: $*"; FAILED=1; }

# Sets $out and $rc.
run_routes() {
  out=$(python3 "$SRC/tools/zcollrun" --timeout 120 -n 4 --nodes 2 "$INFO" --routes 2>&1)
  rc=$?
  echo "$out"
}

# expect RANK PEER PATTERN: rank RANK's line for PEER matches PATTERN.
expect() {
  local line
  line=$(printf '%s\n' "$out" | grep -F "[$1]   rank $2 -> ")
  [ "$(printf '%s\n' "$line" | grep -c .)" = 1 ] || { fail "rank $1: not one route to rank $2"; return; }
  printf '%s\n' "$line" | grep -Eq -e "$3" || fail "rank $1 -> rank $2: '$line' does not match '$3'"
}
# check_routes PATTERN_FOR_THE_SAME_NODE
check_routes() {
  for r in 0 1 2 3; do
    for p in 0 1 2 3; do
      if [ "$r" = "$p" ]; then
        expect "$r" "$p" "-> self \(this rank"
      elif [ $((r / 2)) = $((p / 2)) ]; then
        expect "$r" "$p" "$1"
      else
        expect "$r" "$p" "-> ucx \(same machine, another emulated node"
      fi
    done
  done
}
run_routes
[ "$rc" = 0 ] || fail "zcoll_info --routes exited $rc"
check_routes "-> shm \(same node: memfd rings, single-copy process_vm_readv"
ZCOLL_TRANSPORT=ucx run_routes
[ "$rc" = 0 ] || fail "zcoll_info --routes (ZCOLL_TRANSPORT=ucx) exited $rc"
check_routes "-> ucx \(same machine: UCX shared memory"
ZCOLL_TRANSPORT=bogus run_routes >/dev/null
{ [ "$rc" != 0 ] && printf '%s' "$out" | grep -q "ZCOLL_TRANSPORT=bogus: use shm, ucx"; } ||
  fail "ZCOLL_TRANSPORT=bogus was not refused with a clear message"
ZCOLL_TRANSPORT=shm run_routes >/dev/null
{ [ "$rc" != 0 ] && printf '%s' "$out" | grep -q "no transport can reach rank"; } ||
  fail "ZCOLL_TRANSPORT=shm with peers on another node was not refused"
if [ "$FAILED" != 0 ]; then echo "routes tests FAILED"; exit 1; fi
echo "routes tests passed"
