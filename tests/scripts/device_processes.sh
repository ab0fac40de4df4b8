#!/usr/bin/env bash
# Ranks as separate processes sharing the GPU (tests/programs/zcoll_device_check.cc under
# tools/zcollrun), so device bytes between the ranks of a node cross real CUDA IPC between
# processes. Every collective, ZeRO++ call and send/recv group on cudaMalloc'd buffers must give
# the bytes of the same call on host buffers, for
#   -n 2 and -n 4 on one node (cuda_ipc between every pair: several ranks on one GPU), and
#   -n 4 --nodes 2 (cuda_ipc inside a node, staged through host memory across),
# each with ZCOLL_DEVICE_TRANSPORT unset, =cuda_ipc (one-node runs only) and =staged; then -n 2
# with the device buffers registered as windows and each in-place algorithm forced. The routes
# every rank chose come from its log (ZCOLL_DEBUG=INFO ZCOLL_DEBUG_SUBSYS=NET: "comm rank R device
# routes: rank P -> cuda_ipc (same device)"): the forced cuda_ipc runs must route every peer over
# cuda_ipc, the staged ones every peer staged, and the two-node runs the other node staged.
# Then a rank leaves while the others enter a 64 MiB device all-reduce (ZCOLL_TIMEOUT=10): every
# other rank must see the failure within the timeout and get its stream back.
# Without a CUDA device the first run exits 77, and so does this script (ctest: skipped).
set -u
BUILD=${ZCOLL_BUILD_DIR:?ZCOLL_BUILD_DIR must name the build directory}
SRC=${ZCOLL_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
PROG=$BUILD/tests/zcoll_device_check
[ -x "$PROG" ] || { echo "FAIL: no $PROG (build the zcoll_device_check target)"; exit 1; }
export ZCOLL_SOCKET_IFNAME=${ZCOLL_SOCKET_IFNAME:-lo} UCX_NET_DEVICES=${UCX_NET_DEVICES:-lo}
export ZCOLL_TIMEOUT=${ZCOLL_TIMEOUT:-60}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
FAILED=0
FIRST=1
fail() { echo "FAIL: $*"; FAILED=1; }

# run NAME TRANSPORT ZCOLLRUN_ARGS...: runs the job with ZCOLL_DEVICE_TRANSPORT=TRANSPORT ("unset":
# not set) and the NET log on; sets $name, $log (its output) and $rc. The first run decides whether
# there is a device at all.
run() {
  local transport=$2
  name=$1
  shift 2
  local envs=(env -u ZCOLL_DEVICE_TRANSPORT "ZCOLL_TIMEOUT=$ZCOLL_TIMEOUT" ZCOLL_DEBUG=INFO
              ZCOLL_DEBUG_SUBSYS=NET)
  [ "$transport" != unset ] && envs+=("ZCOLL_DEVICE_TRANSPORT=$transport")
  log=$TMP/$name
  echo "== $name: ZCOLL_DEVICE_TRANSPORT=$transport zcollrun $*"
  "${envs[@]}" python3 "$SRC/tools/zcollrun" --timeout 500 "$@" > "$log" 2>&1
  rc=$?
  if [ "$FIRST" = 1 ] && [ "$rc" = 77 ] && grep -q "SKIP: no CUDA device" "$log"; then
    echo "SKIP: no CUDA device"
    grep -m1 "SKIP: no CUDA device" "$log"
    exit 77
  fi
  FIRST=0
  [ "$rc" = 0 ] || {
    fail "$name: zcollrun exited $rc"
    grep -E "MISMATCH|error|FAIL|failure|zcollrun:|SKIP|did not|still held" "$log" | head -40
  }
}

# Lines of rank R's device routes in $log, without the log prefix.
routes_of() {
  grep -E "^\[$1\] .* device routes: " "$log" | sed 's/^\(\[[0-9]*\]\).* device routes: /\1 /'
}

# check_collectives NRANKS: every rank finished every check, and logged its device routes.
check_collectives() {
  local r
  for ((r = 0; r < $1; ++r)); do
    grep -q "^\[$r\] rank $r: all [0-9]* checks ok" "$log" || fail "$name: rank $r did not pass"
    [ -n "$(routes_of "$r")" ] || fail "$name: rank $r logged no device routes"
  done
  grep -E "^\[[0-9]+\] rank [0-9]+: all [0-9]+ checks ok" "$log" | sort
  grep -E " device routes: " "$log" | sed 's/^\(\[[0-9]*\]\).* zcoll INFO NET /\1 /' | sort
}

# expect_routes NRANKS KIND: KIND cuda_ipc: every peer over cuda_ipc; staged: every peer staged;
# split: the ranks of the other node staged (and none of them over cuda_ipc).
expect_routes() {
  local r lines
  for ((r = 0; r < $1; ++r)); do
    lines=$(routes_of "$r")
    case $2 in
      cuda_ipc)
        printf '%s\n' "$lines" | grep -q -- "-> cuda_ipc (" ||
          fail "$name: rank $r has no cuda_ipc route"
        ! printf '%s\n' "$lines" | grep -- "-> staged" | grep -qv -- "-> staged (this rank)" ||
          fail "$name: rank $r stages a peer: $(printf '%s' "$lines" | tr '\n' ';')"
        ;;
      staged)
        ! printf '%s\n' "$lines" | grep -q -- "-> cuda_ipc" ||
          fail "$name: rank $r uses cuda_ipc: $(printf '%s' "$lines" | tr '\n' ';')"
        printf '%s\n' "$lines" | grep -q -- "-> staged (" || fail "$name: rank $r stages nothing"
        ;;
      split)
        printf '%s\n' "$lines" | grep -q -- "-> staged (not a node peer" ||
          fail "$name: rank $r does not stage the other node: $(printf '%s' "$lines" | tr '\n' ';')"
        ;;
    esac
  done
}

