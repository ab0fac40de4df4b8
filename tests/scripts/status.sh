#!/usr/bin/env bash
# The flight recorder and zcoll_info --status against three injected faults on a 4-rank job
# over 2 emulated nodes (tests/programs/zcoll_faults.cc): rank 3 skips the 4th all-reduce
# (calls a barrier), sleeps 60 s before it, or passes another count. While the job hangs,
# `zcoll_info --status` must name rank 3, operation #4 and the call; after ZCOLL_TIMEOUT (15 s) the
# other ranks' dumps (ZCOLL_DEBUG_DUMP) must be valid JSON naming operation #4, still running,
# and the peers it waits for, and SIGUSR2 (ZCOLL_DEBUG_DUMP_SIGNAL) must make rank 3 dump at once. Nothing may be left behind: the status sockets are abstract.
# In the third case rank 2 runs with ZCOLL_STATUS=off: the `=>` summary must count it as a rank
# that did not answer (docs/FLIGHT_RECORDER.md), on a line of its own starting with `=>`.
set -u
BUILD=${ZCOLL_BUILD_DIR:?ZCOLL_BUILD_DIR must name the build directory}
SRC=${ZCOLL_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
PROG=$BUILD/tests/zcoll_faults
INFO=$BUILD/tools/zcoll_info
export ZCOLL_SOCKET_IFNAME=${ZCOLL_SOCKET_IFNAME:-lo} UCX_NET_DEVICES=${UCX_NET_DEVICES:-lo}
work=$(mktemp -d)
job=
pid3=
trap '[ -n "$job" ] && kill -- -"$job" 2>/dev/null; rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

# The block of `zcoll_info --status` (read on stdin) of the communicator whose ranks are
# children of process $1 (our zcollrun): other tests' jobs may run at the same time.
our_comm() {
  python3 -c '
import subprocess, sys
kids = set(subprocess.run(["pgrep", "-P", sys.argv[1]], capture_output=True, text=True).stdout.split())
blocks, cur = [], []
for line in sys.stdin:
    if line.startswith("comm "):
        cur = [line]; blocks.append(cur)
    elif cur:
        cur.append(line)
for b in blocks:
    if any(l.split()[:1] == ["rank"] and l.split()[3] in kids for l in b):
        sys.stdout.write("".join(b))
' "$1"
}

# Polls zcoll_info --status until our job's communicator says what `expect` matches, for up to
# 30 s: the job is stuck well under a second after its ranks start, but on a loaded 2-core
# machine starting 4 ranks took over 10 s (CI, 2026-11-29: an empty answer after 40 polls). The
# stuck state lasts ZCOLL_TIMEOUT (15 s) from then, so a late start still finds it. Prints the
# last answer.
status_of_job() {
  local expect=$1 out
  local deadline=$((SECONDS + 30))
  while :; do
    out=$("$INFO" --status 2>&1 | our_comm "$launcher")
    if echo "$out" | grep -qE "$expect" || [ "$SECONDS" -ge "$deadline" ]; then break; fi
    sleep 0.25
  done
  echo "$out"
}

run_case() {
  local mode=$1 expect=$2 silent=${3:-}
  # Rank $silent (if given) does not answer zcoll_info --status (exec keeps its pid).
  ZCOLL_TIMEOUT=15 ZCOLL_DEBUG_DUMP="$work/$mode.%r.json" ZCOLL_DEBUG_DUMP_SIGNAL=USR2 \
    SILENT_RANK="$silent" setsid timeout 90 python3 "$SRC/tools/zcollrun" -n 4 --nodes 2 \
    bash -c '[ "$RANK" = "$SILENT_RANK" ] && export ZCOLL_STATUS=off; exec "$@"' rank \
    "$PROG" "$mode" 3 >"$work/$mode.log" 2>&1 &
  job=$!
  # Our zcollrun, once timeout has started it (on a loaded machine that can take seconds).
  local launcher=
  for _ in $(seq 1 100); do
    sleep 0.1
    launcher=$(pgrep -P "$job" -f zcollrun | head -1)
    [ -n "$launcher" ] && break
  done
  [ -n "$launcher" ] || fail "$mode: zcollrun did not start within 10 s"
  local status
  status=$(status_of_job "$expect")
  echo "== $mode"; echo "$status"
  echo "$status" | grep -qE "$expect" || fail "$mode: status did not say /$expect/"
  if [ -n "$silent" ]; then
    echo "$status" | grep -qE "^  => 1 of 4 ranks did not answer here \(rank $silent\): " ||
      fail "$mode: no '=>' line counted rank $silent, which has ZCOLL_STATUS=off"
  else
    ! echo "$status" | grep -q "did not answer" || fail "$mode: a rank did not answer"
  fi
  # The signal makes rank 3 dump at once, while the job is alive.
  pid3=$(echo "$status" | awk '$1 == "rank" && $2 == "3" { print $4; exit }')
  kill -USR2 "$pid3" 2>/dev/null || fail "$mode: no pid for rank 3 in the status"
  for _ in $(seq 1 20); do [ -s "$work/$mode.3.json" ] && break; sleep 0.1; done
  grep -q '"reason": "signal"' "$work/$mode.3.json" 2>/dev/null ||
    fail "$mode: ZCOLL_DEBUG_DUMP_SIGNAL=USR2 gave no dump from rank 3"
  wait "$job"
  job=
  # zcollrun ends the job when the first rank fails: the ranks that time out a little later, or
  # learn of the first one's failure, may be terminated before they dump. At least one of ranks
  # 0-2 dumps with its own timeout; every dump is checked, its error filled.
  local dumps=0 timeouts=0
  for r in 0 1 2; do
    local dump="$work/$mode.$r.json"
    [ -s "$dump" ] || continue
    dumps=$((dumps + 1))
    grep -q '"reason": "timeout"' "$dump" && timeouts=$((timeouts + 1))
    python3 - "$dump" <<'PY' || fail "$mode: rank $r's dump"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["schema"] == "zcoll-flight-record/1", d
assert (d["reason"], d["error"]) in (("timeout", "zcollTimeout"), ("error", "zcollRemoteError")), d
last = d["ops"][-1]
assert last["seq"] == 4 and last["op"] == "allreduce" and last["state"] == "running", last
assert last["waiting_on"] and all(0 <= p < 4 for p in last["waiting_on"]), last
assert d["ops"][0]["seq"] == 1 and all(o["result"] == "zcollSuccess" for o in d["ops"][:3]), d
PY
  done
  [ "$timeouts" -gt 0 ] ||
    fail "$mode: no rank of 0-2 dumped a timeout ($(tail -3 "$work/$mode.log"))"
  # Rank 3's own dumps (the signal's) and the others' name the operation; the status named
  # whom each waits for above.
}

run_case skip "mismatched calls at #4: .*rank 3: barrier"
run_case sleep "rank 3 is behind: its last operation is #3"
run_case count "mismatched calls at #4: .*count 1000 .*rank 3: allreduce count 100000" 2
# Abstract sockets vanish with their processes: no status service of the last job is left.
sleep 0.5
! grep -q "zcoll-status\.$(id -u)\.$pid3\b" /proc/net/unix ||
  fail "rank 3's status socket is still there after its job ended"
echo "PASS: status names the rank, the operation and the call; dumps after the timeout"
