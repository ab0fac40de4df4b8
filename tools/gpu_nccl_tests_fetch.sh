#!/usr/bin/env bash
# Puts a copy of NVIDIA's nccl-tests source (BSD-3-Clause; not vendored in this repository) in
# the ignored folder .gpu_carry/nccl-tests, for the GPU kit's step 5 to build against
# libzcoll_nccl.so on the lent machine (docs/GPU_KIT.md; the device tool carries ignored paths
# named in its `carry`, and the machine reaches no network).
#
#   tools/gpu_nccl_tests_fetch.sh [SOURCE [REF]]
#     SOURCE  a git URL (default https://github.com/NVIDIA/nccl-tests.git, cloned at depth 1)
#             or a local git repository, bare or not (e.g. a mirror already on this machine)
#     REF     a commit, tag or branch (default: the source's HEAD)
#
# Writes .gpu_carry/nccl-tests/ (the tree, about 0.5 MB) and .gpu_carry/nccl-tests/ORIGIN (the
# source and the commit), replacing an earlier copy. Needs git and tar.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
SOURCE=${1:-https://github.com/NVIDIA/nccl-tests.git}
REF=${2:-HEAD}
DEST=$ROOT/.gpu_carry/nccl-tests
git -C "$ROOT" check-ignore -q "$DEST" ||
  { echo "gpu_nccl_tests_fetch.sh: $DEST is not ignored by git (.gitignore lists .gpu_carry/)" >&2; exit 1; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if git --git-dir="$SOURCE" rev-parse --git-dir >/dev/null 2>&1; then
  repo=$SOURCE                                            # a bare repository
elif git -C "$SOURCE" rev-parse --git-dir >/dev/null 2>&1; then
  repo=$(git -C "$SOURCE" rev-parse --absolute-git-dir)   # a checkout
else
  git clone -q --depth 1 ${2:+--branch "$REF"} "$SOURCE" "$tmp/clone"
  repo=$tmp/clone/.git
  [[ -n "${2:-}" ]] && REF=HEAD
fi
commit=$(git --git-dir="$repo" rev-parse --verify "$REF^{commit}")
rm -rf "$DEST"
mkdir -p "$DEST"
git --git-dir="$repo" archive --format=tar "$commit" | tar -x -C "$DEST"
[[ -f "$DEST/src/common.cu" && -f "$DEST/Makefile" ]] ||
  { echo "gpu_nccl_tests_fetch.sh: $SOURCE at $commit does not look like nccl-tests" >&2; exit 1; }
printf 'source %s\ncommit %s\n' "$SOURCE" "$commit" >"$DEST/ORIGIN"
echo "gpu_nccl_tests_fetch.sh: $DEST from $SOURCE at $commit ($(du -sh "$DEST" | cut -f1))"
