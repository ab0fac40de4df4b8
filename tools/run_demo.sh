#!/usr/bin/env bash
# The main job: 4 ranks on this machine emulating 2 nodes of 2, running one ZeRO-3 training
# step's communication against the ZeRO++ step (qwZ + hpZ + qgZ) and printing time, intra- and
# inter-node bytes and gradient error side by side.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/install_deps.sh
bash tools/build.sh
export UCX_NET_DEVICES=${UCX_NET_DEVICES:-lo} ZCOLL_SOCKET_IFNAME=${ZCOLL_SOCKET_IFNAME:-lo}
if [ -x build/perf/zero_step_perf ]; then
  exec tools/zcollrun -n 4 --nodes 2 build/perf/zero_step_perf "$@"
fi
exec tools/zcollrun -n 4 --nodes 2 build/perf/all_gather_perf -b 8 -e 16M -f 4 "$@"
