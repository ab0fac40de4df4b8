// Element-wise reduction kernels (grid-stride loops over n elements), one per operation,
// templated over the storage type and the reduction; the element rules are reduce_math.h's.
#include "cuda/reduce_cuda.h"

#include <algorithm>

#include "exec/reduce_math.h"

namespace zcoll {
namespace cuda {

namespace {

using redmath::Acc;

constexpr int kThreads = 256;
constexpr size_t kMaxBlocks = 4096;

int blocksFor(size_t n) {
  return static_cast<int>(std::max<size_t>(1, std::min(kMaxBlocks, (n + kThreads - 1) / kThreads)));
}

#define ZCOLL_GRID_STRIDE(i, n)                                                        \
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < (n);              \
       i += size_t(gridDim.x) * blockDim.x)

template <typename T>
__global__ void toAccKernel(typename Acc<T>::type* acc, const T* in, size_t n) {
  ZCOLL_GRID_STRIDE(i, n) acc[i] = redmath::load(in[i]);
}

template <typename T, zcollRedOp_t Op, typename In>
__global__ void accumulateKernel(typename Acc<T>::type* acc, const In* in, size_t n) {
  using A = typename Acc<T>::type;
  ZCOLL_GRID_STRIDE(i, n) acc[i] = redmath::combine<A, Op>(acc[i], redmath::load(in[i]));
}

template <typename T, zcollRedOp_t Op>
__global__ void combineKernel(T* out, const T* a, const T* b, typename Acc<T>::type divisor,
                              size_t n) {
  using A = typename Acc<T>::type;
  if (Op == zcollAvg && divisor > A(0)) {
    ZCOLL_GRID_STRIDE(i, n) out[i] = redmath::averageOfTwo(a[i], b[i], divisor);
    return;
  }
  ZCOLL_GRID_STRIDE(i, n) {
    out[i] = redmath::store<T>(redmath::combine<A, Op>(redmath::load(a[i]), redmath::load(b[i])));
  }
}

template <typename T>
__global__ void fromAccKernel(T* out, const typename Acc<T>::type* acc,
                              typename Acc<T>::type divisor, bool average, size_t n) {
  ZCOLL_GRID_STRIDE(i, n) {
    out[i] = average ? redmath::divideStore<T>(acc[i], divisor) : redmath::store<T>(acc[i]);
  }
}

Result checkLaunch(const char* what) {
  cudaError_t err = cudaGetLastError();
  if (err == cudaSuccess) return zcollSuccess;
  return fail(zcollCudaError, "%s kernel launch failed: %s (%s)", what, cudaGetErrorName(err),
              cudaGetErrorString(err));
}

// Run-time reduction -> template argument.
template <template <typename, zcollRedOp_t> class F, typename T, typename... Args>
void withOp(zcollRedOp_t op, Args&&... args) {
  switch (op) {
    case zcollSum: F<T, zcollSum>::run(args...); break;
    case zcollProd: F<T, zcollProd>::run(args...); break;
    case zcollMax: F<T, zcollMax>::run(args...); break;
    case zcollMin: F<T, zcollMin>::run(args...); break;
    case zcollAvg: F<T, zcollAvg>::run(args...); break;
    default: break;
  }
}

template <typename T>
struct LaunchToAcc {
  static void run(cudaStream_t s, void* acc, const void* in, size_t n) {
    toAccKernel<T><<<blocksFor(n), kThreads, 0, s>>>(static_cast<typename Acc<T>::type*>(acc),
                                                     static_cast<const T*>(in), n);
  }
};

template <typename T, zcollRedOp_t Op>
struct LaunchAccumulateOp {
  static void run(cudaStream_t s, void* acc, const void* in, bool inIsAcc, size_t n) {
    using A = typename Acc<T>::type;
    if (inIsAcc) {
      accumulateKernel<T, Op, A><<<blocksFor(n), kThreads, 0, s>>>(static_cast<A*>(acc),
                                                                   static_cast<const A*>(in), n);
    } else {
      accumulateKernel<T, Op, T><<<blocksFor(n), kThreads, 0, s>>>(static_cast<A*>(acc),
                                                                   static_cast<const T*>(in), n);
    }
  }
};
template <typename T>
struct LaunchAccumulate {
  static void run(cudaStream_t s, void* acc, const void* in, bool inIsAcc, zcollRedOp_t op,
                  size_t n) {
    withOp<LaunchAccumulateOp, T>(op, s, acc, in, inIsAcc, n);
  }
};

template <typename T, zcollRedOp_t Op>
struct LaunchCombineOp {
  static void run(cudaStream_t s, void* out, const void* a, const void* b, int avgDivisor,
                  size_t n) {
    using A = typename Acc<T>::type;
    combineKernel<T, Op><<<blocksFor(n), kThreads, 0, s>>>(
        static_cast<T*>(out), static_cast<const T*>(a), static_cast<const T*>(b),
        static_cast<A>(avgDivisor > 0 ? avgDivisor : 0), n);
  }
};
template <typename T>
struct LaunchCombine {
  static void run(cudaStream_t s, void* out, const void* a, const void* b, zcollRedOp_t op,
                  int avgDivisor, size_t n) {
    withOp<LaunchCombineOp, T>(op, s, out, a, b, avgDivisor, n);
  }
};

template <typename T>
struct LaunchFromAcc {
  static void run(cudaStream_t s, void* out, const void* acc, zcollRedOp_t op, int nranks,
                  size_t n) {
    using A = typename Acc<T>::type;
    fromAccKernel<T><<<blocksFor(n), kThreads, 0, s>>>(
        static_cast<T*>(out), static_cast<const A*>(acc), static_cast<A>(nranks),
        op == zcollAvg, n);
  }
};

// Launches F<T> for dtype over n elements (nothing for n = 0) and checks the launch.
template <template <typename> class F, typename... Args>
Result launch(const char* what, zcollDataType_t dtype, size_t n, Args&&... args) {
  if (n == 0) return zcollSuccess;
  redmath::dispatchDtype<F>(dtype, args..., n);
  return checkLaunch(what);
}

}  // namespace

Result toAcc(void* acc, const void* in, zcollDataType_t dtype, size_t n, cudaStream_t stream) {
  return launch<LaunchToAcc>("toAcc", dtype, n, stream, acc, in);
}

Result accumulate(void* acc, const void* in, bool inIsAcc, zcollDataType_t dtype, zcollRedOp_t op,
                  size_t n, cudaStream_t stream) {
  return launch<LaunchAccumulate>("accumulate", dtype, n, stream, acc, in, inIsAcc, op);
}

Result combine(void* out, const void* a, const void* b, zcollDataType_t dtype, zcollRedOp_t op,
               int avgDivisor, size_t n, cudaStream_t stream) {
  return launch<LaunchCombine>("combine", dtype, n, stream, out, a, b, op, avgDivisor);
}

Result fromAcc(void* out, const void* acc, zcollDataType_t dtype, zcollRedOp_t op, int nranks,
               size_t n, cudaStream_t stream) {
  return launch<LaunchFromAcc>("fromAcc", dtype, n, stream, out, acc, op, nranks);
}

}  // namespace cuda
}  // namespace zcoll
