# Smoke test of the perf binaries: each *_perf under tools/zcollrun with 2 ranks and with 4 ranks
# on 2 emulated nodes, tiny sizes, validation on. Every row must show #wrong 0 and the run must
# exit 0; a run told to spoil one value (--test-corrupt) must exit non-zero and say FAILED.
# Each binary with --device 1 (device buffers): passes on a GPU, fails cleanly without one.
# Also starts ranks the way Open MPI's mpirun would (OMPI_COMM_WORLD_* + MASTER_ADDR/PORT).
set -u

BUILD=${ZCOLL_BUILD_DIR:?ZCOLL_BUILD_DIR must name the build directory}
SRC=${ZCOLL_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
RUN="python3 $SRC/tools/zcollrun --timeout 240"
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
FAILED=0
SIZES="-b 8 -e 256K -f 8 -n 2 -w 1 -c 1"

shopt -s nullglob
BINS=("$BUILD"/perf/*_perf)
if [ ${#BINS[@]} -eq 0 ]; then
  echo "no perf binaries in $BUILD/perf (ZCOLL_BUILD_PERF=OFF?): skipped"
  exit 0
fi

fail() { echo "FAIL: $*"; FAILED=1; }

# check_table FILE: rank 0's rows have #wrong 0 (or N/A for a half that does not apply) in
# every #wrong column, found from the header (binaries may add columns), and the summary says OK.
check_table() {
  awk '
    /^\[0\] #.*#wrong/ && nw == 0 {
      # Header fields are "[0]", "#", names...; a data row has no "#", hence the -1.
      for (i = 1; i <= NF; i++) if ($i == "#wrong") w[++nw] = i - 1
    }
    /^\[0\] +[0-9]/ {
      rows++
      for (j = 1; j <= nw; j++) if ($(w[j]) != "0" && $(w[j]) != "N/A") bad++
    }
    /Out of bounds values : 0 OK/ { ok = 1 }
    END { exit !(nw > 0 && rows > 0 && bad == 0 && ok) }' "$1"
}

# run_case NAME LAUNCHER-ARGS -- BINARY ARGS: runs it, checks exit 0 and the table.
run_case() {
  local name=$1; shift
  local log="$TMP/$name.log"
  if ! $RUN "$@" >"$log" 2>&1; then
    fail "$name exited non-zero"; cat "$log"; return
  fi
  if check_table "$log"; then echo "ok: $name"; else fail "$name: wrong values"; cat "$log"; fi
}

for bin in "${BINS[@]}"; do
  name=$(basename "$bin")
  [ "$name" = zero_step_perf ] && continue  # not a size sweep; checked below
  run_case "$name.2ranks" -n 2 -- "$bin" $SIZES
  run_case "$name.4ranks.2nodes" -n 4 --nodes 2 -- "$bin" $SIZES
done

# A few dtype/op combinations where exactness is hardest (16-bit floats, int8, prod, avg),
# and an odd rank count with cyclic placement.
for bin in "$BUILD"/perf/{all_reduce,reduce_scatter}_perf; do
  [ -x "$bin" ] || continue
  name=$(basename "$bin")
  for dt_op in "bfloat16 avg" "half prod" "int8 sum" "uint8 min" "int64 max"; do
    set -- $dt_op
    run_case "$name.$1.$2.3ranks" -n 3 --nodes 2 --placement cyclic -- \
      "$bin" -b 24 -e 24K -f 32 -n 1 -w 0 -d "$1" -o "$2"
  done
done
# Registered buffers (-R 1) read in place across processes by the shm_read algorithms: sizes
# that grow (the buffer is freed and allocated again, so peers must drop their kept mappings),
# several calls each (they must reuse them), checked values.
for coll in all_gather reduce_scatter all_reduce; do
  bin="$BUILD/perf/${coll}_perf"
  [ -x "$bin" ] || continue
  algo=ZCOLL_ALGO_$(echo "${coll//_/}" | tr a-z A-Z)
  for n in 2 3; do
    env "$algo=shm_read" $RUN -n $n -- "$bin" -b 64K -e 4M -f 8 -n 3 -w 1 -c 1 -R 1 \
        >"$TMP/reg.log" 2>&1 && check_table "$TMP/reg.log" && echo "ok: $coll registered ${n}ranks" \
      || { fail "$coll registered ${n}ranks"; cat "$TMP/reg.log"; }
  done
done
if [ -x "$BUILD/perf/broadcast_perf" ]; then
  run_case "broadcast_perf.root2" -n 3 -- "$BUILD/perf/broadcast_perf" -b 1K -e 1K -r 2 -n 1
fi

# The ZeRO step benchmark: a small model on 2x2; exit 0 and the one-line summary last.
if [ -x "$BUILD/perf/zero_step_perf" ]; then
  log="$TMP/zero_step.log"
  if $RUN --no-prefix -n 4 --nodes 2 -- "$BUILD/perf/zero_step_perf" -p 64K -n 1 -w 0 >"$log" 2>&1 \
     && tail -n 1 "$log" | grep -q "zero_step"; then
    echo "ok: zero_step_perf"
  else
    fail "zero_step_perf"; cat "$log"
  fi
fi

# The check must catch a wrong value: rank 1 spoils one element.
for bin in "$BUILD"/perf/{all_gather,reduce_scatter}_perf; do
  [ -x "$bin" ] || continue
  name=$(basename "$bin")
  if $RUN -n 2 -- "$bin" -b 64K -e 64K -n 1 -w 0 --test-corrupt 1 >"$TMP/corrupt.log" 2>&1; then
    fail "$name --test-corrupt exited 0"; cat "$TMP/corrupt.log"
  elif grep -q "Out of bounds values : [1-9][0-9]* FAILED" "$TMP/corrupt.log"; then
    echo "ok: $name --test-corrupt fails"
  else
    fail "$name --test-corrupt: no FAILED summary"; cat "$TMP/corrupt.log"
  fi
done

# --device 1 (device buffers), every binary with 2 ranks. Built with CUDA, on a machine with a GPU: the
# run must pass as on host buffers. Without a GPU it must fail cleanly: a non-zero exit that is not
# a signal (no crash, no core dump), and nothing but the one-line reason from each rank that
# printed before zcollrun stopped the other. Built without CUDA: skipped.
for bin in "${BINS[@]}"; do
  name=$(basename "$bin")
  log="$TMP/$name.device.log"
  if [ "$name" = zero_step_perf ]; then
    $RUN --no-prefix -n 2 -- "$bin" -p 64K -n 1 -w 0 --device 1 >"$log" 2>&1
  else
    $RUN -n 2 -- "$bin" $SIZES --device 1 >"$log" 2>&1
  fi
  rc=$?
  if grep -q -- "--device 1 (device buffers): this build has no CUDA support" "$log"; then
    echo "skip: $name --device 1 (built without CUDA)"
  elif [ $rc = 0 ]; then
    if [ "$name" = zero_step_perf ]; then
      if tail -n 1 "$log" | grep -q "zero_step"; then echo "ok: $name --device 1 (device buffers)"
      else fail "$name --device 1: no summary line"; cat "$log"
      fi
    elif check_table "$log"; then
      echo "ok: $name --device 1 (device buffers)"
    else
      fail "$name --device 1: wrong values"; cat "$log"
    fi
  elif [ $rc -ge 128 ] || grep -qiE "core dumped|segmentation|abort|terminate called" "$log"; then
    fail "$name --device 1 crashed (exit $rc)"; cat "$log"
  elif ! grep -q -- "--device 1 (device buffers): no CUDA device" "$log"; then
    fail "$name --device 1 exited $rc without saying there is no CUDA device"; cat "$log"
  elif grep -v -- "--device 1 (device buffers): no CUDA device" "$log" | grep -qv "^zcollrun: "; then
    fail "$name --device 1: more than the one-line reason"; cat "$log"
  else
    echo "ok: $name --device 1 without a GPU fails cleanly (exit $rc: $(grep -m1 -o "no CUDA device.*" "$log"))"
  fi
done

# Open MPI style environment (what mpirun -np 2 sets), without zcollrun.
if [ -x "$BUILD/perf/all_gather_perf" ]; then
  # zcoll's root binds MASTER_PORT + 1 (torchrun's store owns MASTER_PORT): pick that one free.
  port=$(( $(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])') - 1 ))
  pids=()
  for r in 0 1; do
    env -u RANK -u WORLD_SIZE -u ZCOLL_COMM_ID OMPI_COMM_WORLD_RANK=$r OMPI_COMM_WORLD_SIZE=2 \
      OMPI_COMM_WORLD_LOCAL_RANK=$r MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
      timeout 120 "$BUILD/perf/all_gather_perf" $SIZES >"$TMP/ompi.$r.log" 2>&1 &
    pids+=($!)
  done
  rc=0
  for p in "${pids[@]}"; do wait "$p" || rc=1; done
  sed 's/^/[0] /' "$TMP/ompi.0.log" >"$TMP/ompi.log"
  if [ $rc = 0 ] && check_table "$TMP/ompi.log"; then
    echo "ok: all_gather_perf with Open MPI variables"
  else
    fail "all_gather_perf with Open MPI variables"; cat "$TMP"/ompi.*.log
  fi
fi

if [ "$FAILED" != 0 ]; then echo "perf smoke tests FAILED"; exit 1; fi
echo "perf smoke tests passed"
