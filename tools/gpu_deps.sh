#!/usr/bin/env bash
# The GPU kit's packing half (docs/GPU_KIT.md): downloads, on a Debian 12 machine with a package
# registry, the .debs a zcoll build needs that the lent GPU machine lacks (UCX, hwloc, numa,
# GoogleTest, Google Benchmark, pkgconf: about 4.4 MB), for tools/gpu_check.sh to unpack there
# with dpkg -x (no root, no registry).
#
#   tools/gpu_deps.sh pack DIR     download into DIR (created; .debs already there are kept)
#   tools/gpu_deps.sh list         print the package names
#
# `apt-get download` only (nothing is installed); it runs `apt-get update` once if a package is
# unknown. DIR gets the .debs and MANIFEST (package, version, size, file). Carry DIR to the GPU
# machine with the working tree (`carry` of the device tool: keep it under the repository, in an
# ignored folder such as build-gpu-pack/). Exit 1, saying which, if a package cannot be had.
set -euo pipefail

# What a configure + build + test run needs, and why (`apt-cache depends` says the rest is not):
#   libucx0, libucx-dev          UCX transport (ucx.pc -> ucx-uct.pc, ucx-ucs.pc; libucp/uct/ucs/ucm)
#   libnuma1                     libucs/libuct/libucp link libnuma.so.1
#   libhwloc15, libhwloc-dev     topology (hwloc.pc; its Requires.private is empty, so
#                                libhwloc-dev's libnuma-dev/libltdl-dev are only for static links)
#   libudev1                     libhwloc.so.15 links libudev.so.1 (used from the pack only when the
#                                machine has none: gpu_check.sh)
#   googletest, libgtest-dev     GoogleTest (libgtest-dev: libgtest.a + GTestConfig.cmake; it
#                                depends on googletest, the sources)
#   libbenchmark1debian, libbenchmark-dev   Google Benchmark (perf/*_bench, benchmarkConfig.cmake)
#   pkgconf, pkgconf-bin, libpkgconf3       pkg-config itself (CMake's FindPkgConfig)
# Not packed: libibverbs1 / librdmacm1 (libucx0 depends on them for its InfiniBand and RDMA CM
# modules, which are plugins a run without them does not load; the core libraries do not link
# them), libc6, libstdc++6, libgcc-s1 (the machine's own).
PACKAGES=(
  libucx0 libucx-dev libnuma1
  libhwloc15 libhwloc-dev libudev1
  googletest libgtest-dev
  libbenchmark1debian libbenchmark-dev
  pkgconf pkgconf-bin libpkgconf3
)

usage() {
  echo "usage: $0 pack DIR | list" >&2
  exit 2
}

[ $# -ge 1 ] || usage
case "$1" in
  list) printf '%s\n' "${PACKAGES[@]}"; exit 0 ;;
  pack) [ $# -eq 2 ] || usage ;;
  *) usage ;;
esac
DIR=$2

command -v apt-get >/dev/null || { echo "gpu_deps.sh: no apt-get here: run it on a Debian 12 machine" >&2; exit 1; }
if [ -r /etc/os-release ]; then
  # shellcheck disable=SC1091
  . /etc/os-release
  if [ "${ID:-}" != debian ] || [ "${VERSION_ID:-}" != 12 ]; then
    echo "gpu_deps.sh: warning: this is ${PRETTY_NAME:-unknown}, not Debian 12: the packages are this" \
         "system's versions (gpu_check.sh expects Debian 12's)" >&2
  fi
fi

mkdir -p "$DIR"
DIR=$(cd "$DIR" && pwd)

missing=()
for p in "${PACKAGES[@]}"; do
  apt-cache show "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "gpu_deps.sh: unknown to apt: ${missing[*]}; running apt-get update" >&2
  apt-get update -qq >/dev/null || true
  for p in "${missing[@]}"; do
    apt-cache show "$p" >/dev/null 2>&1 ||
      { echo "gpu_deps.sh: package $p is not available from this machine's sources" >&2; exit 1; }
  done
fi

# apt-get download writes into the current directory; as root it may need _apt to write there,
# so download into a private temporary folder and move the files in.
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
chmod 755 "$TMP"
(cd "$TMP" && apt-get download -qq "${PACKAGES[@]}" 2>"$TMP/err") || {
  echo "gpu_deps.sh: apt-get download failed:" >&2
  cat "$TMP/err" >&2
  exit 1
}
mv -f "$TMP"/*.deb "$DIR"/

# One .deb per package (a previous pack of another version is removed), and the manifest.
: >"$DIR/MANIFEST.new"
for p in "${PACKAGES[@]}"; do
  newest=
  for f in "$DIR/${p}_"*.deb; do
    [ -e "$f" ] || continue
    [ "$(dpkg-deb -f "$f" Package)" = "$p" ] || continue
    v=$(dpkg-deb -f "$f" Version)
    if [ -z "$newest" ] || dpkg --compare-versions "$v" gt "$(dpkg-deb -f "$newest" Version)"; then
      [ -n "$newest" ] && rm -f "$newest"
      newest=$f
    elif [ "$f" != "$newest" ]; then
      rm -f "$f"
    fi
  done
  [ -n "$newest" ] || { echo "gpu_deps.sh: $p was not downloaded" >&2; exit 1; }
  printf '%s\t%s\t%s\t%s\n' "$p" "$(dpkg-deb -f "$newest" Version)" "$(stat -c %s "$newest")" \
    "$(basename "$newest")" >>"$DIR/MANIFEST.new"
done
mv "$DIR/MANIFEST.new" "$DIR/MANIFEST"
total=$(awk -F'\t' '{s += $3} END {print s}' "$DIR/MANIFEST")
echo "gpu_deps.sh: ${#PACKAGES[@]} packages, $total bytes in $DIR:"
cut -f1,2,3 "$DIR/MANIFEST" | column -t
