#!/usr/bin/env bash
# The symbol contract of libzcoll_nccl.so (issue 40): it exports every nccl* name that torch
# 2.11, 2.13 and 2.15 import (nccl/symbols/torch-*.txt), nothing outside nccl*/pnccl* but what
# the linker adds, and its SONAME is libnccl.so.2; libzcoll.so exports no nccl* name.
set -euo pipefail
lib="${ZCOLL_NCCL_LIBRARY:-$ZCOLL_BUILD_DIR/nccl/libzcoll_nccl.so}"
lists=("$ZCOLL_SOURCE_DIR"/nccl/symbols/torch-*.txt)

if [[ ! -f "$ZCOLL_SOURCE_DIR/nccl/CMakeLists.txt" ]]; then
  echo "SKIP: this tree has no nccl/ library to check"; exit 77
fi
# Configured without it (ZCOLL_BUILD_NCCL=OFF, or no nccl.h found: nccl/CMakeLists.txt says so).
if grep -qE '^ZCOLL_BUILD_NCCL:BOOL=OFF|^ZCOLL_NCCL_H:PATH=.*NOTFOUND' "$ZCOLL_BUILD_DIR/CMakeCache.txt"; then
  echo "SKIP: libzcoll_nccl.so is not part of this build (ZCOLL_BUILD_NCCL=OFF or no nccl.h)"; exit 77
fi
[[ -f "$lib" ]] || { echo "FAIL: $lib was not built"; exit 1; }
[[ ${#lists[@]} -ge 3 ]] || { echo "FAIL: expected the torch 2.11/2.13/2.15 lists, found: ${lists[*]}"; exit 1; }
failed=0
fail() { echo "FAIL: $*"; failed=1; }

soname=$(readelf -d "$lib" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
[[ "$soname" == "libnccl.so.2" ]] || fail "SONAME is '$soname', not libnccl.so.2"

# Every defined dynamic symbol, of any type; @VERSION suffixes stripped.
defined=$(nm -D --defined-only "$lib" | awk '{sub(/@.*/, "", $3); print $2, $3}')
# What the linker itself puts in .dynsym: the version script's node names (absolute symbols,
# readelf -V's Version definitions other than the file's own) and, without a version script
# hiding them, _init/_fini. Anything else must be an nccl*/pnccl* name.
version_nodes=$(readelf -V "$lib" | awk '/^Version definition section/ {d = 1; next} /^Version (needs|symbols) section/ {d = 0}
  d && /Name:/ && !/Flags: BASE/ {for (i = 1; i <= NF; i++) if ($i == "Name:") print $(i + 1)}' | sort -u)
linker_added=$(echo "$defined" | awk '{print $2}' | grep -xE '_init|_fini' || true)
outside=$(echo "$defined" | awk '{print $2}' | grep -vE '^p?nccl' | grep -vxF -f <(printf '%s\n' $version_nodes _init _fini) || true)
[[ -z "$outside" ]] || fail "exported outside nccl*/pnccl*:"$'\n'"$outside"
for node in $version_nodes; do
  echo "$defined" | grep -qx "A $node" || fail "version node $node is not an absolute symbol"
done

exported=$(echo "$defined" | awk '$1 ~ /^[TWi]$/ {print $2}' | sort -u)
for list in "${lists[@]}"; do
  missing=$(comm -23 <(LC_ALL=C sort -u "$list") <(echo "$exported" | LC_ALL=C sort -u))
  [[ -z "$missing" ]] || fail "$(basename "$list"): not exported as functions:"$'\n'"$missing"
done
union=$(cat "${lists[@]}" | sort -u | wc -l)

leaked=$(nm -D --defined-only "$ZCOLL_BUILD_DIR/libzcoll.so" | awk '{print $3}' | grep -E '^p?nccl' || true)
[[ -z "$leaked" ]] || fail "libzcoll.so exports NCCL names:"$'\n'"$leaked"

[[ $failed -eq 0 ]] || exit 1
added=$(echo $version_nodes $linker_added)
echo "OK: SONAME libnccl.so.2; all $union names of ${#lists[@]} torch lists exported;" \
  "$(echo "$exported" | grep -c .) functions, all nccl*/pnccl*; added by the linker:" \
  "${added:-none}; libzcoll.so exports no nccl* name"
