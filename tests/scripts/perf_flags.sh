# The perf binaries take nccl-tests' flags with nccl-tests' meaning (perf/README.md): -g 1, -t 1,
# -a, -m, -z, -p, -T, -C, -N and -G 0 run; -g/-t other than 1 and -G above 0 are refused with a
# reason (device buffers are --device 1); -J writes the results as JSON or CSV; -h lists the
# quantized binaries' own flags; zero_step_perf reports progress on stderr.
# -d all / -o all / -r all run one sweep per type, op or root (the binary's own lists), -c N runs
# N checked calls, -y 0|1 is taken; a value a binary does not take (-d int32 for qwZ, -o max for
# qgZ, --bits 3, --block 100, ...) is a usage error (exit 2) naming it and the accepted values,
# before any rank starts.
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

# refused_by BINARY FLAGS... NEEDLE: exit 2 before any rank starts (run without a launcher, nothing
# on stdout), with NEEDLE on stderr.
refused_by() {
  local bin=$BUILD/perf/$1; shift
  local needle=${!#}
  local args=("${@:1:$#-1}")
  [ -x "$bin" ] || return
  "$bin" "${args[@]}" >"$TMP/out" 2>"$TMP/err"
  local rc=$?
  if [ $rc = 2 ] && grep -qF -- "$needle" "$TMP/err" && [ ! -s "$TMP/out" ]; then
    echo "ok: $(basename "$bin") ${args[*]} refused"
  else fail "$(basename "$bin") ${args[*]}: exit $rc, wanted 2 and '$needle'"; cat "$TMP/out" "$TMP/err"
  fi
}
refused() { refused_by all_gather_perf "$@"; }
refused -g 2 "one device per rank"
refused -t 4 "one rank per process"
refused -G 1 "for device buffers use --device 1"
refused -a 4 "bad value '4' for -a"
refused --output-format xml "bad value 'xml' for --output-format"
TYPES="int8, uint8, int32, uint32, int64, uint64, half, float, double, bfloat16 or all"
refused -d int4 "all_gather_perf: bad value 'int4' for -d: takes $TYPES"
refused_by all_reduce_perf -o xor "bad value 'xor' for -o: takes sum, prod, max, min, avg or all"
refused_by broadcast_perf -r first "bad value 'first' for -r: takes a rank (0 or more) or all"
refused -c -1 "bad value '-1' for -c: takes a count of checked calls (0: no check)"
refused -y 2 "bad value '2' for -y"
QTYPES="float, half, bfloat16 or all"
refused_by quantized_all_gather_perf -d int32 "-d int32: quantized_all_gather takes $QTYPES"
refused_by quantized_all_gather_perf --bits 3 "quantized_all_gather_perf: --bits 3: takes 4 or 8"
refused_by quantized_all_gather_perf --bits 0 "--bits 0: takes 4 or 8"
refused_by quantized_all_gather_perf --bits "--bits (nothing): takes 4 or 8"
refused_by quantized_all_gather_perf --block 100 \
  "--block 100: takes 0 (the default, 256) or a multiple of 32 in [32, 4096]"
refused_by quantized_all_gather_perf --block 8192 "--block 8192: takes 0 (the default, 256)"
refused_by hier_all_gather_perf --bits 3 "--bits 3: takes 0 (exact), 4 or 8"
refused_by hier_all_gather_perf -d int64 "-d int64: hier_all_gather takes $QTYPES"
refused_by quantized_reduce_scatter_perf -o max "-o max: quantized_reduce_scatter takes sum, avg or all"
refused_by quantized_reduce_scatter_perf -d double "-d double: quantized_reduce_scatter takes $QTYPES"
refused_by quantized_reduce_scatter_perf --bits 16 "--bits 16: takes 4 or 8"
refused_by quantized_reduce_scatter_perf --intra-bits 2 "--intra-bits 2: takes 4, 8 or 16"
refused_by quantized_reduce_scatter_perf --intra-bits 12 "--intra-bits 12: takes 4, 8 or 16"
refused_by all_reduce_perf --intra-bits 12 "--intra-bits 12: takes 4, 8 or 16"
refused_by quantized_reduce_scatter_perf --depth 65 "--depth 65: takes 0 (the library's default) to 64"
refused_by quantized_reduce_scatter_perf --depth x "--depth x: takes 0 (the library's default) to 64"

# -h: nccl-tests' flags, --device, and the quantized binaries' own.
"$AG" -h >"$TMP/help" 2>&1
for flag in -c -d -o -r -y -g -t -a -m -z -p -T -C -N -G -J --output-format --device -R; do
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

# -d all -o all: one sweep per type and op (10 x 5), each row checked twice (-c 2) and right.
AR=$BUILD/perf/all_reduce_perf
if $RUN -n 2 -- "$AR" -b 64 -e 64 -n 1 -w 0 -d all -o all -c 2 -y 0 -J "$TMP/all.json" \
     >"$TMP/all.log" 2>&1 && grep -q "validation: 2 " "$TMP/all.log" \
   && python3 - "$TMP/all.json" <<'PY'
import json, sys
rows = json.load(open(sys.argv[1]))["results"]
types = ["int8", "uint8", "int32", "uint32", "int64", "uint64", "half", "float", "double", "bfloat16"]
ops = ["sum", "prod", "max", "min", "avg"]
assert [(r["type"], r["redop"]) for r in rows] == [(t, o) for t in types for o in ops], rows
assert all(r[m]["wrong"] == 0 for r in rows for m in ("out_of_place", "in_place")), rows
PY
then echo "ok: all_reduce_perf -d all -o all -c 2: 50 sweeps, nccl-tests' order"
else fail "all_reduce_perf -d all -o all"; cat "$TMP/all.log"
fi

# -r all: one sweep per rank as root; -C 1 titles the time columns "cputime" (nccl-tests' label).
BC=$BUILD/perf/broadcast_perf
if $RUN --no-prefix -n 2 -- "$BC" -b 64 -e 64 -n 1 -w 0 -r all -C 1 >"$TMP/root.log" 2>&1 \
   && [ "$(awk '/^ *[0-9]/ {print $5}' "$TMP/root.log" | tr '\n' ' ')" = "0 1 " ] \
   && grep -q "^# *size *count *type *redop *root *cputime *algbw *busbw *#wrong *cputime" "$TMP/root.log"; then
  echo "ok: broadcast_perf -r all runs roots 0 and 1; -C 1 titles cputime"
else
  fail "broadcast_perf -r all -C 1"; cat "$TMP/root.log"
fi

# -c N: N checked calls per size and mode. A rank that spoils one value per checked call
# (--test-corrupt) makes #wrong read N in each mode; -c 0 reads N/A.
$RUN --no-prefix -n 2 -- "$AG" -b 1K -e 1K -n 1 -w 0 -c 3 --test-corrupt 1 >"$TMP/c3.log" 2>&1
if [ "$(awk '/^ *[0-9]/ {print $9, $13}' "$TMP/c3.log")" = "3 3" ] \
   && grep -q "Out of bounds values : 6 FAILED" "$TMP/c3.log"; then
  echo "ok: -c 3 checks three calls"
else
  fail "-c 3"; cat "$TMP/c3.log"
fi
if $RUN --no-prefix -n 2 -- "$AG" -b 1K -e 1K -n 1 -w 0 -c 0 -y 1 >"$TMP/c0.log" 2>&1 \
   && [ "$(awk '/^ *[0-9]/ {print $9, $13}' "$TMP/c0.log")" = "N/A N/A" ]; then
  echo "ok: -c 0 checks nothing; -y 1 is taken (host buffers take no stream)"
else
  fail "-c 0 -y 1"; cat "$TMP/c0.log"
fi

# all_reduce_perf --wire: the exact mode adds wire, inter, maxerr and same; `same` reads yes when
# every rank's checked output held the same bits, no (and one more wrong value) when one rank's
# differs (--test-corrupt 1 spoils one value of rank 1's output before the check).
if $RUN --no-prefix -n 2 -- "$AR" -b 1K -e 1K -n 1 -w 0 --wire >"$TMP/same.log" 2>&1 \
   && [ "$(awk '/^ *[0-9]/ {print $9, $13, $17, $21}' "$TMP/same.log")" = "0 yes 0 yes" ] \
   && ! $RUN --no-prefix -n 2 -- "$AR" -b 1K -e 1K -n 1 -w 0 --wire --test-corrupt 1 \
        >"$TMP/differ.log" 2>&1 \
   && [ "$(awk '/^ *[0-9]/ {print $9, $13, $17, $21}' "$TMP/differ.log")" = "2 no 2 no" ]; then
  echo "ok: all_reduce_perf --wire: same reads yes, and no when one rank's output differs"
else
  fail "all_reduce_perf --wire same"; cat "$TMP/same.log" "$TMP/differ.log"
fi

# The quantized binaries' "all": the types (and qgZ's ops) they take; hpZ exact takes any type.
QRS=$BUILD/perf/quantized_reduce_scatter_perf
if [ -x "$QRS" ]; then
  if $RUN --no-prefix -n 2 -- "$QRS" -b 4K -e 4K -n 1 -w 0 -d all -o all >"$TMP/qrs.log" 2>&1 \
     && [ "$(awk '/^ *[0-9]/ {printf "%s/%s/%s ", $3, $4, $9}' "$TMP/qrs.log")" = \
          "float/sum/0 float/avg/0 half/sum/0 half/avg/0 bfloat16/sum/0 bfloat16/avg/0 " ]; then
    echo "ok: quantized_reduce_scatter_perf -d all -o all"
  else
    fail "quantized_reduce_scatter_perf -d all -o all"; cat "$TMP/qrs.log"
  fi
fi
HAG=$BUILD/perf/hier_all_gather_perf
if [ -x "$HAG" ]; then
  if $RUN --no-prefix -n 2 -- "$HAG" -b 4K -e 4K -n 1 -w 0 --bits 0 -d int64 >"$TMP/hag.log" 2>&1 \
     && [ "$(awk '/^ *[0-9]/ {print $3, $9, $16}' "$TMP/hag.log")" = "int64 0 0" ]; then
    echo "ok: hier_all_gather_perf --bits 0 -d int64 (exact: any type)"
  else
    fail "hier_all_gather_perf --bits 0 -d int64"; cat "$TMP/hag.log"
  fi
fi

if [ "$FAILED" != 0 ]; then echo "perf flag tests FAILED"; exit 1; fi
echo "perf flag tests passed"
