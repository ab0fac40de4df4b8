#!/usr/bin/env bash
# torch (the CUDA build from PyPI) over libzcoll_nccl.so: LD_PRELOAD, LD_AUDIT and why
# LD_LIBRARY_PATH does not work (tests/scripts/nccl_binding.py says each case). No GPU needed.
# Exits 77 when torch is not a CUDA build or the library was not built.
set -euo pipefail
exec python3 "$(dirname "$0")/nccl_binding.py"
