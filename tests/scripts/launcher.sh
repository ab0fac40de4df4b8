# Tests of tools/zcollrun with small shell programs as ranks (no zcoll library needed).
# Run by ctest as `bash launcher.sh`; ZCOLL_SOURCE_DIR points at the source tree.
set -u

SRC=${ZCOLL_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
RUN="python3 $SRC/tools/zcollrun"
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
FAILED=0

fail() { echo "FAIL: $*"; FAILED=1; }
pass() { echo "ok: $*"; }

# expect_eq WHAT GOT WANT
expect_eq() {
  if [ "$2" == "$3" ]; then pass "$1"; else fail "$1: got '$2', want '$3'"; fi
}

# Environment of every rank, one sorted line per rank: RANK WORLD LOCAL LOCAL_SIZE NODE HOSTID.
ENV_LINE='echo "$RANK $WORLD_SIZE $LOCAL_RANK $LOCAL_WORLD_SIZE $NODE_RANK $GROUP_RANK ${ZCOLL_HOSTID:-none}"'

test_env_single_node() {
  local out
  out=$($RUN -n 3 --no-prefix sh -c "$ENV_LINE" | sort)
  expect_eq "env, 3 ranks, one node" "$out" \
"0 3 0 3 0 0 none
1 3 1 3 0 0 none
2 3 2 3 0 0 none"
  out=$($RUN -n 2 --no-prefix sh -c 'echo "$ZCOLL_COMM_ID"' | sort -u)
  case "$out" in
    127.0.0.1:[0-9]*) pass "one ZCOLL_COMM_ID shared by all ranks ($out)" ;;
    *) fail "ZCOLL_COMM_ID: got '$out'" ;;
  esac
  out=$($RUN -n 2 --port 40123 --no-prefix sh -c 'echo "$ZCOLL_COMM_ID"' | sort -u)
  expect_eq "--port" "$out" "127.0.0.1:40123"
  # -np N (mpirun's spelling) and --np N are -n N.
  out=$($RUN -np 2 --no-prefix sh -c 'echo "$WORLD_SIZE"' | sort -u)
  expect_eq "-np 2 (mpirun's spelling)" "$out" "2"
  out=$($RUN --np 3 --no-prefix sh -c 'echo "$WORLD_SIZE"' | sort -u)
  expect_eq "--np 3" "$out" "3"
}

test_env_nodes() {
  local out host
  host=$(python3 -c 'import socket; print(socket.gethostname())')
  out=$($RUN -n 5 --nodes 2 --no-prefix sh -c "$ENV_LINE" | sort)
  expect_eq "--nodes 2 with 5 ranks: block placement, 3+2" "$out" \
"0 5 0 3 0 0 $host-node0
1 5 1 3 0 0 $host-node0
2 5 2 3 0 0 $host-node0
3 5 0 2 1 1 $host-node1
4 5 1 2 1 1 $host-node1"
  out=$($RUN -n 5 --nodes 2 --placement cyclic --no-prefix sh -c "$ENV_LINE" | sort)
  expect_eq "--placement cyclic" "$out" \
"0 5 0 3 0 0 $host-node0
1 5 0 2 1 1 $host-node1
2 5 1 3 0 0 $host-node0
3 5 1 2 1 1 $host-node1
4 5 2 3 0 0 $host-node0"
  # 8 ranks on 3 nodes: 3, 3, 2.
  out=$($RUN -n 8 --nodes 3 --no-prefix sh -c 'echo $ZCOLL_HOSTID' | sort | uniq -c | awk '{print $1}' | tr '\n' ' ')
  expect_eq "--nodes 3 with 8 ranks spreads 3 3 2" "$out" "3 3 2 "
}

test_prefix() {
  local out
  out=$($RUN -n 2 sh -c 'echo "out $RANK"; echo "err $RANK" >&2; printf "partial $RANK"' 2>&1 | sort)
  expect_eq "rank prefixes on stdout, stderr and an unterminated line" "$out" \
"[0] err 0
[0] out 0
[0] partial 0
[1] err 1
[1] out 1
[1] partial 1"
  out=$($RUN -n 2 sh -c 'echo "err" >&2' 2>/dev/null)
  expect_eq "stderr stays on stderr" "$out" ""
  out=$($RUN -n 2 --no-prefix sh -c 'echo "line"')
  expect_eq "--no-prefix" "$out" "line
line"
  out=$($RUN -n 1 -x FOO=bar --env BAZ=q=x --no-prefix sh -c 'echo "$FOO $BAZ"')
  expect_eq "-x / --env" "$out" "bar q=x"
  out=$($RUN -n 1 --no-prefix -- sh -c 'echo "$#:$1:$2"' sh -n --nodes)
  expect_eq "arguments after PROGRAM are the program's" "$out" "2:-n:--nodes"
}

