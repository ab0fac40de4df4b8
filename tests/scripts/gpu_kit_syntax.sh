#!/usr/bin/env bash
# The GPU kit cannot run without a GPU, so its scripts are at least parsed here: bash -n on every
# kit script, python3's parser on tools/gpu_nccl_torch.py, the compiler on
# tools/gpu_one_gpu_as_many.c, and gpu_check.sh's answers without a
# GPU (a step it does not know: usage, exit 2; step 5: "no GPU here", exit 3).
set -euo pipefail
cd "$ZCOLL_SOURCE_DIR"
for f in tools/gpu_check.sh tools/gpu_deps.sh tools/gpu_kit_selftest.sh tools/gpu_nccl_step.sh \
         tools/gpu_nccl_tests_fetch.sh; do
  bash -n "$f" || { echo "FAIL: $f does not parse"; exit 1; }
done
python3 -c 'import ast, sys; ast.parse(open(sys.argv[1]).read(), sys.argv[1])' tools/gpu_nccl_torch.py
"${CC:-cc}" -fsyntax-only -Wall -Wextra -Werror tools/gpu_one_gpu_as_many.c
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
rc=0; tools/gpu_check.sh 6 "$out" 2>/dev/null || rc=$?
[[ $rc -eq 2 ]] || { echo "FAIL: gpu_check.sh 6: exit $rc, expected 2 (usage)"; exit 1; }
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
  echo "OK: the kit's scripts parse (a GPU is here: step 5 not tried)"; exit 0
fi
rc=0; tools/gpu_check.sh 5 "$out" 2>/dev/null || rc=$?
[[ $rc -eq 3 ]] && grep -q 'step 5 FAIL step 5: cannot run: no GPU here' "$out/summary.txt" ||
  { echo "FAIL: gpu_check.sh 5 without a GPU: exit $rc, $(cat "$out/summary.txt")"; exit 1; }
echo "OK: the kit's scripts parse; gpu_check.sh 5 without a GPU exits 3 saying so"
