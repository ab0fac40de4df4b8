// CUDA IPC (see cuda_ipc.h and transport/device_ipc.h).
//
// Export: the allocation holding a range is found with the driver's cuMemGetAddressRange and its
// legacy IPC handle taken with cudaIpcGetMemHandle; memory that legacy IPC cannot share
// (stream-ordered pools, virtual-memory mappings, managed memory) is refused with
// zcollUnsupported. Map: a handle from this process is used at its own address (CUDA refuses to
// open those); others are opened once with cudaIpcOpenMemHandle and kept in a table
// (transport/ipc_mappings.h) that counts holders, so a mapping shared by two windows of one
// allocation stays open until both are gone, and evicts only unheld ones, least recent first.
// Copies: cudaMemcpyAsync on a non-blocking stream of this object's per device and direction
// (DeviceIpc::Lane), after the call's fence when given (cudaStreamWaitEvent), an event recorded
// after each one; tickets count copies, and the pending (ticket, event, lane) say which are done
// (a lane's copies end in order).
#include "cuda/cuda_ipc.h"

#include <cuda.h>  // driver types only: the functions come from cudaGetDriverEntryPointByVersion
#include <cuda_runtime_api.h>
#include <sys/types.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cctype>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <deque>
#include <list>
#include <map>
#include <new>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "base/process.h"
#include "cuda/cuda_result.h"
#include "cuda/fence_cuda.h"
#include "transport/ipc_mappings.h"

