// Device buffers for the perf binaries (--device 1): the CUDA device of this rank, a non-blocking stream,
// growable cudaMalloc'd buffers and the copies between them and the host. Compiled in every build;
// the CUDA calls are behind ZCOLL_HAVE_CUDA, and without it every entry point that would need CUDA
// reports that the build has none (deviceUnavailable) instead.
//
// Every CUDA failure past setup prints "rank R: WHAT failed: CUDA error NAME: TEXT" and exits 1
// (as checkResult does for zcoll calls); R is the rank given to setDeviceRank (-1 before it).
#pragma once

#include <cstddef>
#include <string>

#include "zcoll/zcoll.h"

namespace zcoll {
namespace perf {

// True when this binary was compiled with CUDA (ZCOLL_HAVE_CUDA).
bool deviceBuild();

// The local rank used to pick the device before the communicator exists: LOCAL_RANK, else
// OMPI_COMM_WORLD_LOCAL_RANK, MPI_LOCALRANKID or SLURM_LOCALID, else 0.
int localRankFromEnv();

// Makes device (local rank % device count) the calling thread's current device and checks that
// zcoll recognises device buffers. Call it BEFORE zcoll init: a communicator is bound to the
// device current at init. Returns "" on success (the device in *device), else a one-line reason
// that starts with "no CUDA device" (none, or no driver), "this build has no CUDA support" or
// "zcoll has no device support".
std::string selectDevice(int* device);

// "cuda device 0 [0000:1b:00.0] NVIDIA H100 80GB HBM3", or "" without CUDA.
std::string describeDevice(int device);

// The rank printed in CUDA failure messages (after init).
void setDeviceRank(int rank);

// A non-blocking stream of the current device (cudaStreamNonBlocking), and its end.
zcollStream_t createStream();
void destroyStream(zcollStream_t stream);
// Waits until everything enqueued on the stream has run.
void synchronize(zcollStream_t stream, const char* what);

// A growable device buffer (cudaMalloc), never empty (so no call sees a NULL pointer). Growing
// frees the old block first: contents are not kept, and nothing may still use it.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& other) noexcept : ptr_(other.ptr_), bytes_(other.bytes_) {
    other.ptr_ = nullptr;
    other.bytes_ = 0;
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  unsigned char* ensure(size_t bytes);
  unsigned char* data() const { return ptr_; }

 private:
  unsigned char* ptr_ = nullptr;
  size_t bytes_ = 0;
};

// Synchronous copies (cudaMemcpy): complete when they return.
void copyToDevice(void* dst, const void* src, size_t bytes);
void copyToHost(void* dst, const void* src, size_t bytes);

}  // namespace perf
}  // namespace zcoll
