#!/usr/bin/env bash
# Installs the Debian 12 packages zcoll needs to build and test. Idempotent: installs only what
# is missing, and runs apt-get update only then. Run as root.
# The CUDA toolkit is optional (ZCOLL_WITH_CUDA=AUTO builds the CUDA kernels when nvcc is in
# /usr/local/cuda or on PATH); it is not a Debian package here.
set -euo pipefail
packages=(
  build-essential cmake ninja-build pkg-config python3
  libucx-dev ucx-utils libhwloc-dev hwloc
  libgtest-dev googletest libbenchmark-dev iproute2
  procps  # pgrep (tests/scripts/status.sh)
  clang libclang-rt-14-dev  # tests/scripts/fuzz.sh: libFuzzer, ASan, UBSan
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install_deps: all ${#packages[@]} packages present"
  exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "install_deps: missing ${missing[*]}; run as root (or install them)" >&2
  exit 1
fi
echo "install_deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