namespace zcoll {

namespace {

static_assert(sizeof(cudaIpcMemHandle_t) <= sizeof(IpcHandle{}.opaque),
              "cudaIpcMemHandle_t must fit IpcHandle::opaque");

constexpr size_t kMaxMappings = 4096;       // open peer allocations kept per object
constexpr int kEvictDrainMs = 10000;        // waiting for copies before a mapping is closed
constexpr int kDestroyDrainMs = 2000;       // waiting for copies when the object dies
constexpr auto kPollInterval = std::chrono::microseconds(50);

const char* cuName(CUresult r) {
  switch (r) {
    case CUDA_SUCCESS: return "CUDA_SUCCESS";
    case CUDA_ERROR_INVALID_VALUE: return "CUDA_ERROR_INVALID_VALUE";
    case CUDA_ERROR_NOT_INITIALIZED: return "CUDA_ERROR_NOT_INITIALIZED";
    case CUDA_ERROR_DEINITIALIZED: return "CUDA_ERROR_DEINITIALIZED";
    case CUDA_ERROR_INVALID_CONTEXT: return "CUDA_ERROR_INVALID_CONTEXT";
    case CUDA_ERROR_NOT_FOUND: return "CUDA_ERROR_NOT_FOUND";
    case CUDA_ERROR_NOT_SUPPORTED: return "CUDA_ERROR_NOT_SUPPORTED";
    default: return "CUresult";
  }
}

// ---- driver functions, looked up once per process ---------------------------------------------

using GetAddressRangeFn = CUresult (*)(CUdeviceptr* base, size_t* size, CUdeviceptr ptr);
using PointerGetAttributeFn = CUresult (*)(void* data, CUpointer_attribute attr, CUdeviceptr ptr);
using DeviceGetFn = CUresult (*)(CUdevice* device, int ordinal);
using PrimaryCtxGetStateFn = CUresult (*)(CUdevice device, unsigned int* flags, int* active);
using CtxGetCurrentFn = CUresult (*)(CUcontext* ctx);
using DeviceGetCountFn = CUresult (*)(int* count);

struct DriverFns {
  GetAddressRangeFn getAddressRange = nullptr;   // required
  PointerGetAttributeFn getAttribute = nullptr;  // optional: better refusals
  DeviceGetFn deviceGet = nullptr;               // optional: whether a device is initialized
  PrimaryCtxGetStateFn primaryCtxGetState = nullptr;
  CtxGetCurrentFn ctxGetCurrent = nullptr;      // optional: cudaInUse
  DeviceGetCountFn deviceGetCount = nullptr;
  Result code = zcollSuccess;                    // why getAddressRange is missing
  std::string why;
};

// Looks `symbol` up; "" on success, else why not (and *fn stays NULL).
std::string lookUp(const char* symbol, void** fn, Result* code) {
  *fn = nullptr;
  cudaDriverEntryPointQueryResult status = cudaDriverEntryPointSuccess;
  cudaError_t err = cudaGetDriverEntryPointByVersion(symbol, fn, 12000, cudaEnableDefault, &status);
  char buf[256];
  if (err != cudaSuccess) {
    (void)cudaGetLastError();
    *fn = nullptr;
    *code = zcollCudaError;
    snprintf(buf, sizeof(buf), "cudaGetDriverEntryPointByVersion(%s) failed: %s (%s)", symbol,
             cudaGetErrorName(err), cudaGetErrorString(err));
    return buf;
  }
  if (status != cudaDriverEntryPointSuccess || *fn == nullptr) {
    *fn = nullptr;
    *code = zcollUnsupported;
    snprintf(buf, sizeof(buf), "the CUDA driver has no %s for CUDA 12.0 (%s)", symbol,
             status == cudaDriverEntryPointVersionNotSufficent ? "driver too old"
                                                               : "symbol not found");
    return buf;
  }
  return "";
}

const DriverFns& driverFns() {
  static const DriverFns fns = [] {
    DriverFns f;
    void* fn = nullptr;
    Result code = zcollSuccess;
    f.why = lookUp("cuMemGetAddressRange", &fn, &code);
    f.getAddressRange = reinterpret_cast<GetAddressRangeFn>(fn);
    f.code = code;
    Result ignored = zcollSuccess;
    (void)lookUp("cuPointerGetAttribute", &fn, &ignored);
    f.getAttribute = reinterpret_cast<PointerGetAttributeFn>(fn);
    (void)lookUp("cuDeviceGet", &fn, &ignored);
    f.deviceGet = reinterpret_cast<DeviceGetFn>(fn);
    (void)lookUp("cuDevicePrimaryCtxGetState", &fn, &ignored);
    f.primaryCtxGetState = reinterpret_cast<PrimaryCtxGetStateFn>(fn);
    (void)lookUp("cuCtxGetCurrent", &fn, &ignored);
    f.ctxGetCurrent = reinterpret_cast<CtxGetCurrentFn>(fn);
    (void)lookUp("cuDeviceGetCount", &fn, &ignored);
    f.deviceGetCount = reinterpret_cast<DeviceGetCountFn>(fn);
    return f;
  }();
  return fns;
}

// A pointer attribute as an integer (booleans, handles); false when it cannot be read. The driver
// writes at most 8 bytes for these, little-endian, into a zeroed word.
bool pointerAttribute(const DriverFns& fns, CUpointer_attribute attr, CUdeviceptr ptr,
                      unsigned long long* value) {
  *value = 0;
  if (fns.getAttribute == nullptr) return false;
  return fns.getAttribute(value, attr, ptr) == CUDA_SUCCESS;
}

// Makes the calling thread's current device `device` until the guard dies (no-op when it is).
class DeviceGuard {
 public:
  explicit DeviceGuard(int device) {
    if (cudaGetDevice(&previous_) != cudaSuccess) {
      (void)cudaGetLastError();
      return;
    }
    if (previous_ != device) {
      if (cudaSetDevice(device) == cudaSuccess) {
        switched_ = true;
      } else {
        (void)cudaGetLastError();
      }
    }
  }
  ~DeviceGuard() {
    if (switched_ && cudaSetDevice(previous_) != cudaSuccess) (void)cudaGetLastError();
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = 0;
  bool switched_ = false;
};

// Binds the primary context of the thread's current device to the thread, so that driver calls
// made through entry points have a current context. Returns the device.
Result bindCurrentDevice(int* device) {
  ZCOLL_CHECK(cudaResult(cudaGetDevice(device), "cudaGetDevice"));
  return cudaResult(cudaSetDevice(*device), "cudaSetDevice");
}

// Ranks of one process (threads) on different devices reach each other's memory through its own
// address, in copies and in kernels (windows, registered buffers), which needs peer access from
// the calling thread's device to the memory's (the second CUDA review: none was enabled). It is
// enabled when the first of the pair's mappings is made, at connect (slots are mapped while no
// stream is held); a pair without peer access is refused (zcollUnsupported), so cuda_ipc does
// not take it and its bytes go through host staging. Enabling is per direction: each rank's
// thread enables its own when it maps the other's slots.
Result enablePeerAccessTo(const void* ptr) {
  cudaPointerAttributes attr{};
  ZCOLL_CHECK(cudaResult(cudaPointerGetAttributes(&attr, ptr), "cudaPointerGetAttributes"));
  int current = 0;
  ZCOLL_CHECK(cudaResult(cudaGetDevice(&current), "cudaGetDevice"));
  if (attr.type != cudaMemoryTypeDevice || attr.device == current) return zcollSuccess;
  int can = 0;
  ZCOLL_CHECK(cudaResult(cudaDeviceCanAccessPeer(&can, current, attr.device),
                         "cudaDeviceCanAccessPeer"));
  if (can == 0)
    return fail(zcollUnsupported, "cuda_ipc: device %d has no peer access to device %d, whose "
                "memory a rank of this process uses; that pair goes through host staging",
                current, attr.device);
  const cudaError_t err = cudaDeviceEnablePeerAccess(attr.device, 0);
  if (err == cudaErrorPeerAccessAlreadyEnabled) {
    (void)cudaGetLastError();
    return zcollSuccess;
  }
  return cudaResult(err, "cudaDeviceEnablePeerAccess");
}

class CudaIpc final : public DeviceIpc {
 public:
  explicit CudaIpc(const DriverFns& fns)
      : fns_(fns), pid_(static_cast<int32_t>(getpid())), process_(processToken()) {}
  ~CudaIpc() override;
  CudaIpc(const CudaIpc&) = delete;
  CudaIpc& operator=(const CudaIpc&) = delete;

