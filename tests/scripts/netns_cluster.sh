#!/usr/bin/env bash
# Two emulated hosts in network namespaces (tools/emulate_cluster.sh): traffic between them goes
# over TCP on a veth link, through UCX with peer-failure handling. Checks an all-reduce loop
# and the ZeRO step across the link, and that killing a rank gives zcollRemoteError on every
# other rank (on its own host through the process check, on the other host through UCX).
# Exit 77 (skipped) where namespaces cannot be created.
set -u
BUILD=${ZCOLL_BUILD_DIR:?}
SRC=${ZCOLL_SOURCE_DIR:?}
EMU="$SRC/tools/emulate_cluster.sh --nodes 2 --ranks-per-node 2 --rate 2gbit --"
PROBE="$BUILD/tests/zcoll_probe"
log=$(mktemp)
trap 'rm -f "$log"' EXIT
fail() { echo "FAIL: $*"; cat "$log"; exit 1; }

timeout 120 $EMU "$PROBE" ok >"$log" 2>&1
rc=$?
[ $rc = 77 ] && { echo "skipped: $(cat "$log")"; exit 77; }
[ $rc = 0 ] || fail "all-reduce across hosts exited $rc"
echo "ok: all-reduce across 2 hosts"

if [ -x "$BUILD/perf/zero_step_perf" ]; then
  timeout 120 $EMU "$BUILD/perf/zero_step_perf" -p 256K -n 1 -w 0 >"$log" 2>&1 ||
    fail "zero_step_perf across hosts"
  grep -q "^\[0\] zero_step: .*inter-node bytes ZeRO++/ZeRO-3 = 0\.1" "$log" ||
    fail "zero_step summary"
  echo "ok: zero_step_perf across 2 hosts"
fi

# Large messages both ways across the link (the hierarchical all-gather's rail stage is an
# exchange): eager over TCP by default, UCX's rendezvous when UCX_RNDV_THRESH says so, checked.
if [ -x "$BUILD/perf/all_gather_perf" ]; then
  AG="$BUILD/perf/all_gather_perf -b 16M -e 16M -n 2 -w 1 -d float -c 1"
  ZCOLL_ALGO_ALLGATHER=hierarchical ZCOLL_DEBUG=INFO ZCOLL_DEBUG_SUBSYS=NET timeout 120 $EMU $AG \
    >"$log" 2>&1 || fail "all-gather across hosts (eager)"
  grep -q "Out of bounds values : 0 OK" "$log" || fail "all-gather across hosts (eager): wrong data"
  grep -q "large messages go eagerly" "$log" || fail "TCP-only UCX did not choose eager"
  UCX_RNDV_THRESH=auto ZCOLL_ALGO_ALLGATHER=hierarchical ZCOLL_DEBUG=INFO ZCOLL_DEBUG_SUBSYS=NET \
    timeout 120 $EMU $AG >"$log" 2>&1 || fail "all-gather across hosts (rendezvous)"
  grep -q "Out of bounds values : 0 OK" "$log" || fail "all-gather across hosts (rendezvous): wrong data"
  grep -q "large messages go eagerly" "$log" && fail "UCX_RNDV_THRESH set, eager chosen anyway"
  echo "ok: 16 MiB exchanges across hosts, eager and rendezvous"
fi

start=$(date +%s)
ZCOLL_TIMEOUT=120 timeout 100 $EMU "$PROBE" die 2 >"$log" 2>&1
elapsed=$(( $(date +%s) - start ))
[ "$elapsed" -lt 30 ] || fail "ranks took ${elapsed}s to notice the dead peer"
for r in 0 1 3; do
  # Rank 2 dies before its 6th all-reduce; a survivor may learn it in the qgZ just before, when
  # the acknowledgement of its last send to rank 2 never comes (UCX: endpoint timeout).
  grep -Eq "^\[$r\] probe: (all-reduce|quantized reduce-scatter): .*zcollRemoteError" "$log" ||
    fail "rank $r did not report zcollRemoteError"
done
echo "ok: a killed rank gives zcollRemoteError on both hosts in ${elapsed}s"
