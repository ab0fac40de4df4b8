// "cuda device 0 [0000:1b:00.0] NVIDIA H100 80GB HBM3": the name the perf binaries print for a
// CUDA device. Header-only, so that the NCCL peer (which must not link zcoll's perf driver)
// prints devices the same way; include it only where the CUDA runtime is available.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstring>
#include <string>

namespace zcoll {
namespace perf {

inline std::string cudaDeviceName(int device) {
  cudaDeviceProp prop;
  if (cudaGetDeviceProperties(&prop, device) != cudaSuccess) return "cuda device ?";
  char buf[64];
  std::snprintf(buf, sizeof(buf), "cuda device %d [%04x:%02x:%02x.0] ", device,
                unsigned(prop.pciDomainID) & 0xffff, unsigned(prop.pciBusID) & 0xff,
                unsigned(prop.pciDeviceID) & 0xff);
  return buf + std::string(prop.name, strnlen(prop.name, sizeof(prop.name)));
}

}  // namespace perf
}  // namespace zcoll