  const char* name() const override { return "cuda"; }
  Result exportRange(const void* ptr, size_t bytes, IpcHandle* out) override;
  Result map(const IpcHandle& h, const void** out, MapUse use) override;
  bool mapped(const IpcHandle& h) override;
  void unmap(const IpcHandle& h) override;
  void unmapAll() override;
  Result startCopy(void* dst, const void* src, size_t bytes, uint64_t* ticket,
                   DeviceIpc::Lane lane, const DeviceFence* after) override;
  Result copyDone(uint64_t ticket, bool* done) override;
  Result drain(int waitMs) override;
  Result allocShared(size_t bytes, void** out) override;
  void freeShared(void* p) override;
  Result allocHost(size_t bytes, void** out) override;
  void freeHost(void* p) override;

 private:
  // A copy stream of a device (one per direction: DeviceIpc::Lane), and the events free for
  // reuse on it.
  struct CopyStream {
    int device;
    DeviceIpc::Lane direction;
    cudaStream_t stream;
    std::vector<cudaEvent_t> freeEvents;
  };
  struct Pending {
    cudaEvent_t event;
    size_t lane;
  };
  struct Mapping {
    void* base;          // the allocation's address in this process
    size_t size;         // its size; SIZE_MAX when unknown
    int device;          // the device current when it was opened
    bool opened;         // false: this process's own memory, nothing to close
  };

  Result laneFor(int device, DeviceIpc::Lane direction, size_t* lane);
  // Whether `ticket` is done, without recording an error: cudaSuccess, or the failing call's
  // error (the copy's, from its event).
  cudaError_t poll(uint64_t ticket, bool* done);
  // Retires `ticket` and every earlier ticket of its lane (copies of a lane end in order).
  void retireThrough(uint64_t ticket);
  Result drainWithin(int waitMs, bool quiet);
  // Whether h names memory this very process exported (same pid and the same handle).
  bool isOwnExport(const IpcHandle& h, size_t* size);
  // Opens h's allocation (or recognises this process's own) into *out.
  Result open(const IpcHandle& h, Mapping* out);
  Result evictOldest();
  void closeMapping(const Mapping& m);

  const DriverFns& fns_;
  const int32_t pid_;
  const uint64_t process_;  // base/process.h: tells this process apart from equal pids

  std::vector<CopyStream> lanes_;
  std::map<uint64_t, Pending> pending_;  // copies not known done, by ticket
  uint64_t issued_ = 0;                  // the newest ticket handed out

  IpcMappings<Mapping> mappings_;  // held ones counted, cached ones evicted least recent first

