#!/usr/bin/env bash
# docs/MULTI_NODE.md, followed as written, on two "machines" that are network namespaces with
# their own hostname (UTS namespace), one interface zc0 each (10.78.X.1 and .2 on a bridge),
# egress rate-limited to 1 Gbit/s with tc. Each launcher style of the page starts 2 ranks per
# machine with the page's variables only (interface, UCX, rendezvous, token):
#   torchrun  real torchrun --nnodes 2 ... --no-python on each machine (skipped without it);
#   srun      SLURM_PROCID/SLURM_NTASKS + ZCOLL_COMM_ID, UCX's TCP ports pinned with
#             UCX_TCP_PORT_RANGE: every port zcoll's processes listen on (sampled with ss while
#             they run) is the rendezvous port or in that range: the page's "ports to open";
#   mpirun    OMPI_COMM_WORLD_RANK/SIZE + MASTER_ADDR/MASTER_PORT, as mpirun -x passes them.
# Each checks: `zcoll_info --routes` shows ucx ("another machine") to the other machine's ranks
# and shm to the own machine's; a 16 MiB all-gather is right (-c 1) and at least one rank's
# share of it crossed the link (zc0's tx bytes in each namespace); rank 0's rendezvous root
# listens on the address the page gives (the INFO line). Exit 77 (skipped) when namespaces cannot
# be created (not root, no netns support).
set -u
BUILD=${ZCOLL_BUILD_DIR:?}
INFO="$BUILD/tools/zcoll_info"
AG="$BUILD/perf/all_gather_perf"
[ -x "$INFO" ] && [ -x "$AG" ] || { echo "skipped: no $INFO or $AG"; exit 77; }

