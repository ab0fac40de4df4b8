#!/usr/bin/env bash
# Installs torch (the newest tested minor, 2.15, only when no torch is installed: a user's torch
# 2.11-2.15 is kept), deepspeed (tested range), numpy (zcoll.core's tests; torch does not require
# it) and the zcoll torch.distributed backend (python/) built against that torch, with the
# zcoll-core distribution it requires (python/core: zcoll.core and libzcoll.so), using the
# libzcoll.so in build/.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! python3 -c "import torch" 2>/dev/null; then
  python3 -m pip install -q "torch>=2.15,<2.16"
fi
python3 -m pip install -q "deepspeed>=0.19.8,<0.20" pytest "setuptools>=77" numpy  # 77: PEP 639 license metadata (python/pyproject.toml)
# A zcoll from before the split owned zcoll/__init__.py and libzcoll.so, which zcoll-core owns now:
# upgrading it in place would delete them after zcoll-core wrote them, so it goes first.
if python3 -m pip show -q zcoll 2>/dev/null && ! python3 -m pip show zcoll-core >/dev/null 2>&1; then
  python3 -m pip uninstall -q -y zcoll
fi
# jax (CPU jaxlib, ~380 MB installed, about 10 s from PyPI): zcoll.jax. CMake builds its FFI
# handlers (libzcoll_jax.so, ctest jax.*) when python3 imports jax.ffi: tools/run_tests.sh builds
# again after this script.
python3 -m pip install -q "jax>=0.10.2,<0.11"
ZCOLL_BUILD_DIR="$PWD/build" python3 -m pip install -q --no-build-isolation ./python
# Upgrading from a zcoll whose files overlapped zcoll-core's (before the split, or a build
# directory of then) removes them with the old version: put zcoll-core's back.
if ! python3 -c "import zcoll.core; zcoll.core.library_path()" 2>/dev/null; then
  ZCOLL_BUILD_DIR="$PWD/build" python3 -m pip install -q --no-build-isolation --no-deps \
    --force-reinstall ./python/core
fi
