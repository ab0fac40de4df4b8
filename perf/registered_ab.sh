#!/usr/bin/env bash
# Registered host buffers (zcollMemAllocHost, -R 1), before/after in one sitting: all-gather at
# 2 and 4 ranks (1-64 MiB total) and all-reduce at 2 ranks (4-64 MiB), the two builds
# interleaved ROUNDS times. Prints the median time (us) of each side, out of place and in
# place, and A/B (above 1: B is faster) with its range over the rounds.
#
#   perf/registered_ab.sh BUILD_A BUILD_B [ROUNDS]     e.g. a build of an older commit vs build/
set -euo pipefail
cd "$(dirname "$0")/.."
A=${1:?usage: $0 BUILD_A BUILD_B [ROUNDS]}
B=${2:?usage: $0 BUILD_A BUILD_B [ROUNDS]}
ROUNDS=${3:-5}
export UCX_NET_DEVICES=lo ZCOLL_SOCKET_IFNAME=lo
rows=$(mktemp)
trap 'rm -f "$rows"' EXIT

# times NAME BUILD RANKS BINARY FROM TO -> "NAME side P size oop_us inplace_us" per size
times() {
  tools/zcollrun -n "$3" "$2/perf/$4" -b "$5" -e "$6" -f 4 -n 10 -w 3 -d float -c 0 -R 1 \
      2>/dev/null | awk -v c="$1" -v s="$7" -v n="$3" '/^\[0\] +[0-9]/ {print c, s, n, $2, $7, $11}'
}
for _ in $(seq "$ROUNDS"); do
  for side in A B; do
    build=$A; [ "$side" = B ] && build=$B
    times all_gather "$build" 2 all_gather_perf 1M 64M "$side" >> "$rows"
    times all_gather "$build" 4 all_gather_perf 1M 64M "$side" >> "$rows"
    times all_reduce "$build" 2 all_reduce_perf 4M 64M "$side" >> "$rows"
  done
done
python3 - "$rows" <<'PY'
import collections, statistics, sys
runs = collections.defaultdict(list)
for line in open(sys.argv[1]):
    coll, side, p, size, oop, inp = line.split()
    runs[(coll, int(p), int(size), side)].append((float(oop), float(inp)))
print("| collective | ranks | bytes | A out/in (us) | B out/in (us) | A/B out of place | A/B in place |")
print("|---|---|---|---|---|---|---|")
for coll, p, size in sorted({k[:3] for k in runs}):
    a, b = runs[(coll, p, size, "A")], runs[(coll, p, size, "B")]
    med = lambda xs, i: statistics.median(x[i] for x in xs)
    cells = []
    for i in (0, 1):
        ratios = [x[i] / y[i] for x, y in zip(a, b)]
        cells.append("%.2fx (%.2f-%.2f)" % (med(a, i) / med(b, i), min(ratios), max(ratios)))
    print("| %s | %d | %d MiB | %.0f / %.0f | %.0f / %.0f | %s | %s |" % (
        coll, p, size >> 20, med(a, 0), med(a, 1), med(b, 0), med(b, 1), *cells))
PY
