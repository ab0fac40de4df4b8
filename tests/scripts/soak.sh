#!/usr/bin/env bash
# Soak: RUNS runs of OPS mixed collectives (standard and ZeRO++, random counts, in and out of
# place, 1 or 2 emulated nodes) on 4 rank processes; every other run kills a random rank at a
# random op. Passes when no run hangs or gives a wrong result, clean runs succeed on every
# rank, and in killed runs every survivor fails with zcollRemoteError within 1 s of the kill
# (ZCOLL_TIMEOUT is 60 s). Prints the figures: runs, ops, kills, max time-to-error.
#   usage: soak.sh [RUNS] [OPS] [SEED]   (the suite runs the defaults: 6 runs of 300 ops)
set -uo pipefail
runs=${1:-6}
ops=${2:-300}
seed=${3:-$RANDOM}
build=${ZCOLL_BUILD_DIR:-build}
prog=$build/tests/zcoll_soak
n=4
export ZCOLL_SOCKET_IFNAME=lo UCX_NET_DEVICES=lo ZCOLL_TIMEOUT=60
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
fail=0 kills=0 total_ops=0 max_ms=0
echo "soak: $runs runs of $ops ops on $n ranks, seed $seed"
for ((run = 0; run < runs; ++run)); do
  s=$((seed + run))
  nodes=$((1 + (run / 2) % 2))
  args=("$ops" "$s")
  victim=-1
  if ((run % 2 == 1)); then
    victim=$((RANDOM % n)); at=$((RANDOM % ops)); args+=("$victim" "$at"); kills=$((kills + 1))
  fi
  port=$(free_port)
  pids=()
  for ((r = 0; r < n; ++r)); do
    RANK=$r WORLD_SIZE=$n ZCOLL_COMM_ID=127.0.0.1:$port ZCOLL_HOSTID=node$((r * nodes / n)) \
      timeout 120 "$prog" "${args[@]}" > "$tmp/$run.$r" 2>&1 &
    pids+=($!)
  done
  codes=()
  for ((r = 0; r < n; ++r)); do wait "${pids[r]}"; codes+=($?); done
  if ((victim < 0)); then
    for ((r = 0; r < n; ++r)); do
      if ((codes[r] != 0)); then
        echo "run $run: rank $r exit ${codes[r]}"; grep soak: "$tmp/$run.$r"; fail=1
      fi
    done
    total_ops=$((total_ops + ops))
    continue
  fi
  killed_at=$(sed -n 's/.*killed at op \([0-9]*\) at \([0-9.]*\) ms.*/\2/p' "$tmp/$run.$victim")
  total_ops=$((total_ops + at))
  echo "run $run: rank $victim killed at op $at (nodes $nodes)"
  for ((r = 0; r < n; ++r)); do
    ((r == victim)) && { ((codes[r] == 137)) || { echo "victim exit ${codes[r]}"; fail=1; }; continue; }
    line=$(grep "soak: rank $r error" "$tmp/$run.$r")
    if ((codes[r] != 3)) || [[ -z $line || -z $killed_at ]]; then
      echo "run $run: rank $r exit ${codes[r]}: $(grep soak: "$tmp/$run.$r")"; fail=1; continue
    fi
    err_at=$(sed -n 's/.* at \([0-9.]*\) ms: .*/\1/p' <<< "$line")
    ms=$(python3 -c "print(max(0.0, $err_at - $killed_at))")
    echo "  rank $r: zcollRemoteError $ms ms after the kill"
    max_ms=$(python3 -c "print(max($max_ms, $ms))")
    python3 -c "import sys; sys.exit(0 if $ms < 1000 else 1)" || { echo "  too slow"; fail=1; }
  done
done
echo "soak figures: runs $runs, ops $total_ops, kills $kills, max time-to-error ${max_ms} ms"
exit $fail
