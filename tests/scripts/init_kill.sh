#!/usr/bin/env bash
# A rank SIGKILLed while the job initializes (tests/programs/zcoll_init_kill.cc), 4 ranks over 2
# emulated nodes under tools/zcollrun --keep-going, ZCOLL_TIMEOUT=3. In every case each of the
# 3 others fails (never hangs: within the timeout and 3 s of slack) with a message naming the
# killed rank, and nothing is left behind (lib/leftovers.sh). The cases, by where the rank dies:
#   before it reaches the rendezvous      the others time out: "rank 2 never did"
#   at the rendezvous, others still late  the others fail as they connect: "rank 2 ... exited"
#   the rendezvous root (rank 0)          the others cannot reach it: "rank 0 under ..."
#   as its init returns                   init or the first collective fails naming it
# The kills land before UCX starts or after it is up: a rank killed while UCX creates its
# worker can leave a /dev/shm name of UCX's (docs/FAULT_TOLERANCE.md; lib/leftovers.sh).
set -u
BUILD=${ZCOLL_BUILD_DIR:?ZCOLL_BUILD_DIR must name the build directory}
SRC=${ZCOLL_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
PROG=$BUILD/tests/zcoll_init_kill
export ZCOLL_SOCKET_IFNAME=${ZCOLL_SOCKET_IFNAME:-lo} UCX_NET_DEVICES=${UCX_NET_DEVICES:-lo}
export ZCOLL_TIMEOUT=3
source "$SRC/tests/scripts/lib/leftovers.sh"
log=$(mktemp)
trap 'rm -f "$log"' EXIT
failed=0
leftovers_before
# victim kill_ms late_ms needle
while read -r victim kill_ms late_ms needle; do
  start=$(date +%s%N)
  python3 "$SRC/tools/zcollrun" --keep-going --timeout 60 -n 4 --nodes 2 \
    "$PROG" "$victim" "$kill_ms" "$late_ms" >"$log" 2>&1
  rc=$?
  took_ms=$(( ($(date +%s%N) - start) / 1000000 ))
  lines=$(grep -c '^\[[0-9]\] \(init\|first collective\) failed after ' "$log")
  named=$(grep '^\[[0-9]\] \(init\|first collective\) failed after ' "$log" | grep -c -- "$needle")
  if [ "$rc" -ne 137 ] || [ "$lines" -ne 3 ] || [ "$named" -ne 3 ] || [ "$took_ms" -gt 12000 ] ||
     grep -q 'exited with code [^13]' "$log"; then
    echo "FAIL: rank $victim killed at $kill_ms ms (others $late_ms ms late): exit $rc," \
         "$lines failure lines, $named naming '$needle', $took_ms ms"
    cat "$log"
    failed=1
    continue
  fi
  echo "ok: rank $victim killed at $kill_ms ms (others $late_ms ms late), job over in $took_ms ms:"
  grep -o '^\[[0-9]\] \(init\|first collective\) failed after [0-9]* ms' "$log" | sed 's/^/  /'
done <<'CASES'
2 0 300 rank 2 never did
2 700 1400 rank 2 (pid
0 700 1400 rank 0 under zcollCommInitFromEnv
3 -1 0 rank 3
CASES
leftovers_check "$PROG" || failed=1
exit $failed
