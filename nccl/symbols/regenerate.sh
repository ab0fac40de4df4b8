#!/usr/bin/env bash
# Regenerates a committed symbol list: the nccl*/pnccl* names that torch's libtorch_cuda.so
# imports (undefined dynamic symbols), sorted, one a line.
#
#   From a wheel (downloaded, not installed):
#     pip download 'torch==2.13.*' --no-deps -d /tmp/torch213
#     nccl/symbols/regenerate.sh /tmp/torch213/torch-2.13.*.whl > nccl/symbols/torch-2.13.txt
#   From an installed torch (the python3 on PATH, or a site-packages/torch folder):
#     nccl/symbols/regenerate.sh --installed > nccl/symbols/torch-2.15.txt
#     nccl/symbols/regenerate.sh /path/to/site-packages/torch > nccl/symbols/torch-2.15.txt
#
# Needs: nm (binutils), unzip (for a wheel), python3 (for --installed).
# Prints the torch version and the count on stderr, so stdout is the list alone.
set -euo pipefail

usage() {
    sed -n '2,12p' "$0" >&2
    exit 2
}

[[ $# -eq 1 ]] || usage
source_arg=$1
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT

find_lib() {
    case "$source_arg" in
    --installed)
        local torch_dir
        torch_dir=$(python3 -c 'import os, torch; print(os.path.dirname(torch.__file__))' 2>/dev/null) ||
            { echo "regenerate.sh: python3 cannot import torch" >&2; exit 1; }
        echo "$torch_dir/lib/libtorch_cuda.so"
        ;;
    *.whl)
        [[ -f "$source_arg" ]] || { echo "regenerate.sh: no such wheel: $source_arg" >&2; exit 1; }
        unzip -q -o "$source_arg" 'torch/lib/libtorch_cuda.so' 'torch/version.py' -d "$scratch" ||
            { echo "regenerate.sh: $source_arg has no torch/lib/libtorch_cuda.so (not a CUDA build?)" >&2; exit 1; }
        echo "$scratch/torch/lib/libtorch_cuda.so"
        ;;
    *)
        echo "$source_arg/lib/libtorch_cuda.so"
        ;;
    esac
}

lib=$(find_lib)
[[ -f "$lib" ]] || { echo "regenerate.sh: no libtorch_cuda.so at $lib (not a CUDA build of torch?)" >&2; exit 1; }

version_file="$(dirname "$(dirname "$lib")")/version.py"
if [[ -f "$version_file" ]]; then
    grep -E "^(__version__|cuda)" "$version_file" | tr '\n' ' ' >&2
    echo >&2
fi

# "U name" lines of the dynamic symbol table; strip any @VERSION suffix.
names=$(nm -D --undefined-only "$lib" | awk '$1 == "U" { sub(/@.*/, "", $2); print $2 }' |
    grep -E '^p?nccl' | LC_ALL=C sort -u)
echo "$names"
echo "regenerate.sh: $(echo "$names" | grep -c .) names from $lib" >&2
