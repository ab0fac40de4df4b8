#!/usr/bin/env bash
# cmake --install gives headers, the library, a CMake package (find_package(zcoll) ->
# zcoll::zcoll) and a pkg-config file; a consumer builds and runs against each.
set -euo pipefail
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cmake --install "$ZCOLL_BUILD_DIR" --prefix "$work/prefix" >/dev/null
test -f "$work/prefix/include/zcoll/zcoll.h"
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
add_executable(consumer main.c)
target_link_libraries(consumer PRIVATE zcoll::zcoll)
CM
cmake -S "$work/app" -B "$work/app/build" -DCMAKE_PREFIX_PATH="$work/prefix" >/dev/null
cmake --build "$work/app/build" >/dev/null
LD_LIBRARY_PATH="$work/prefix/lib" "$work/app/build/consumer"
libdir=$(dirname "$(find "$work/prefix" -name zcoll.pc)")
flags=$(PKG_CONFIG_PATH="$libdir" pkg-config --cflags --libs zcoll | sed "s|$(cmake -LA -N "$ZCOLL_BUILD_DIR" | sed -n 's/^CMAKE_INSTALL_PREFIX:PATH=//p')|$work/prefix|g")
cc "$work/app/main.c" -o "$work/app/pc_consumer" $flags
LD_LIBRARY_PATH="$work/prefix/lib" "$work/app/pc_consumer"
echo "OK: installed package and pkg-config both build and run a consumer"
