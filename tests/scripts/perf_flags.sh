# The perf binaries take nccl-tests' flags with nccl-tests' meaning (perf/README.md): -g 1, -t 1,
# -a, -m, -z, -p, -T, -C, -N and -G 0 run; -g/-t other than 1 and -G above 0 are refused with a
# reason (device buffers are --device 1); -J writes the results as JSON or CSV; -h lists the
# quantized binaries' own flags; zero_step_perf reports progress on stderr.
set -u

BUILD=${ZCOLL_BUILD_DIR:?ZCOLL_BUILD_DIR must name the build directory}
SRC=${ZCOLL_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
RUN="python3 $SRC/tools/zcollrun --timeout 120"
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
FAILED=0
fail() { echo "FAIL: $*"; FAILED=1; }

AG=$BUILD/perf/all_gather_perf
if [ ! -x "$AG" ]; then
  echo "no perf binaries in $BUILD/perf (ZCOLL_BUILD_PERF=OFF?): skipped"
  exit 77
fi

# refused FLAGS... NEEDLE: exit 2 before any rank starts, with NEEDLE on stderr.
refused() {
  local needle=${!#}
  local args=("${@:1:$#-1}")
  "$AG" "${args[@]}" >"$TMP/out" 2>"$TMP/err"
  local rc=$?
  if [ $rc = 2 ] && grep -qF -- "$needle" "$TMP/err"; then echo "ok: ${args[*]} refused"
  else fail "${args[*]}: exit $rc, wanted 2 and '$needle'"; cat "$TMP/err"
  fi
}
refused -g 2 "one device per rank"
refused -t 4 "one rank per process"
refused -G 1 "for device buffers use --device 1"
refused -a 4 "bad value '4' for -a"
refused --output-format xml "bad value 'xml' for --output-format"

# -h: nccl-tests' flags, --device, and the quantized binaries' own.
"$AG" -h >"$TMP/help" 2>&1
for flag in -g -t -a -m -z -p -T -C -N -G -J --output-format --device -R; do
  grep -q -- "^  $flag[ ,]" "$TMP/help" || fail "all_gather_perf -h does not list $flag"
done
check_help() {
  local bin=$BUILD/perf/$1; shift
  [ -x "$bin" ] || return
  "$bin" -h >"$TMP/help.q" 2>&1 || fail "$(basename "$bin") -h exited non-zero"
  for flag in "$@"; do
    grep -q -- "^  $flag " "$TMP/help.q" || fail "$(basename "$bin") -h does not list $flag"
  done
}
check_help quantized_all_gather_perf --bits --block --asym --stochastic
check_help hier_all_gather_perf --bits --block --asym --stochastic --from-secondary
check_help quantized_reduce_scatter_perf --bits --intra-bits --block --asym --stochastic --depth
echo "ok: -h lists the flags"

# Every accepted nccl-tests flag at once, two cycles, JSON out; then CSV.
NCCL_FLAGS="-g 1 -t 1 -a 1 -m 2 -z 1 -p 1 -T 60 -C 1 -N 2 -G 0"
if $RUN -n 2 -- "$AG" -b 1K -e 4K -f 4 -n 2 -w 1 $NCCL_FLAGS -J "$TMP/r.json" >"$TMP/run.log" 2>&1 \
   && grep -q "Out of bounds values : 0 OK" "$TMP/run.log"; then
  if python3 - "$TMP/r.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
rows = d["results"]
assert d["benchmark"] == "all_gather_perf" and d["nranks"] == 2, d
assert d["agg_iters"] == 2 and d["average"] == 1 and d["time"] == "cpu", d
assert [r["size"] for r in rows] == [1024, 4096, 1024, 4096], rows
assert [r["cycle"] for r in rows] == [0, 0, 1, 1], rows
for r in rows:
    for mode in ("out_of_place", "in_place"):
        m = r[mode]
        assert m["wrong"] == 0 and m["time_us"] >= 0 and m["busbw_GBps"] >= 0, r
PY
  then echo "ok: nccl-tests flags run; -J writes JSON"
  else fail "-J JSON"; cat "$TMP/r.json"
  fi
else
  fail "all_gather_perf $NCCL_FLAGS"; cat "$TMP/run.log"
fi
if $RUN -n 2 -- "$AG" -b 1K -e 1K -n 1 -w 0 -J "$TMP/r.csv" >"$TMP/csv.log" 2>&1 \
   && head -n 1 "$TMP/r.csv" | grep -q "^cycle,size,count,type,redop,root,mode,time_us,algbw_GBps,busbw_GBps,wrong$" \
   && [ "$(wc -l <"$TMP/r.csv")" = 3 ] && grep -q "^0,1024,128,float,none,-1,in_place," "$TMP/r.csv"; then
  echo "ok: -J FILE.csv writes CSV"
else
  fail "-J CSV"; cat "$TMP/csv.log" "$TMP/r.csv"
fi
QAG=$BUILD/perf/quantized_all_gather_perf
if [ -x "$QAG" ]; then
  if $RUN -n 2 -- "$QAG" -b 4K -e 4K -n 1 -w 0 -J "$TMP/q.out" --output-format csv >"$TMP/q.log" 2>&1 \
     && head -n 1 "$TMP/q.out" | grep -q ",wire_bytes,inter_bytes,maxerr$"; then
    echo "ok: --output-format csv, with the extra columns"
  else
    fail "quantized_all_gather_perf --output-format csv"; cat "$TMP/q.log" "$TMP/q.out"
  fi
fi

# zero_step_perf: --progress 0 reports every step on stderr (rank 0 only); -G 1 is refused.
ZS=$BUILD/perf/zero_step_perf
if [ -x "$ZS" ]; then
  if $RUN --no-prefix -n 2 -- "$ZS" -p 16K -n 2 -w 1 --progress 0 -G 0 >"$TMP/zs.out" 2>"$TMP/zs.err" \
     && [ "$(grep -c "^zero_step_perf: step [0-9]* of 6 done" "$TMP/zs.err")" = 6 ] \
     && ! grep -q "zero_step_perf: step" "$TMP/zs.out" && tail -n 1 "$TMP/zs.out" | grep -q zero_step; then
    echo "ok: zero_step_perf --progress 0"
  else
    fail "zero_step_perf --progress"; cat "$TMP/zs.out" "$TMP/zs.err"
  fi
  "$ZS" -G 1 >"$TMP/zs.g" 2>&1
  rc=$?
  if [ $rc = 2 ] && grep -q -- "--device 1" "$TMP/zs.g"; then echo "ok: zero_step_perf -G 1 refused"
  else fail "zero_step_perf -G 1: exit $rc"; cat "$TMP/zs.g"
  fi
fi

if [ "$FAILED" != 0 ]; then echo "perf flag tests FAILED"; exit 1; fi
echo "perf flag tests passed"
