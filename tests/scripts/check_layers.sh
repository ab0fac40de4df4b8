#!/usr/bin/env bash
# The include matrix of tools/check_layers.sh holds on this tree, and the check does catch an
# upward include: a copy of the library sources with one planted (base/ including core/) must
# fail, naming the file, the line and the two floors.
set -u
SRC=${ZCOLL_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
bash "$SRC/tools/check_layers.sh" "$SRC" || { echo "FAIL: the tree breaks its layers"; exit 1; }

scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
cp -r "$SRC/src" "$SRC/cuda" "$SRC/topology" "$scratch/"
printf '#include "core/comm.h"\n' >>"$scratch/src/base/log.h"
line=$(wc -l <"$scratch/src/base/log.h")
if out=$(bash "$SRC/tools/check_layers.sh" "$scratch" 2>&1); then
  echo "FAIL: a planted upward include (base/ -> core/) passed the check"; exit 1
fi
echo "$out" | grep -q "src/base/log.h:$line: #include \"core/comm.h\": base/ may not include core/" ||
  { echo "FAIL: the check did not name the planted include:"; echo "$out"; exit 1; }
echo "PASS: layers hold; a planted upward include is caught"
