#!/usr/bin/env bash
# Configures and builds zcoll into build/ (warnings are errors). Extra arguments go to cmake.
# The full log goes to build/build.log and is printed only when the build fails.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p build
echo "building zcoll into build/ (log: build/build.log)"
if ! { cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DZCOLL_WERROR=ON "$@" &&
       cmake --build build -j "$(nproc)"; } >build/build.log 2>&1; then
  cat build/build.log
  echo "build failed" >&2
  exit 1
fi