test_exit_codes() {
  local rc start elapsed out
  $RUN -n 3 sh -c 'exit 0'; expect_eq "all succeed -> 0" "$?" "0"
  $RUN -n 3 sh -c '[ "$RANK" = 2 ] && exit 7; exit 0' 2>/dev/null
  expect_eq "one rank fails -> its code" "$?" "7"
  # The first failure wins over later ones (rank 0 fails at once, rank 1 later).
  $RUN -n 2 sh -c 'if [ "$RANK" = 0 ]; then exit 5; fi; sleep 1; exit 9' 2>/dev/null
  expect_eq "first non-zero code is returned" "$?" "5"
  $RUN -n 2 sh -c '[ "$RANK" = 1 ] && kill -KILL $$; exit 0' 2>/dev/null
  expect_eq "rank killed by SIGKILL -> 137" "$?" "137"
  # When one rank fails the others are killed, well before their sleep ends.
  start=$(date +%s)
  out=$($RUN -n 3 sh -c 'if [ "$RANK" = 1 ]; then exit 3; fi; sleep 30; echo survived' 2>/dev/null)
  rc=$?
  elapsed=$(( $(date +%s) - start ))
  expect_eq "failure code with others killed" "$rc" "3"
  expect_eq "killed ranks did not finish" "$out" ""
  [ "$elapsed" -lt 15 ] && pass "others killed promptly (${elapsed}s)" || fail "took ${elapsed}s"
  # A rank that ignores SIGTERM is SIGKILLed after the grace period.
  start=$(date +%s)
  $RUN -n 2 sh -c 'trap "" TERM; if [ "$RANK" = 1 ]; then exit 4; fi; sleep 30' 2>/dev/null
  rc=$?; elapsed=$(( $(date +%s) - start ))
  expect_eq "rank ignoring SIGTERM: code of the failure" "$rc" "4"
  [ "$elapsed" -lt 15 ] && pass "SIGTERM-ignoring rank killed (${elapsed}s)" || fail "took ${elapsed}s"
  $RUN -n 2 --timeout 1 sleep 30 2>/dev/null
  expect_eq "--timeout -> 124" "$?" "124"
  $RUN -n 2 "$TMP/does-not-exist" 2>/dev/null
  expect_eq "missing program -> 127" "$?" "127"
}

test_usage_errors() {
  local args
  for args in "" "true" "-n" "-n 0 true" "-n x true" "-n 2" "-n 2 --nodes 3 true" \
              "-n 2 --placement foo true" "-n 2 --bogus true" "-n 2 --timeout -1 true" \
              "-n 2 -x NOEQUALS true" "-np" "-np 0 true" "-np x true"; do
    # shellcheck disable=SC2086
    $RUN $args >/dev/null 2>"$TMP/usage.err"
    expect_eq "usage error for '$args' -> 2" "$?" "2"
    grep -q "^zcollrun: " "$TMP/usage.err" || fail "no message for '$args'"
  done
  $RUN --help | grep -q "^usage: zcollrun" && pass "--help" || fail "--help"
}

# Starts a 2-rank job whose ranks record the signal they get, sends SIG to the launcher.
signal_case() {
  local sig=$1 dir="$TMP/sig.$1" pid i rc
  mkdir -p "$dir"
  $RUN -n 2 sh -c "trap 'touch $dir/got.\$RANK; exit 0' $sig; touch $dir/ready.\$RANK; \
                   sleep 30 & wait \$!" >/dev/null 2>&1 &
  pid=$!
  for i in $(seq 100); do
    [ -e "$dir/ready.0" ] && [ -e "$dir/ready.1" ] && break
    sleep 0.1
  done
  kill -"$sig" "$pid"
  wait "$pid"; rc=$?
  [ -e "$dir/got.0" ] && [ -e "$dir/got.1" ] && pass "$sig forwarded to every rank" \
    || fail "$sig not forwarded"
  expect_eq "$sig: exit code 128+signal" "$rc" "$(( 128 + $(kill -l "$sig") ))"
}

test_signals() {
  signal_case TERM
  signal_case INT
}

test_env_single_node
test_env_nodes
test_prefix
test_exit_codes
test_usage_errors
test_signals

if [ "$FAILED" != 0 ]; then echo "launcher tests FAILED"; exit 1; fi
echo "launcher tests passed"
