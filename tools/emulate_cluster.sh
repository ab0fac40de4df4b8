#!/usr/bin/env bash
# Runs a zcoll program on emulated nodes that are real network hosts: each node is a network
# namespace with its own hostname (UTS namespace) and one interface, zc0, on a shared bridge,
# its egress limited with tc (token bucket) to --rate. Ranks of a node share memory; traffic
# between nodes crosses the rate-limited link over TCP (zcoll asks UCX for peer-failure
# handling between different machines, which shared-memory transports cannot give). Needs root.
#
#   tools/emulate_cluster.sh [--nodes N] [--ranks-per-node L] [--rate 1gbit] [--keep] -- PROGRAM ARGS
#
# Ranks are numbered node by node; each gets RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE and
# ZCOLL_COMM_ID (node 0's address). Output lines are prefixed with [rank]. Exit code: the first
# non-zero rank exit code, else 0. 77 when this machine cannot create namespaces.
set -uo pipefail
nodes=2 per=2 rate=1gbit keep=0
while [ $# -gt 0 ]; do
  case "$1" in
    --nodes) nodes=$2; shift 2 ;;
    --ranks-per-node) per=$2; shift 2 ;;
    --rate) rate=$2; shift 2 ;;
    --keep) keep=1; shift ;;
    --) shift; break ;;
    *) break ;;
  esac
done
[ $# -gt 0 ] || { echo "usage: $0 [--nodes N] [--ranks-per-node L] [--rate R] -- PROGRAM ARGS" >&2; exit 2; }
prog=$(realpath "$1"); shift

tag="zc$$"
bridge="${tag}br"
cleanup() {
  [ "$keep" = 1 ] && return
  for ((k = 0; k < nodes; k++)); do ip netns del "${tag}n$k" 2>/dev/null; done
  ip link del "$bridge" 2>/dev/null
  rm -rf "$tmp"
}
tmp=$(mktemp -d)
trap cleanup EXIT

if ! ip link add "$bridge" type bridge 2>/dev/null; then
  echo "emulate_cluster: cannot create network devices here (need root and netns support)" >&2
  exit 77
fi
ip link set "$bridge" up
for ((k = 0; k < nodes; k++)); do
  ns="${tag}n$k"
  ip netns add "$ns"
  ip link add "${tag}v$k" type veth peer name zc0 netns "$ns"
  ip link set "${tag}v$k" master "$bridge" up
  ip -n "$ns" addr add "10.77.$(( $$ % 200 )).$((k + 1))/24" dev zc0
  ip -n "$ns" link set zc0 up
  ip -n "$ns" link set lo up
  tc -n "$ns" qdisc add dev zc0 root tbf rate "$rate" burst 1mbit latency 100ms
done

world=$((nodes * per))
port=$((20000 + RANDOM % 20000))
root="10.77.$(( $$ % 200 )).1:$port"
pids=()
for ((r = 0; r < world; r++)); do
  k=$((r / per))
  (
    ip netns exec "${tag}n$k" unshare --uts sh -c 'hostname "$0" && exec "$@"' \
      "${tag}-node$k" env RANK=$r WORLD_SIZE=$world LOCAL_RANK=$((r % per)) \
      LOCAL_WORLD_SIZE=$per ZCOLL_COMM_ID="$root" ZCOLL_SOCKET_IFNAME=zc0 UCX_NET_DEVICES=zc0 \
      "$prog" "$@" 2>&1
    echo $? >"$tmp/rc.$r"
  ) | sed -u "s/^/[$r] /" &
  pids+=($!)
done
wait "${pids[@]}"
status=0
for ((r = 0; r < world; r++)); do
  rc=$(cat "$tmp/rc.$r" 2>/dev/null || echo 1)
  if [ "$rc" != 0 ] && [ "$status" = 0 ]; then status=$rc; fi
done
exit "$status"
