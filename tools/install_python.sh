#!/usr/bin/env bash
# Installs torch and deepspeed (tested ranges, once: pip skips them when already satisfied) and the zcoll
# torch.distributed backend (python/) built against it, using the libzcoll.so in build/.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m pip install -q "torch>=2.15,<2.16" "deepspeed>=0.19.8,<0.20" pytest
ZCOLL_BUILD_DIR="$PWD/build" python3 -m pip install -q --no-build-isolation ./python