  std::unordered_map<void*, int> shared_;  // allocShared blocks -> their device
  std::vector<void*> pinned_;              // allocHost blocks
};

CudaIpc::~CudaIpc() {
  const bool settled = drainWithin(kDestroyDrainMs, /*quiet=*/true) != zcollTimeout;
  if (!settled) {
    // A copy may still read or write peer memory or our blocks: leaving them mapped and
    // allocated is safer than pulling them out from under the DMA.
    ZCOLL_WARN(LogSubsys::kNet,
               "cuda_ipc: copies still running after %d ms at teardown; leaving %zu peer "
               "mappings open and %zu shared blocks allocated",
               kDestroyDrainMs, mappings_.size(), shared_.size());
  } else {
    mappings_.forEach([this](const Mapping& m) { closeMapping(m); });
    for (const auto& kv : shared_) {
      DeviceGuard guard(kv.second);
      if (cudaFree(kv.first) != cudaSuccess) (void)cudaGetLastError();
    }
    for (void* p : pinned_)
      if (cudaFreeHost(p) != cudaSuccess) (void)cudaGetLastError();
    pinned_.clear();
  }
  mappings_.clear();
  shared_.clear();
  // Destroying an event or a stream with work outstanding is allowed: the work still completes.
  for (const auto& [ticket, p] : pending_) {
    if (cudaEventDestroy(p.event) != cudaSuccess) (void)cudaGetLastError();
  }
  pending_.clear();
  for (CopyStream& lane : lanes_) {
    DeviceGuard guard(lane.device);
    for (cudaEvent_t e : lane.freeEvents) {
      if (cudaEventDestroy(e) != cudaSuccess) (void)cudaGetLastError();
    }
    if (cudaStreamDestroy(lane.stream) != cudaSuccess) (void)cudaGetLastError();
  }
  lanes_.clear();
}

// ---- export and map ---------------------------------------------------------------------------

Result CudaIpc::exportRange(const void* ptr, size_t bytes, IpcHandle* out) {
  if (ptr == nullptr || out == nullptr)
    return fail(zcollInvalidArgument, "cuda_ipc exportRange: NULL %s",
                ptr == nullptr ? "pointer" : "handle");
  int device = 0;
  ZCOLL_CHECK(bindCurrentDevice(&device));
  const CUdeviceptr p = reinterpret_cast<CUdeviceptr>(ptr);
  CUdeviceptr base = 0;
  size_t size = 0;
  CUresult cr = fns_.getAddressRange(&base, &size, p);
  if (cr != CUDA_SUCCESS)
    return fail(zcollInvalidArgument,
                "cuda_ipc exportRange: %p is not device memory of this process "
                "(cuMemGetAddressRange: %s %d)",
                ptr, cuName(cr), static_cast<int>(cr));
  if (p < base || bytes > size || p - base > size - bytes)
    return fail(zcollInvalidArgument,
                "cuda_ipc exportRange: [%p, +%zu) runs past its allocation [%p, +%zu)", ptr, bytes,
                reinterpret_cast<void*>(base), size);

  // Legacy IPC shares cudaMalloc memory only. The driver says so up front when it can; the
  // attribute also tells which kind of memory it is, for the message.
  unsigned long long capable = 0;
  const bool known = pointerAttribute(fns_, CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE, base,
                                      &capable);
  cudaIpcMemHandle_t handle;
  std::memset(&handle, 0, sizeof(handle));
  cudaError_t err = cudaSuccess;
  if (!known || capable != 0) err = cudaIpcGetMemHandle(&handle, reinterpret_cast<void*>(base));
  if ((known && capable == 0) || err != cudaSuccess) {
    if (err != cudaSuccess) (void)cudaGetLastError();
    unsigned long long pool = 0, managed = 0;
    const char* what = "virtual-memory (cuMemCreate/cuMemMap) or other non-cudaMalloc memory";
    if (pointerAttribute(fns_, CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE, base, &pool) && pool != 0)
      what = "stream-ordered memory (cudaMallocAsync / a memory pool)";
    else if (pointerAttribute(fns_, CU_POINTER_ATTRIBUTE_IS_MANAGED, base, &managed) &&
             managed != 0)
      what = "managed memory (cudaMallocManaged)";
    char detail[160] = "";
    if (err != cudaSuccess)
      snprintf(detail, sizeof(detail), " (cudaIpcGetMemHandle: %s)", cudaGetErrorName(err));
    return fail(zcollUnsupported,
                "cuda_ipc exportRange: %p on device %d is %s, which CUDA IPC cannot share: "
                "cudaIpcGetMemHandle takes cudaMalloc allocations only%s",
                ptr, device, what, detail);
  }

  std::memset(out, 0, sizeof(*out));
  std::memcpy(out->opaque, &handle, sizeof(handle));
  out->base = static_cast<uint64_t>(base);
  out->offset = static_cast<uint64_t>(p - base);
  out->pid = pid_;
  out->process = process_;
  return zcollSuccess;
}

bool CudaIpc::isOwnExport(const IpcHandle& h, size_t* size) {
  *size = SIZE_MAX;
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess || cudaSetDevice(device) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  CUdeviceptr base = 0;
  size_t bytes = 0;
  if (fns_.getAddressRange(&base, &bytes, static_cast<CUdeviceptr>(h.base)) != CUDA_SUCCESS ||
      base != static_cast<CUdeviceptr>(h.base))
    return false;
  cudaIpcMemHandle_t mine;
  if (cudaIpcGetMemHandle(&mine, reinterpret_cast<void*>(base)) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  if (std::memcmp(&mine, h.opaque, sizeof(mine)) != 0) return false;
  *size = bytes;
  return true;
}

Result CudaIpc::map(const IpcHandle& h, const void** out, MapUse use) {
  if (out == nullptr) return fail(zcollInvalidArgument, "cuda_ipc map: NULL output");
  const Mapping* found = mappings_.find(h, use);
  if (found == nullptr) {
    Mapping m{};
    ZCOLL_CHECK(open(h, &m));
    try {
      found = &mappings_.add(h, m, use);
    } catch (const std::bad_alloc&) {
      closeMapping(m);
      return fail(zcollSystemError, "cuda_ipc map: out of memory");
    }
  }
  if (found->size != SIZE_MAX && h.offset > found->size)
    return fail(zcollInvalidArgument,
                "cuda_ipc map: offset %llu is past the end of the %zu-byte allocation of pid %d",
                static_cast<unsigned long long>(h.offset), found->size, h.pid);
  *out = static_cast<const uint8_t*>(found->base) + h.offset;
  return zcollSuccess;
}

Result CudaIpc::open(const IpcHandle& h, Mapping* out) {
  Mapping& m = *out;
  m.size = SIZE_MAX;
  size_t ownSize = SIZE_MAX;
  if (h.process == process_ && isOwnExport(h, &ownSize)) {
    // CUDA refuses to open a handle in the process that exported it; the address is ours.
    m.base = reinterpret_cast<void*>(static_cast<uintptr_t>(h.base));
    m.size = ownSize;
    m.opened = false;
    return enablePeerAccessTo(m.base);
  }
  if (mappings_.size() >= kMaxMappings) ZCOLL_CHECK(evictOldest());
  cudaIpcMemHandle_t handle;
  std::memcpy(&handle, h.opaque, sizeof(handle));
  int device = 0;
  ZCOLL_CHECK(cudaResult(cudaGetDevice(&device), "cudaGetDevice"));
  void* p = nullptr;
  cudaError_t err = cudaIpcOpenMemHandle(&p, handle, cudaIpcMemLazyEnablePeerAccess);
  if (err != cudaSuccess && h.process == process_) {
    // Our process token but the handle did not compare equal to ours (should a handle's bytes
    // ever differ between two cudaIpcGetMemHandle calls): CUDA refused it as our own. A peer
    // with an equal pid in another pid namespace carries another token, so it is never taken
    // for this process here (the second CUDA review: same-process detection by pid alone).
    (void)cudaGetLastError();
    ZCOLL_INFO(LogSubsys::kNet,
               "cuda_ipc map: handle of pid %d (this process) not opened (%s); using its "
               "address 0x%llx as this process's own memory",
               h.pid, cudaGetErrorName(err), static_cast<unsigned long long>(h.base));
    m.base = reinterpret_cast<void*>(static_cast<uintptr_t>(h.base));
    m.opened = false;
    return zcollSuccess;
  }
  if (err != cudaSuccess) {
    (void)cudaGetLastError();
    return fail(zcollCudaError,
                "cuda_ipc map: cudaIpcOpenMemHandle (allocation 0x%llx of pid %d, on device "
                "%d) failed: %s (%s)",
                static_cast<unsigned long long>(h.base), h.pid, device, cudaGetErrorName(err),
                cudaGetErrorString(err));
  }
  m.base = p;
  m.device = device;
  m.opened = true;
  CUdeviceptr rbase = 0;
  size_t rsize = 0;
  if (fns_.getAddressRange(&rbase, &rsize, reinterpret_cast<CUdeviceptr>(p)) == CUDA_SUCCESS &&
      rbase == reinterpret_cast<CUdeviceptr>(p))
    m.size = rsize;
  return zcollSuccess;
}

bool CudaIpc::mapped(const IpcHandle& h) {
  if (h.process == process_) return true;  // this process's own memory: used at its address
  return mappings_.contains(h);
}

void CudaIpc::unmap(const IpcHandle& h) {
  if (mappings_.holds(h) > 1) {  // another holder still uses the allocation: only count down
    Mapping kept;
    (void)mappings_.release(h, &kept);
    return;
  }
  if (!mappings_.contains(h)) return;
  if (drainWithin(kDestroyDrainMs, /*quiet=*/true) != zcollSuccess) return;  // still in use
  Mapping last;
  if (mappings_.release(h, &last)) closeMapping(last);
}

void CudaIpc::unmapAll() {
  // A copy may still read a mapping: close them only once the copies are done, else keep them.
  if (drainWithin(kDestroyDrainMs, /*quiet=*/true) != zcollSuccess) {
    ZCOLL_WARN(LogSubsys::kNet, "cuda_ipc: copies still running after %d ms; %zu peer mappings "
               "left open", kDestroyDrainMs, mappings_.size());
    return;
  }
  mappings_.forEach([this](const Mapping& m) { closeMapping(m); });
  mappings_.clear();
}

void CudaIpc::closeMapping(const Mapping& m) {
  if (!m.opened) return;
  DeviceGuard guard(m.device);
  cudaError_t err = cudaIpcCloseMemHandle(m.base);
  if (err != cudaSuccess) {
    (void)cudaGetLastError();
    ZCOLL_WARN(LogSubsys::kNet, "cuda_ipc: cudaIpcCloseMemHandle(%p) failed: %s", m.base,
               cudaGetErrorName(err));
  }
}

Result CudaIpc::evictOldest() {
  // A copy started earlier may still use the mapping about to be closed.
  ZCOLL_CHECK(drainWithin(kEvictDrainMs, /*quiet=*/false));
  Mapping oldest;
  if (mappings_.takeEvictable(&oldest)) closeMapping(oldest);  // none: every mapping is held
  return zcollSuccess;
}

// ---- copies -----------------------------------------------------------------------------------

Result CudaIpc::laneFor(int device, DeviceIpc::Lane direction, size_t* lane) {
  for (size_t i = 0; i < lanes_.size(); ++i) {
    if (lanes_[i].device == device && lanes_[i].direction == direction) {
      *lane = i;
      return zcollSuccess;
    }
  }
  cudaStream_t s = nullptr;
  ZCOLL_CHECK(cudaResult(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking),
                         "cuda_ipc: cudaStreamCreateWithFlags"));
  try {
    lanes_.push_back(CopyStream{device, direction, s, {}});
  } catch (const std::bad_alloc&) {
    (void)cudaStreamDestroy(s);
    return fail(zcollSystemError, "cuda_ipc: out of memory");
  }
  *lane = lanes_.size() - 1;
  return zcollSuccess;
}

Result CudaIpc::startCopy(void* dst, const void* src, size_t bytes, uint64_t* ticket,
                          DeviceIpc::Lane direction, const DeviceFence* after) {
  if (ticket == nullptr) return fail(zcollInvalidArgument, "cuda_ipc startCopy: NULL ticket");
  if (bytes != 0 && (dst == nullptr || src == nullptr))
    return fail(zcollInvalidArgument, "cuda_ipc startCopy: NULL %s with %zu bytes",
                dst == nullptr ? "destination" : "source", bytes);
  const bool moves = bytes != 0 && dst != src;
  const auto* fence = dynamic_cast<const CudaFence*>(after);
  if (after != nullptr && fence == nullptr)
    return fail(zcollInternalError, "cuda_ipc startCopy: a fence of another device kind");
  if (!moves && fence == nullptr) {
    // Nothing to move and nothing to wait for: done as soon as it is named.
    *ticket = ++issued_;
    return zcollSuccess;
  }

  int device = 0;
  ZCOLL_CHECK(cudaResult(cudaGetDevice(&device), "cudaGetDevice"));
  size_t lane = 0;
  ZCOLL_CHECK(laneFor(device, direction, &lane));
  CopyStream& l = lanes_[lane];
  // After the call's work before the post (the fence's event, recorded on the call's stream).
  if (fence != nullptr)
    ZCOLL_CHECK(cudaResult(cudaStreamWaitEvent(l.stream, fence->event, 0),
                           "cuda_ipc: cudaStreamWaitEvent (the call's fence)"));
  if (moves)
    ZCOLL_CHECK(cudaResult(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, l.stream),
                           "cuda_ipc: cudaMemcpyAsync"));

