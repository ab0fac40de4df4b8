#!/usr/bin/env bash
# A rank SIGKILLed in a step loop and the others going on (tests/programs/zcoll_survive.cc):
# 4 ranks over 2 emulated nodes under tools/zcollrun --keep-going, 10 runs, each killing a
# different rank (the rendezvous root, rank 0, included) at a different step. Every run: the
# job's exit code is the killed rank's (137), the 3 others shrink the communicator without it
# and finish every step on the new one with exact values (one "survived" line, no other
# failure), well within the hang guard. Prints the failure-detection and shrink times seen.
# Nothing is left behind: no process of the job, no new file in /dev/shm (zcoll's shared memory
# is memfds; its sockets are abstract).
set -u
BUILD=${ZCOLL_BUILD_DIR:?ZCOLL_BUILD_DIR must name the build directory}
SRC=${ZCOLL_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
PROG=$BUILD/tests/zcoll_survive
export ZCOLL_SOCKET_IFNAME=${ZCOLL_SOCKET_IFNAME:-lo} UCX_NET_DEVICES=${UCX_NET_DEVICES:-lo}
log=$(mktemp)
trap 'rm -f "$log"' EXIT
failed=0
shm_before=$(ls /dev/shm 2>/dev/null | sort)
for run in 0 1 2 3 4 5 6 7 8 9; do
  victim=$(( (run * 3 + 1) % 4 ))
  kill_step=$(( (run * 5) % 7 ))
  python3 "$SRC/tools/zcollrun" --keep-going --timeout 60 -n 4 --nodes 2 \
    "$PROG" "$victim" "$kill_step" 10 >"$log" 2>&1
  rc=$?
  survived=$(grep -c '^\[[0-9]\] survived: ' "$log")
  if [ "$rc" -ne 137 ] || [ "$survived" -ne 1 ] || grep -q 'exited with code [^1]' "$log"; then
    echo "FAIL: run $run (victim $victim, kill at step $kill_step): exit $rc, $survived survivor lines"
    cat "$log"
    failed=1
    continue
  fi
  echo "ok: run $run, victim $victim at step $kill_step: $(grep -o 'survived: .*' "$log")"
done
if pgrep -f "$PROG" >/dev/null; then
  echo "FAIL: processes of the job are still running:"; pgrep -af "$PROG"; failed=1
fi
shm_after=$(ls /dev/shm 2>/dev/null | sort)
if [ "$shm_before" != "$shm_after" ]; then
  echo "FAIL: /dev/shm changed:"; diff <(echo "$shm_before") <(echo "$shm_after"); failed=1
fi
exit $failed
