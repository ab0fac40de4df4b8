#!/usr/bin/env bash
# Holds the library's floors (src/README.md, "Layers"): every #include "folder/file" in src/,
# cuda/ and topology/ must go from a folder to one it may include, per the matrix below. An
# include outside it fails the check with the offending line, unless it is one of the named
# upward includes (EXCEPTIONS), each justified in src/README.md. Run by the test suite
# (tests/scripts/check_layers.sh). Usage: tools/check_layers.sh [TREE] (default: this checkout).
set -euo pipefail
cd "${1:-$(dirname "$0")/..}"

# Folder -> the folders its files may include (besides its own and the public zcoll/ headers).
# Top to bottom: api -> trigger -> coll -> core -> {exec, transport, bootstrap, cuda} -> {quant, topology}
# -> base.
declare -A ALLOWED=(
  [api]="trigger coll core exec transport bootstrap quant topology base"
  [trigger]="coll core exec transport quant topology base"
  [coll]="core exec transport quant topology base"
  [core]="exec transport bootstrap quant topology base"
  [exec]="quant base"
  [transport]="topology base"
  [bootstrap]="base"
  [cuda]="exec transport quant base"
  [quant]="base"
  [topology]="base"
  [base]=""
)

# The upward includes that remain, "file -> included header" (src/README.md says why each).
EXCEPTIONS=(
  "src/core/init.cc -> coll/coll.h"
  "src/core/init.cc -> trigger/ring.h"
)

folder_of() {  # path of a source file -> its floor
  case "$1" in
    src/*) local rest=${1#src/}; echo "${rest%%/*}" ;;
    *) echo "${1%%/*}" ;;
  esac
}

is_exception() {
  local e
  for e in "${EXCEPTIONS[@]}"; do [ "$e" = "$1" ] && return 0; done
  return 1
}

list_sources() {  # the tree's library sources: git's view in a checkout, else every file
  if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    git ls-files -co --exclude-standard -- src cuda topology
  else
    find src cuda topology -type f 2>/dev/null
  fi | grep -E '\.(cc|h|cu|cuh)$' | sort
}

violations=0
checked=0
used_exceptions=0
while IFS= read -r file; do
  from=$(folder_of "$file")
  if [ -z "${ALLOWED[$from]+set}" ]; then
    echo "check_layers: $file is in folder '$from', which has no row in the matrix" >&2
    violations=$((violations + 1))
    continue
  fi
  while IFS=: read -r line inc; do
    to=${inc%%/*}
    checked=$((checked + 1))
    [ "$to" = "$from" ] || [ "$to" = "zcoll" ] && continue
    case " ${ALLOWED[$from]} " in *" $to "*) continue ;; esac
    if is_exception "$file -> $inc"; then
      used_exceptions=$((used_exceptions + 1))
      continue
    fi
    echo "check_layers: $file:$line: #include \"$inc\": $from/ may not include $to/" \
         "(allowed: ${ALLOWED[$from]:-nothing}; see src/README.md, Layers)" >&2
    violations=$((violations + 1))
  done < <(grep -noE '^#include "[a-z_]+/[^"]+"' "$file" | sed -E 's/^([0-9]+):#include "(.*)"$/\1:\2/')
done < <(list_sources)

if [ "$violations" -ne 0 ]; then
  echo "check_layers: $violations include(s) break the layers" >&2
  exit 1
fi
echo "check_layers: $checked includes follow the layers ($used_exceptions named upward include(s) of ${#EXCEPTIONS[@]})"
