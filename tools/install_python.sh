#!/usr/bin/env bash
# Installs torch (the newest tested minor, 2.15, only when no torch is installed: a user's torch
# 2.11-2.15 is kept), deepspeed (tested range) and the zcoll torch.distributed backend (python/)
# built against that torch, using the libzcoll.so in build/.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! python3 -c "import torch" 2>/dev/null; then
  python3 -m pip install -q "torch>=2.15,<2.16"
fi
python3 -m pip install -q "deepspeed>=0.19.8,<0.20" pytest "setuptools>=77"  # 77: PEP 639 license metadata (python/pyproject.toml)
# jax (CPU jaxlib, ~380 MB installed, about 10 s from PyPI): zcoll.jax and its FFI handlers (CMake
# builds libzcoll_jax.so when python3 imports jax.ffi, so install before configuring; ctest jax.*).
python3 -m pip install -q "jax>=0.10.2,<0.11"
ZCOLL_BUILD_DIR="$PWD/build" python3 -m pip install -q --no-build-isolation ./python
