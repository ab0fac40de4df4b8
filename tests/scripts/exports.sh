#!/usr/bin/env bash
# libzcoll.so exports the public C API and nothing else, and every function declared in
# include/zcoll/zcoll.h is exported.
set -euo pipefail
lib="$ZCOLL_BUILD_DIR/libzcoll.so"
header="$ZCOLL_SOURCE_DIR/include/zcoll/zcoll.h"
exported=$(nm -D --defined-only "$lib" | awk '$2 ~ /^[TWDBR]$/ {sub(/@.*/, "", $3); print $3}' | grep -v '^ZCOLL_0$' | sort -u)
bad=$(echo "$exported" | grep -v '^zcoll' || true)
if [ -n "$bad" ]; then
  echo "FAIL: symbols outside the zcoll* API are exported:"; echo "$bad"; exit 1
fi
declared=$(grep -oE 'ZCOLL_API [^(]*\b(zcoll[A-Za-z]+)\(' "$header" | grep -oE 'zcoll[A-Za-z]+\($' | tr -d '(' | sort -u)
missing=$(comm -23 <(echo "$declared") <(echo "$exported"))
if [ -n "$missing" ]; then
  echo "FAIL: declared but not exported:"; echo "$missing"; exit 1
fi
echo "OK: $(echo "$exported" | wc -l) symbols exported, all zcoll*; all $(echo "$declared" | wc -l) declared functions present"