  cudaEvent_t ev = nullptr;
  if (!l.freeEvents.empty()) {
    ev = l.freeEvents.back();
    l.freeEvents.pop_back();
  } else {
    ZCOLL_CHECK(cudaResult(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming),
                           "cuda_ipc: cudaEventCreateWithFlags"));
  }
  Result r = cudaResult(cudaEventRecord(ev, l.stream), "cuda_ipc: cudaEventRecord");
  if (r == zcollSuccess) {
    try {
      pending_.emplace(issued_ + 1, Pending{ev, lane});
    } catch (const std::bad_alloc&) {
      r = fail(zcollSystemError, "cuda_ipc: out of memory");
    }
  }
  if (r != zcollSuccess) {
    (void)cudaEventDestroy(ev);
    return r;
  }
  *ticket = ++issued_;
  return zcollSuccess;
}

void CudaIpc::retireThrough(uint64_t ticket) {
  const size_t lane = pending_.at(ticket).lane;
  for (auto it = pending_.begin(); it != pending_.end() && it->first <= ticket;) {
    if (it->second.lane != lane) {
      ++it;
      continue;
    }
    try {
      lanes_[lane].freeEvents.push_back(it->second.event);
    } catch (const std::bad_alloc&) {
      (void)cudaEventDestroy(it->second.event);
    }
    it = pending_.erase(it);
  }
}

cudaError_t CudaIpc::poll(uint64_t ticket, bool* done) {
  auto it = pending_.find(ticket);
  if (it == pending_.end()) {  // retired, or never pending
    *done = true;
    return cudaSuccess;
  }
  cudaError_t err = cudaEventQuery(it->second.event);
  if (err == cudaErrorNotReady) {
    *done = false;
    return cudaSuccess;
  }
  if (err != cudaSuccess) {
    *done = false;
    return err;
  }
  retireThrough(ticket);  // copies of a lane complete in order: its earlier ones too
  *done = true;
  return cudaSuccess;
}

Result CudaIpc::copyDone(uint64_t ticket, bool* done) {
  if (done == nullptr) return fail(zcollInvalidArgument, "cuda_ipc copyDone: NULL output");
  if (ticket == 0 || ticket > issued_)
    return fail(zcollInvalidArgument, "cuda_ipc copyDone: ticket %llu was never issued (last %llu)",
                static_cast<unsigned long long>(ticket), static_cast<unsigned long long>(issued_));
  cudaError_t err = poll(ticket, done);
  if (err != cudaSuccess) {
    (void)cudaGetLastError();
    return fail(zcollCudaError, "cuda_ipc: copy %llu failed: %s (%s)",
                static_cast<unsigned long long>(ticket), cudaGetErrorName(err),
                cudaGetErrorString(err));
  }
  return zcollSuccess;
}

Result CudaIpc::drainWithin(int waitMs, bool quiet) {
  if (pending_.empty()) return zcollSuccess;
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(waitMs > 0 ? waitMs : 0);
  for (;;) {
    // The newest pending copy of each lane: done, its lane is.
    std::vector<uint64_t> newest(lanes_.size(), 0);
    for (const auto& [ticket, p] : pending_) newest[p.lane] = ticket;
    for (uint64_t ticket : newest) {
      if (ticket == 0) continue;
      bool done = false;
      cudaError_t err = poll(ticket, &done);
      if (err != cudaSuccess) {
        (void)cudaGetLastError();
        if (quiet) return zcollCudaError;
        return fail(zcollCudaError, "cuda_ipc: a copy failed: %s (%s)", cudaGetErrorName(err),
                    cudaGetErrorString(err));
      }
    }
    if (pending_.empty()) return zcollSuccess;
    if (std::chrono::steady_clock::now() >= deadline) {
      if (quiet) return zcollTimeout;
      return fail(zcollTimeout,
                  "cuda_ipc: %zu copies (tickets %llu..%llu) still running after %d ms",
                  pending_.size(), static_cast<unsigned long long>(pending_.begin()->first),
                  static_cast<unsigned long long>(pending_.rbegin()->first), waitMs);
    }
    std::this_thread::sleep_for(kPollInterval);
  }
}

Result CudaIpc::drain(int waitMs) { return drainWithin(waitMs, /*quiet=*/false); }

// ---- shared blocks ----------------------------------------------------------------------------

Result CudaIpc::allocShared(size_t bytes, void** out) {
  if (out == nullptr) return fail(zcollInvalidArgument, "cuda_ipc allocShared: NULL output");
  int device = 0;
  ZCOLL_CHECK(cudaResult(cudaGetDevice(&device), "cudaGetDevice"));
  void* p = nullptr;
  ZCOLL_CHECK(cudaResult(cudaMalloc(&p, bytes == 0 ? 1 : bytes),
                         "cudaMalloc (cuda_ipc shared block)"));
  try {
    shared_.emplace(p, device);
  } catch (const std::bad_alloc&) {
    (void)cudaFree(p);
    return fail(zcollSystemError, "cuda_ipc allocShared: out of memory");
  }
  *out = p;
  return zcollSuccess;
}

void CudaIpc::freeShared(void* p) {
  auto it = shared_.find(p);
  if (it == shared_.end()) {
    if (p != nullptr)
      ZCOLL_WARN(LogSubsys::kNet, "cuda_ipc freeShared: %p is not a block of this object", p);
    return;
  }
  DeviceGuard guard(it->second);
  if (cudaFree(p) != cudaSuccess) (void)cudaGetLastError();
  shared_.erase(it);
}

// ---- pinned host blocks (the staged transport's chunks) ---------------------------------------

Result CudaIpc::allocHost(size_t bytes, void** out) {
  if (out == nullptr) return fail(zcollInvalidArgument, "cuda_ipc allocHost: NULL output");
  void* p = nullptr;
  ZCOLL_CHECK(cudaResult(cudaHostAlloc(&p, bytes == 0 ? 1 : bytes, cudaHostAllocPortable),
                         "cudaHostAlloc (zcoll staging)"));
  pinned_.push_back(p);
  *out = p;
  return zcollSuccess;
}

void CudaIpc::freeHost(void* p) {
  for (auto it = pinned_.begin(); it != pinned_.end(); ++it) {
    if (*it != p) continue;
    if (cudaFreeHost(p) != cudaSuccess) (void)cudaGetLastError();
    pinned_.erase(it);
    return;
  }
}

}  // namespace