tag="zm$$"
net="10.78.$(( $$ % 200 ))"
A0="$net.1"  # machine 0's address: MASTER_ADDR / ZCOLL_COMM_ID's host
tmp=$(mktemp -d)
cleanup() {
  for k in 0 1; do ip netns del "${tag}n$k" 2>/dev/null; done
  ip link del "${tag}br" 2>/dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT
FAILED=0
fail() { echo "FAIL: $*"; FAILED=1; }
pass() { echo "ok: $*"; }

if [ "$(id -u)" != 0 ] || ! ip link add "${tag}br" type bridge 2>/dev/null; then
  echo "skipped: cannot create network devices here (needs root and network namespaces)"
  exit 77
fi
ip link set "${tag}br" up
for k in 0 1; do
  ns="${tag}n$k"
  ip netns add "$ns" || { echo "skipped: ip netns add failed"; exit 77; }
  ip link add "${tag}v$k" type veth peer name zc0 netns "$ns"
  ip link set "${tag}v$k" master "${tag}br" up
  ip -n "$ns" addr add "$net.$((k + 1))/24" dev zc0
  ip -n "$ns" link set zc0 up
  ip -n "$ns" link set lo up
  tc -n "$ns" qdisc add dev zc0 root tbf rate 1gbit burst 1mbit latency 100ms
done

# on_machine K CMD...: CMD on machine K, under its own hostname, with the page's interface
# settings in its environment (the rest comes from the caller's env).
on_machine() {
  local k=$1
  shift
  ip netns exec "${tag}n$k" unshare --uts sh -c 'hostname "$0" && exec "$@"' "${tag}-m$k" \
    env ZCOLL_SOCKET_IFNAME=zc0 UCX_NET_DEVICES=zc0 UCX_TLS=tcp "$@"
}
tx_bytes() { ip netns exec "${tag}n$1" cat /sys/class/net/zc0/statistics/tx_bytes; }

# check_routes LOG: every rank lists ucx (another machine) to the other machine's 2 ranks and
# shm to its neighbour; ranks 2r and 2r+1 share machine r.
check_routes() {
  local log=$1 style=$2 r p line want
  for r in 0 1 2 3; do
    for p in 0 1 2 3; do
      [ "$r" = "$p" ] && continue
      if [ $((r / 2)) = $((p / 2)) ]; then want="-> shm \(same node"; else
        want="-> ucx \(another machine"; fi
      line=$(grep -E "^\[?$r\]?:? *rank $p -> |^\[$r\]   rank $p -> " "$log" | head -1)
      printf '%s\n' "$line" | grep -Eq -e "$want" ||
        { fail "$style: rank $r -> rank $p: '$line' is not '$want'"; return; }
    done
  done
  pass "$style: zcoll_info --routes: ucx to the other machine's ranks, shm on the own"
}

# check_allgather LOG TX0 TX1 STYLE: right results, and at least one rank's share (8 MiB of the
# 16 MiB all-gather; the timed calls move several) left each machine over zc0.
check_allgather() {
  local log=$1 tx0=$2 tx1=$3 style=$4 k sent
  grep -q "Out of bounds values : 0 OK" "$log" || { fail "$style: all-gather results"; cat "$log"; }
  for k in 0 1; do
    [ "$k" = 0 ] && sent=$(( $(tx_bytes 0) - tx0 )) || sent=$(( $(tx_bytes 1) - tx1 ))
    [ "$sent" -ge $((8 << 20)) ] || fail "$style: machine $k sent only $sent bytes over zc0"
  done
  pass "$style: 16 MiB all-gather right across the link ($(( ($(tx_bytes 0) - tx0) >> 20 )) MiB and $(( ($(tx_bytes 1) - tx1) >> 20 )) MiB out of the machines)"
}

# ---- torchrun: torchrun --nnodes 2 --nproc-per-node 2 --node-rank K --master-addr A0 ... -----
run_torchrun() {  # run_torchrun LOG PROGRAM ARGS...
  local log=$1 port=$2
  shift 2
  for k in 0 1; do
    on_machine "$k" ZCOLL_DEBUG=INFO ZCOLL_DEBUG_SUBSYS=BOOTSTRAP,INIT \
      timeout 120 torchrun --nnodes 2 --nproc-per-node 2 --node-rank "$k" \
      --master-addr "$A0" --master-port "$port" --no-python "$@" >"$log.$k" 2>&1 &
  done
  wait
  cat "$log.0" "$log.1" >"$log"
}
if command -v torchrun >/dev/null; then
  port=$((21000 + RANDOM % 10000))
  # torchrun prefixes nothing: the program's own "rank R of 4" header names the rank.
  run_torchrun "$tmp/t_routes" "$port" "$INFO" --routes
  # Rewrite each rank's lines "[R]   rank P -> ..." from its header for check_routes.
  awk '/^rank [0-9]+ of/{r=$2} /^  rank [0-9]+ -> /{print "[" r "]" $0}' "$tmp/t_routes" \
    >"$tmp/t_routes.ranked"
  check_routes "$tmp/t_routes.ranked" torchrun
  grep -q "rendezvous root listening on $A0:$((port + 1))" "$tmp/t_routes" ||
    fail "torchrun: the root did not listen on MASTER_ADDR:MASTER_PORT+1 ($A0:$((port + 1)))"
  t0=$(tx_bytes 0) t1=$(tx_bytes 1)
  port=$((port + 2))
  run_torchrun "$tmp/t_ag" "$port" "$AG" -b 16M -e 16M -n 2 -w 1 -c 1
  check_allgather "$tmp/t_ag" "$t0" "$t1" torchrun
else
  echo "skipped: torchrun style (no torchrun on PATH)"
fi

# ---- srun: SLURM_PROCID/SLURM_NTASKS, ZCOLL_COMM_ID, token, UCX ports pinned ------------------
# run_ranks LOG STYLE_ENV_FN PROGRAM ARGS...: 4 ranks, 2 per machine; STYLE_ENV_FN R prints the
# rank's launcher variables.
run_ranks() {
  local log=$1 envfn=$2 r
  shift 2
  for r in 0 1 2 3; do
    # shellcheck disable=SC2046
    on_machine $((r / 2)) $($envfn "$r") ZCOLL_DEBUG=INFO ZCOLL_DEBUG_SUBSYS=BOOTSTRAP,INIT \
      timeout 120 "$@" 2>&1 | sed -u "s/^/[$r] /" >"$log.$r" &
  done
  wait
  cat "$log".[0-3] >"$log"
}
slurm_port=$((31000 + RANDOM % 1000))
ucx_lo=$((33000 + RANDOM % 1000))
ucx_hi=$((ucx_lo + 99))
token=$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')
slurm_env() {
  echo SLURM_PROCID="$1" SLURM_NTASKS=4 SLURM_LOCALID=$(($1 % 2)) \
    ZCOLL_COMM_ID="$A0:$slurm_port" ZCOLL_AUTH_TOKEN="$token" UCX_TCP_PORT_RANGE="$ucx_lo-$ucx_hi"
}
run_ranks "$tmp/s_routes" slurm_env "$INFO" --routes
check_routes "$tmp/s_routes" srun
grep -q "^\[0\] .*rendezvous root listening on $A0:$slurm_port" "$tmp/s_routes" ||
  fail "srun: the root did not listen on ZCOLL_COMM_ID ($A0:$slurm_port)"
# The ports: sample both machines' listening TCP sockets while a longer all-gather runs.
(
  for _ in $(seq 1 100); do
    for k in 0 1; do ip netns exec "${tag}n$k" ss -Htlnp 2>/dev/null; done
    sleep 0.05
  done
) >"$tmp/ss" &
sampler=$!
t0=$(tx_bytes 0) t1=$(tx_bytes 1)
slurm_port=$((slurm_port + 1))
run_ranks "$tmp/s_ag" slurm_env "$AG" -b 16M -e 16M -n 10 -w 1 -c 1
kill "$sampler" 2>/dev/null
wait "$sampler" 2>/dev/null
check_allgather "$tmp/s_ag" "$t0" "$t1" srun
listened=$(grep -E '"(all_gather_perf|zcoll_info)"' "$tmp/ss" | awk '{print $4}' | sed 's/.*://' | sort -un)
if [ -z "$listened" ]; then
  fail "srun: no listening socket of the ranks seen (sampling too slow?)"
else
  bad=""
  for p in $listened; do
    if [ "$p" != "$slurm_port" ] && { [ "$p" -lt "$ucx_lo" ] || [ "$p" -gt "$ucx_hi" ]; }; then
      bad="$bad $p"
    fi
  done
  [ -z "$bad" ] && pass "srun: the ranks listened only on the rendezvous port and UCX_TCP_PORT_RANGE ($(echo $listened))" ||
    fail "srun: ports outside the rendezvous port $slurm_port and $ucx_lo-$ucx_hi:$bad"
fi
# A rank with another token is refused, and does not hold the others up.
bad_token_env() { slurm_env "$1" | sed "s/ZCOLL_AUTH_TOKEN=[^ ]*/ZCOLL_AUTH_TOKEN=$([ "$1" = 3 ] && echo wrong || echo "$token")/"; }
slurm_port=$((slurm_port + 1))
ZCOLL_TIMEOUT=15 run_ranks "$tmp/s_tok" bad_token_env "$INFO" --routes
grep -q "^\[3\] routes: init from the environment failed" "$tmp/s_tok" ||
  fail "srun: a rank with another ZCOLL_AUTH_TOKEN was not refused"
[ $FAILED = 0 ] && pass "srun: a rank with another ZCOLL_AUTH_TOKEN is refused"

# ---- mpirun: OMPI_COMM_WORLD_RANK/SIZE with -x MASTER_ADDR -x MASTER_PORT ---------------------
mpi_port=$((35000 + RANDOM % 1000))
mpi_env() {
  echo OMPI_COMM_WORLD_RANK="$1" OMPI_COMM_WORLD_SIZE=4 OMPI_COMM_WORLD_LOCAL_RANK=$(($1 % 2)) \
    MASTER_ADDR="$A0" MASTER_PORT="$mpi_port"
}
run_ranks "$tmp/m_routes" mpi_env "$INFO" --routes
check_routes "$tmp/m_routes" mpirun
grep -q "^\[0\] .*rendezvous root listening on $A0:$((mpi_port + 1))" "$tmp/m_routes" ||
  fail "mpirun: the root did not listen on MASTER_ADDR:MASTER_PORT+1"
t0=$(tx_bytes 0) t1=$(tx_bytes 1)
mpi_port=$((mpi_port + 2))
run_ranks "$tmp/m_ag" mpi_env "$AG" -b 16M -e 16M -n 2 -w 1 -c 1
check_allgather "$tmp/m_ag" "$t0" "$t1" mpirun

if [ "$FAILED" != 0 ]; then echo "multi-node tests FAILED"; exit 1; fi
echo "multi-node tests passed"
