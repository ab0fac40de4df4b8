// Host-side helpers of the CUDA quantization launchers: device detection, argument checks, the
// device array of chunk pointers of large sums, and launch error checking.
#include <atomic>

#include "cuda/quant_kernels.cuh"

namespace zcoll {
namespace quant {
namespace cuda {

bool cudaDeviceAvailable() {
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    (void)cudaGetLastError();  // "no device" is an answer here (init errors stay sticky)
    return false;
  }
  return count > 0;
}

namespace {
std::atomic<int> gGridLimit{0};  // setMaxGridForTesting; 0: kMaxGrid
}  // namespace

void setMaxGridForTesting(int blocks) { gGridLimit.store(blocks > 0 ? blocks : 0); }

namespace detail {

int gridFor(size_t threadsNeeded, int threadsPerBlock) {
  int limit = gGridLimit.load(std::memory_order_relaxed);
  size_t cap = limit > 0 && limit < kMaxGrid ? static_cast<size_t>(limit) : kMaxGrid;
  size_t g = (threadsNeeded + threadsPerBlock - 1) / threadsPerBlock;
  return static_cast<int>(g < 1 ? 1 : (g > cap ? cap : g));
}

Result checkQuantBuffer(const void* p, size_t n, const char* what, const char* name) {
  if (n == 0) return zcollSuccess;
  if (p == nullptr) return fail(zcollInvalidArgument, "%s (cuda): %s is NULL", what, name);
  if (!aligned16(p)) {
    return fail(zcollInvalidArgument, "%s (cuda): quantized buffer %s must be 16-byte aligned",
                what, name);
  }
  return zcollSuccess;
}

Result checkData(const void* p, size_t n, zcollDataType_t dt, const char* what, const char* name) {
  if (n == 0) return zcollSuccess;
  if (p == nullptr) return fail(zcollInvalidArgument, "%s (cuda): %s is NULL", what, name);
  if (reinterpret_cast<uintptr_t>(p) % dtypeSize(dt) != 0) {
    return fail(zcollInvalidArgument, "%s (cuda): %s is not aligned to its element size", what,
                name);
  }
  return zcollSuccess;
}

Result checkChunks(const void* const* chunks, int k, size_t n, const char* what) {
  if (k < 1) return fail(zcollInvalidArgument, "%s (cuda): k = %d, must be at least 1", what, k);
  if (n == 0) return zcollSuccess;
  if (chunks == nullptr) return fail(zcollInvalidArgument, "%s (cuda): chunks is NULL", what);
  for (int c = 0; c < k; ++c) ZCOLL_CHECK(checkQuantBuffer(chunks[c], n, what, "chunks[c]"));
  return zcollSuccess;
}

namespace {

// Up to kParamChunks pointers of a DeviceChunkList, written from the kernel's parameters.
struct ListFillArgs {
  const uint8_t* ptrs[kParamChunks];
  const uint8_t** dst;
  int count;
};

__global__ void fillChunkList(ListFillArgs a) {
  int i = static_cast<int>(threadIdx.x);
  if (i < a.count) a.dst[i] = a.ptrs[i];
}

}  // namespace

DeviceChunkList::~DeviceChunkList() {
  if (list_ != nullptr) (void)cudaFreeAsync(list_, stream_);  // after the launches issued so far
}

Result DeviceChunkList::fill(const void* const* chunks, int k, cudaStream_t stream,
                             const char* what) {
  void* p = nullptr;
  cudaError_t err = cudaMallocAsync(&p, static_cast<size_t>(k) * sizeof(const uint8_t*), stream);
  if (err != cudaSuccess) {
    (void)cudaGetLastError();  // reported here, not by a later checkLaunch
    return fail(zcollCudaError, "%s: cudaMallocAsync of the chunk list (k = %d) failed: %s (%s)",
                what, k, cudaGetErrorName(err), cudaGetErrorString(err));
  }
  list_ = static_cast<const uint8_t**>(p);
  stream_ = stream;
  for (int c0 = 0; c0 < k; c0 += kParamChunks) {
    ListFillArgs a{};
    a.count = k - c0 < kParamChunks ? k - c0 : kParamChunks;
    for (int i = 0; i < a.count; ++i) a.ptrs[i] = static_cast<const uint8_t*>(chunks[c0 + i]);
    a.dst = list_ + c0;
    fillChunkList<<<1, kParamChunks, 0, stream>>>(a);
    ZCOLL_CHECK(checkLaunch(what));  // the destructor frees the list
  }
  return zcollSuccess;
}

Result setChunkPtrs(const void* const* chunks, int k, cudaStream_t stream, const char* what,
                    ChunkPtrs* ptrs, DeviceChunkList* list, bool* useList) {
  *ptrs = ChunkPtrs{};
  *useList = k > kParamChunks;
  if (*useList) {
    ZCOLL_CHECK(list->fill(chunks, k, stream, what));
    ptrs->list = list->get();
    return zcollSuccess;
  }
  for (int c = 0; c < k; ++c) ptrs->params[c] = static_cast<const uint8_t*>(chunks[c]);
  return zcollSuccess;
}

Result checkLaunch(const char* what) {
  cudaError_t err = cudaGetLastError();
  if (err == cudaSuccess) return zcollSuccess;
  return fail(zcollCudaError, "%s kernel launch failed: %s (%s)", what, cudaGetErrorName(err),
              cudaGetErrorString(err));
}

}  // namespace detail
}  // namespace cuda
}  // namespace quant
}  // namespace zcoll