# Every collective, on each layout and device transport.
for n in 2 4; do
  run "n$n" unset -n "$n" "$PROG"
  check_collectives "$n"
  routes_of 0 | grep -q -- "-> cuda_ipc" ||
    echo "note: n$n: with ZCOLL_DEVICE_TRANSPORT unset, rank 0 chose no cuda_ipc route"
  run "n$n.cuda_ipc" cuda_ipc -n "$n" "$PROG"
  check_collectives "$n"
  expect_routes "$n" cuda_ipc
  run "n$n.staged" staged -n "$n" "$PROG"
  check_collectives "$n"
  expect_routes "$n" staged
done
run "n4.nodes2" unset -n 4 --nodes 2 "$PROG"
check_collectives 4
expect_routes 4 split
run "n4.nodes2.staged" staged -n 4 --nodes 2 "$PROG"
check_collectives 4
expect_routes 4 staged

# The device buffers registered as windows (zcollCommWindowRegister) and the algorithms that read
# their peers in place forced, on one node over cuda_ipc: the peers' buffers are read and written
# through CUDA IPC mappings opened at registration, never inside a call.
for algo in ZCOLL_ALGO_ALLGATHER=shm_read ZCOLL_ALGO_REDUCESCATTER=shm_read \
            ZCOLL_ALGO_ALLREDUCE=shm_read ZCOLL_ALGO_ALLGATHER_HIER=rail_then_node_shm_read \
            ZCOLL_ALGO_ALLGATHER_FROM_SECONDARY=node_shm_read; do
  export "${algo?}"
  run "n2.windows.${algo%%=*}" cuda_ipc -n 2 "$PROG" --windows
  check_collectives 2
  unset "${algo%%=*}"
done

# A rank leaves; the others are in a device all-reduce and must see it within ZCOLL_TIMEOUT.
# check_kill NRANKS VICTIM
check_kill() {
  local seen
  seen=$(grep -cE "^\[[0-9]+\] rank [0-9]+ saw the dead peer: " "$log")
  grep -E "leaves before|saw the dead peer|did not see|still held|later than" "$log" | sort
  [ "$seen" = $(($1 - 1)) ] || fail "$name: $seen of the $(($1 - 1)) other ranks saw rank $2 die"
}
ZCOLL_TIMEOUT=10 run "kill.n4" unset -n 4 "$PROG" --kill-rank 1
check_kill 4 1
ZCOLL_TIMEOUT=10 run "kill.n4.nodes2" unset -n 4 --nodes 2 "$PROG" --kill-rank 3
check_kill 4 3

if [ "$FAILED" != 0 ]; then echo "device process tests FAILED"; exit 1; fi
echo "device process tests passed"