// ---- entry points -----------------------------------------------------------------------------

Result describeCudaDevice(DeviceIdentity* out) {
  if (out == nullptr) return fail(zcollInvalidArgument, "describeCudaDevice: NULL output");
  std::memset(out, 0, sizeof(*out));
  DeviceIdentity id;
  std::memset(&id, 0, sizeof(id));

  int device = 0;
  ZCOLL_CHECK(cudaResult(cudaGetDevice(&device), "cudaGetDevice"));
  // Only a device this process has already initialized (its primary context is active:
  // cudaSetDevice, an allocation, a kernel): a host-only job on a GPU machine must not get a
  // context and zcoll's device memory on device 0 from every rank. Asking creates no context.
  const DriverFns& fns = driverFns();
  CUdevice dev = 0;
  unsigned int flags = 0;
  int active = 0;
  if (fns.deviceGet != nullptr && fns.primaryCtxGetState != nullptr &&
      fns.deviceGet(&dev, device) == CUDA_SUCCESS &&
      fns.primaryCtxGetState(dev, &flags, &active) == CUDA_SUCCESS && active == 0)
    return zcollSuccess;  // present stays 0
  id.present = 1;
  id.ordinal = device;
  std::snprintf(id.kind, sizeof(id.kind), "%s", "cuda");

  char bus[64] = {};
  ZCOLL_CHECK(cudaResult(cudaDeviceGetPCIBusId(bus, static_cast<int>(sizeof(bus)), device),
                         "cudaDeviceGetPCIBusId"));
  bus[sizeof(bus) - 1] = '\0';
  std::string busId(bus);
  for (char& c : busId) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  // A 32-bit domain ("00000000:12:00.0") is written with 4 digits when its top half is zero, as
  // CUDA itself does, so that it fits the field; an id that still does not fit stays unknown.
  const size_t colon = busId.find(':');
  if (colon != std::string::npos && colon > 4) {
    size_t zeros = 0;
    while (zeros < colon - 4 && busId[zeros] == '0') ++zeros;
    busId.erase(0, zeros);
  }
  if (busId.size() < sizeof(id.busId)) std::memcpy(id.busId, busId.c_str(), busId.size() + 1);

  cudaDeviceProp prop;
  std::memset(&prop, 0, sizeof(prop));
  ZCOLL_CHECK(cudaResult(cudaGetDeviceProperties(&prop, device), "cudaGetDeviceProperties"));
  static_assert(sizeof(prop.uuid.bytes) == sizeof(id.uuid), "CUDA UUIDs are 16 bytes");
  std::memcpy(id.uuid, prop.uuid.bytes, sizeof(id.uuid));

  int unified = 0;
  ZCOLL_CHECK(cudaResult(cudaDeviceGetAttribute(&unified, cudaDevAttrUnifiedAddressing, device),
                         "cudaDeviceGetAttribute(cudaDevAttrUnifiedAddressing)"));
  id.ipc = unified == 1 ? 1 : 0;

  *out = id;
  return zcollSuccess;
}

