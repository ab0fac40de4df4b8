#!/usr/bin/env bash
# The header of a 16-bit run of all_reduce_perf / reduce_scatter_perf names the partials mode
# (ZCOLL_REDUCE_PARTIALS) and how to get NCCL's arithmetic; other dtypes and the quantized
# reduce-scatter (which never carries 16-bit partials) print no such line.
set -euo pipefail
perf="$ZCOLL_BUILD_DIR/perf"
[ -x "$perf/all_reduce_perf" ] || { echo "SKIP: perf binaries not built"; exit 77; }
run() { python3 "$ZCOLL_SOURCE_DIR/tools/zcollrun" -n 2 --no-prefix "$@" -b 64K -e 64K -n 1 -w 0; }
expect_line() {  # expect_line WANTED_REGEX COMMAND...
  local want=$1; shift
  local got
  got=$("$@" | grep "^# 16-bit partials" || true)
  if ! [[ "$got" =~ $want ]]; then
    echo "FAIL: $* printed '${got}', wanted /$want/"; exit 1
  fi
}
for b in all_reduce_perf reduce_scatter_perf; do
  expect_line '^# 16-bit partials: fp32 \(ZCOLL_REDUCE_PARTIALS=fp32.*=dtype .*NCCL-comparable busbw\)$' \
    run "$perf/$b" -d bfloat16
  expect_line '^# 16-bit partials: dtype \(ZCOLL_REDUCE_PARTIALS=dtype' \
    env ZCOLL_REDUCE_PARTIALS=dtype python3 "$ZCOLL_SOURCE_DIR/tools/zcollrun" -n 2 --no-prefix \
    "$perf/$b" -d half -b 64K -e 64K -n 1 -w 0
  expect_line '^$' run "$perf/$b" -d float
done
expect_line '^$' run "$perf/quantized_reduce_scatter_perf" -d bfloat16
echo "OK: 16-bit partials line in the headers of all_reduce_perf and reduce_scatter_perf only"
