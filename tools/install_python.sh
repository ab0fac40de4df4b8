#!/usr/bin/env bash
# Installs torch (tested range, once: pip skips it when already satisfied) and the zcoll
# torch.distributed backend (python/) built against it, using the libzcoll.so in build/.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m pip install -q "torch>=2.15,<2.16" pytest
ZCOLL_BUILD_DIR="$PWD/build" python3 -m pip install -q --no-build-isolation ./python
