#!/usr/bin/env bash
# A rank SIGKILLed in a step loop and the others going on (tests/programs/zcoll_survive.cc):
# 4 ranks over 2 emulated nodes under tools/zcollrun --keep-going, 10 runs, each killing a
# different rank (the rendezvous root, rank 0, included) at a different step. Every run: the
# job's exit code is the killed rank's (137), the 3 others shrink the communicator without it
# and finish every step on the new one with exact values (one "survived" line, no other
# failure), well within the hang guard. Two more runs kill a second rank during the shrink
# (zcoll_survive's SHRINK_VICTIM): the first shrink fails naming it on every survivor, the second
# (without it) works, and the 2 left finish every step. Prints the failure-detection and shrink
# times seen.
# Nothing is left behind (lib/leftovers.sh): no process of the job, no new file in /dev/shm
# (zcoll's shared memory is memfds), no status socket of an ended process.
set -u
BUILD=${ZCOLL_BUILD_DIR:?ZCOLL_BUILD_DIR must name the build directory}
SRC=${ZCOLL_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
PROG=$BUILD/tests/zcoll_survive
export ZCOLL_SOCKET_IFNAME=${ZCOLL_SOCKET_IFNAME:-lo} UCX_NET_DEVICES=${UCX_NET_DEVICES:-lo}
log=$(mktemp)
trap 'rm -f "$log"' EXIT
source "$SRC/tests/scripts/lib/leftovers.sh"
failed=0
leftovers_before
for run in 0 1 2 3 4 5 6 7 8 9 10 11; do
  victim=$(( (run * 3 + 1) % 4 ))
  kill_step=$(( (run * 5) % 7 ))
  shrink_victim=()  # runs 10, 11: a second rank dies during the shrink
  [ "$run" -ge 10 ] && shrink_victim=($(( (victim + 1 + 2 * (run % 2)) % 4 )))
  python3 "$SRC/tools/zcollrun" --keep-going --timeout 60 -n 4 --nodes 2 \
    "$PROG" "$victim" "$kill_step" 10 "${shrink_victim[@]}" >"$log" 2>&1
  rc=$?
  survived=$(grep -c '^\[[0-9]\] survived: ' "$log")
  if [ "${#shrink_victim[@]}" -eq 1 ] &&
     ! grep -q "first shrink failed after [0-9]* ms: .*rank ${shrink_victim[0]} " "$log"; then
    echo "FAIL: run $run: the shrink victim ${shrink_victim[0]} was not named"; cat "$log"
    failed=1
  fi
  if [ "$rc" -ne 137 ] || [ "$survived" -ne 1 ] || grep -q 'exited with code [^1]' "$log"; then
    echo "FAIL: run $run (victim $victim, kill at step $kill_step): exit $rc, $survived survivor lines"
    cat "$log"
    failed=1
    continue
  fi
  echo "ok: run $run, victim $victim at step $kill_step ${shrink_victim[*]:+(rank ${shrink_victim[*]} \
dies during the shrink)}: $(grep -o 'survived: .*' "$log")"
done
leftovers_check "$PROG" || failed=1
exit $failed
