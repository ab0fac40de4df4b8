# The per-peer transport choice as a user sees it: `zcoll_info --routes` as every rank of a job
# of 4 ranks on 2 emulated nodes (tools/zcollrun). Each rank must list one route per peer:
# `self` for itself, `ucx` for the others, with the reason matching where the peer is.
set -u
BUILD=${ZCOLL_BUILD_DIR:?ZCOLL_BUILD_DIR must name the build directory}
SRC=${ZCOLL_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
INFO=$BUILD/tools/zcoll_info
[ -x "$INFO" ] || { echo "no $INFO: skipped"; exit 77; }
FAILED=0
fail() { echo "FAIL: $*"; FAILED=1; }

out=$(python3 "$SRC/tools/zcollrun" --timeout 120 -n 4 --nodes 2 "$INFO" --routes 2>&1)
rc=$?
echo "$out"
[ "$rc" = 0 ] || fail "zcoll_info --routes exited $rc"

# expect RANK PEER PATTERN: rank RANK's line for PEER matches PATTERN.
expect() {
  local line
  line=$(printf '%s\n' "$out" | grep -F "[$1]   rank $2 -> ")
  [ "$(printf '%s\n' "$line" | grep -c .)" = 1 ] || { fail "rank $1: not one route to rank $2"; return; }
  printf '%s\n' "$line" | grep -Eq -e "$3" || fail "rank $1 -> rank $2: '$line' does not match '$3'"
}
for r in 0 1 2 3; do
  for p in 0 1 2 3; do
    if [ "$r" = "$p" ]; then
      expect "$r" "$p" "-> self \(this rank"
    elif [ $((r / 2)) = $((p / 2)) ]; then
      expect "$r" "$p" "-> ucx \(same machine: UCX shared memory"
    else
      expect "$r" "$p" "-> ucx \(same machine, another emulated node"
    fi
  done
done
if [ "$FAILED" != 0 ]; then echo "routes tests FAILED"; exit 1; fi
echo "routes tests passed"