bool cudaInUse() {
  static std::atomic<bool> seen{false};
  if (seen.load(std::memory_order_relaxed)) return true;
  const DriverFns& fns = driverFns();
  bool inUse = false;
  CUcontext ctx = nullptr;
  if (fns.ctxGetCurrent != nullptr && fns.ctxGetCurrent(&ctx) == CUDA_SUCCESS && ctx != nullptr)
    inUse = true;
  int count = 0;
  if (!inUse && fns.deviceGet != nullptr && fns.primaryCtxGetState != nullptr &&
      fns.deviceGetCount != nullptr && fns.deviceGetCount(&count) == CUDA_SUCCESS) {
    for (int d = 0; d < count && !inUse; ++d) {
      CUdevice dev = 0;
      unsigned int flags = 0;
      int active = 0;
      inUse = fns.deviceGet(&dev, d) == CUDA_SUCCESS &&
              fns.primaryCtxGetState(dev, &flags, &active) == CUDA_SUCCESS && active != 0;
    }
  }
  // Without these driver functions nothing can be told: asking is then the only way.
  if (fns.ctxGetCurrent == nullptr || fns.primaryCtxGetState == nullptr) inUse = true;
  if (inUse) seen.store(true, std::memory_order_relaxed);
  return inUse;
}

Result makeCudaIpc(std::unique_ptr<DeviceIpc>* out) {
  if (out == nullptr) return fail(zcollInvalidArgument, "makeCudaIpc: NULL output");
  const DriverFns& fns = driverFns();
  if (fns.getAddressRange == nullptr) return fail(fns.code, "cuda_ipc: %s", fns.why.c_str());
  CudaIpc* ipc = new (std::nothrow) CudaIpc(fns);
  if (ipc == nullptr) return fail(zcollSystemError, "makeCudaIpc: out of memory");
  out->reset(ipc);
  return zcollSuccess;
}

}  // namespace zcoll
