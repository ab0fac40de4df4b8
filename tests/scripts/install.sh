#!/usr/bin/env bash
# cmake --install gives headers, the library, a CMake package (find_package(zcoll) ->
# zcoll::zcoll, zcoll_LICENSE), a pkg-config file and the license (share/doc/zcoll/LICENSE,
# NOTICE); a consumer builds and runs against each. The prefix is given only at install time
# (--prefix), never at configure time.
set -euo pipefail
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cmake --install "$ZCOLL_BUILD_DIR" --prefix "$work/prefix" >/dev/null
test -f "$work/prefix/include/zcoll/zcoll.h"
# The license text as the repository has it, with its notice, and its name in the .pc.
for f in LICENSE NOTICE; do
  if ! cmp -s "$ZCOLL_SOURCE_DIR/$f" "$work/prefix/share/doc/zcoll/$f"; then
    echo "FAIL: $work/prefix/share/doc/zcoll/$f is missing or differs from the repository's $f"
    exit 1
  fi
done
grep -q "Apache License" "$work/prefix/share/doc/zcoll/LICENSE"
if ! grep -q "^# License: Apache-2.0" "$(find "$work/prefix" -name zcoll.pc)"; then
  echo "FAIL: the installed zcoll.pc does not name the license"; exit 1
fi
# The perf binaries (when built) install as zcoll_<name>, never under nccl-tests' names, unless
# the build asked for those (ZCOLL_INSTALL_PERF_AS_NCCL_TESTS_NAMES=ON).
if [ -x "$ZCOLL_BUILD_DIR/perf/all_reduce_perf" ]; then
  nccl_names=$(grep -c "^ZCOLL_INSTALL_PERF_AS_NCCL_TESTS_NAMES:BOOL=ON" \
               "$ZCOLL_BUILD_DIR/CMakeCache.txt" || true)
  if [ "$nccl_names" = 0 ]; then
    for p in all_gather all_reduce alltoall broadcast reduce_scatter sendrecv \
             quantized_all_gather quantized_reduce_scatter hier_all_gather zero_step; do
      [ -x "$work/prefix/bin/zcoll_${p}_perf" ] || { echo "FAIL: no bin/zcoll_${p}_perf"; exit 1; }
      [ ! -e "$work/prefix/bin/${p}_perf" ] || { echo "FAIL: bin/${p}_perf shadows nccl-tests"; exit 1; }
    done
    "$work/prefix/bin/zcoll_all_reduce_perf" -h | grep -q "^usage: " \
      || { echo "FAIL: zcoll_all_reduce_perf -h"; exit 1; }
    echo "ok: perf binaries installed as zcoll_*_perf"
  fi
fi
mkdir -p "$work/app"
cat > "$work/app/main.c" <<'C'
#include <stdio.h>
#include <zcoll/zcoll.h>
int main(void) {
  int v = 0;
  if (zcollGetVersion(&v) != zcollSuccess || v != ZCOLL_VERSION_CODE) return 1;
  zcollUniqueId id;
  zcollComm_t comm;
  if (zcollGetUniqueId(&id) != zcollSuccess) return 2;
  if (zcollCommInitRank(&comm, 1, id, 0) != zcollSuccess) return 3;
  float x = 2.f;
  if (zcollAllReduce(&x, &x, 1, zcollFloat32, zcollSum, comm, NULL) != zcollSuccess) return 4;
  zcollCommDestroy(comm);
  printf("ok %d %g\n", v, x);
  return x == 2.f ? 0 : 5;
}
C
cat > "$work/app/CMakeLists.txt" <<'CM'
cmake_minimum_required(VERSION 3.16)
project(consumer C)
find_package(zcoll REQUIRED)
if(NOT zcoll_LICENSE STREQUAL "Apache-2.0")
  message(FATAL_ERROR "zcoll_LICENSE is '${zcoll_LICENSE}', not Apache-2.0")
endif()
add_executable(consumer main.c)
target_link_libraries(consumer PRIVATE zcoll::zcoll)
CM
cmake -S "$work/app" -B "$work/app/build" -DCMAKE_PREFIX_PATH="$work/prefix" >/dev/null
cmake --build "$work/app/build" >/dev/null
LD_LIBRARY_PATH="$work/prefix/lib" "$work/app/build/consumer"
# pkg-config straight from the installed .pc, with no fix-up: the build was configured with the
# default prefix (/usr/local) and the prefix is given only now, at install time.
pcdir=$(dirname "$(find "$work/prefix" -name zcoll.pc)")
pc() { PKG_CONFIG_PATH="$1" pkg-config "${@:2}" zcoll; }
flags=$(pc "$pcdir" --cflags --libs)
case "$flags" in
  *"$work/prefix"*) ;;
  *) echo "FAIL: pkg-config flags do not point into the install prefix: $flags"; exit 1 ;;
esac
inc=$(pc "$pcdir" --variable=includedir)
if [ "$(realpath "$inc")" != "$(realpath "$work/prefix/include")" ]; then
  echo "FAIL: includedir $inc is not $work/prefix/include"; exit 1
fi
cc "$work/app/main.c" -o "$work/app/pc_consumer" $flags
LD_LIBRARY_PATH="$work/prefix/lib" "$work/app/pc_consumer"
# Relocatable: the same tree moved elsewhere still builds.
mv "$work/prefix" "$work/moved"
pcdir="$work/moved${pcdir#"$work/prefix"}"
cc "$work/app/main.c" -o "$work/app/pc_moved" $(pc "$pcdir" --cflags --libs)
LD_LIBRARY_PATH="$work/moved/lib" "$work/app/pc_moved"
echo "OK: installed package and pkg-config both build and run a consumer"
