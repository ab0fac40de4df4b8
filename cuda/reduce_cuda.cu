// Element-wise reduction kernels, one per operation, templated over the storage type and the
// reduction; the element rules are reduce_math.h's (the same operations per element as the CPU
// kernels: the same bits). Vectorized: elements go in packs of N = 16 / (smallest element size of
// the operands), every operand read and written with 16-byte accesses, when one scalar head of
// fewer than N elements aligns every pointer to 16 bytes (all aligned, or all equally misaligned);
// the head, the tail and operands that cannot be aligned so run element by element. Per element
// the operation is the same either way.
#include "cuda/reduce_cuda.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <initializer_list>

#include "exec/reduce_math.h"

namespace zcoll {
namespace cuda {

namespace {

using redmath::Acc;

constexpr int kThreads = 256;
constexpr size_t kMaxBlocks = 4096;

// N elements of T, moved with 16-byte accesses (N * sizeof(T) is a multiple of 16).
template <typename T, int N>
struct alignas(16) Pack {
  static_assert(N * sizeof(T) % 16 == 0, "a pack is whole 16-byte words");
  T v[N];
};

template <int N, typename T>
__device__ __forceinline__ Pack<T, N> loadPack(const T* p) {
  Pack<T, N> r;
  const uint4* src = reinterpret_cast<const uint4*>(p);
  uint4* dst = reinterpret_cast<uint4*>(&r);
#pragma unroll
  for (size_t w = 0; w < sizeof(r) / 16; ++w) dst[w] = src[w];
  return r;
}

template <int N, typename T>
__device__ __forceinline__ void storePack(T* p, const Pack<T, N>& r) {
  const uint4* src = reinterpret_cast<const uint4*>(&r);
  uint4* dst = reinterpret_cast<uint4*>(p);
#pragma unroll
  for (size_t w = 0; w < sizeof(r) / 16; ++w) dst[w] = src[w];
}

// Elements per pack for operands of these types: 16 bytes of the smallest.
template <typename A, typename B = A>
constexpr int kPack = static_cast<int>(16 / (sizeof(A) < sizeof(B) ? sizeof(A) : sizeof(B)));

// How a launch splits [0, n): elements [0, head) and [head + nvec * N, n) one by one, packs
// v = 0..nvec-1 at head + v * N.
struct Split {
  size_t head = 0;
  size_t nvec = 0;
};

// The split for pack size N over operands (pointer, element size): head is the number of
// elements that makes the first operand 16-byte aligned; packs only if it aligns every operand.
struct Operand {
  const void* p;
  size_t size;
};
Split splitFor(size_t n, size_t N, std::initializer_list<Operand> ops) {
  Split s;
  s.head = n;  // default: all element by element
  const Operand& first = *ops.begin();
  size_t mis = reinterpret_cast<uintptr_t>(first.p) & 15;
  size_t headBytes = (16 - mis) & 15;
  if (headBytes % first.size != 0) return s;
  size_t head = headBytes / first.size;
  for (const Operand& o : ops) {
    if (((reinterpret_cast<uintptr_t>(o.p) + head * o.size) & 15) != 0) return s;
  }
  if (head >= n) return s;
  s.head = head;
  s.nvec = (n - head) / N;
  return s;
}

int blocksFor(size_t units) {
  return static_cast<int>(
      std::max<size_t>(1, std::min(kMaxBlocks, (units + kThreads - 1) / kThreads)));
}
// Threads for a split: one per pack or per single element, whichever are more.
int blocksFor(size_t n, size_t N, const Split& s) { return blocksFor(std::max(s.nvec, n - s.nvec * N)); }

// Runs vec(i) for each pack at i = head + v * N and one(i) for every other element of [0, n).
template <int N, typename One, typename Vec>
__device__ __forceinline__ void forEach(size_t n, Split s, One one, Vec vec) {
  size_t tid = blockIdx.x * size_t(blockDim.x) + threadIdx.x;
  size_t stride = size_t(gridDim.x) * blockDim.x;
  for (size_t v = tid; v < s.nvec; v += stride) vec(s.head + v * N);
  size_t tail = s.head + s.nvec * N;
  size_t singles = s.head + (n - tail);
  for (size_t k = tid; k < singles; k += stride) one(k < s.head ? k : tail + (k - s.head));
}

template <typename T>
__global__ void toAccKernel(typename Acc<T>::type* acc, const T* in, size_t n, Split s) {
  using A = typename Acc<T>::type;
  constexpr int N = kPack<T, A>;
  forEach<N>(
      n, s, [&](size_t i) { acc[i] = redmath::load(in[i]); },
      [&](size_t i) {
        Pack<T, N> x = loadPack<N>(in + i);
        Pack<A, N> r;
#pragma unroll
        for (int e = 0; e < N; ++e) r.v[e] = redmath::load(x.v[e]);
        storePack<N>(acc + i, r);
      });
}

template <typename T, zcollRedOp_t Op, typename In>
__global__ void accumulateKernel(typename Acc<T>::type* acc, const In* in, size_t n, Split s) {
  using A = typename Acc<T>::type;
  constexpr int N = kPack<A, In>;
  forEach<N>(
      n, s,
      [&](size_t i) { acc[i] = redmath::combine<A, Op>(acc[i], redmath::load(in[i])); },
      [&](size_t i) {
        Pack<A, N> r = loadPack<N>(acc + i);
        Pack<In, N> x = loadPack<N>(in + i);
#pragma unroll
        for (int e = 0; e < N; ++e) r.v[e] = redmath::combine<A, Op>(r.v[e], redmath::load(x.v[e]));
        storePack<N>(acc + i, r);
      });
}

template <typename T, zcollRedOp_t Op, bool Average>
__global__ void combineKernel(T* out, const T* a, const T* b, typename Acc<T>::type divisor,
                              size_t n, Split s) {
  using A = typename Acc<T>::type;
  constexpr int N = kPack<T>;
  auto f = [&](T x, T y) {
    if constexpr (Average) {
      return redmath::averageOfTwo(x, y, divisor);
    } else {
      return redmath::store<T>(redmath::combine<A, Op>(redmath::load(x), redmath::load(y)));
    }
  };
  forEach<N>(
      n, s, [&](size_t i) { out[i] = f(a[i], b[i]); },
      [&](size_t i) {
        Pack<T, N> x = loadPack<N>(a + i), y = loadPack<N>(b + i), r;
#pragma unroll
        for (int e = 0; e < N; ++e) r.v[e] = f(x.v[e], y.v[e]);
        storePack<N>(out + i, r);
      });
}

template <typename T, bool Average>
__global__ void fromAccKernel(T* out, const typename Acc<T>::type* acc,
                              typename Acc<T>::type divisor, size_t n, Split s) {
  using A = typename Acc<T>::type;
  constexpr int N = kPack<T, A>;
  auto f = [&](A x) {
    if constexpr (Average) {
      return redmath::divideStore<T>(x, divisor);
    } else {
      return redmath::store<T>(x);
    }
  };
  forEach<N>(
      n, s, [&](size_t i) { out[i] = f(acc[i]); },
      [&](size_t i) {
        Pack<A, N> x = loadPack<N>(acc + i);
        Pack<T, N> r;
#pragma unroll
        for (int e = 0; e < N; ++e) r.v[e] = f(x.v[e]);
        storePack<N>(out + i, r);
      });
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
    using A = typename Acc<T>::type;
    constexpr int N = kPack<T, A>;
    Split sp = splitFor(n, N, {{acc, sizeof(A)}, {in, sizeof(T)}});
    toAccKernel<T><<<blocksFor(n, N, sp), kThreads, 0, s>>>(static_cast<A*>(acc),
                                                            static_cast<const T*>(in), n, sp);
  }
};

template <typename T, zcollRedOp_t Op>
struct LaunchAccumulateOp {
  template <typename In>
  static void launch(cudaStream_t s, void* acc, const void* in, size_t n) {
    using A = typename Acc<T>::type;
    constexpr int N = kPack<A, In>;
    Split sp = splitFor(n, N, {{acc, sizeof(A)}, {in, sizeof(In)}});
    accumulateKernel<T, Op, In><<<blocksFor(n, N, sp), kThreads, 0, s>>>(
        static_cast<A*>(acc), static_cast<const In*>(in), n, sp);
  }
  static void run(cudaStream_t s, void* acc, const void* in, bool inIsAcc, size_t n) {
    if (inIsAcc) {
      launch<typename Acc<T>::type>(s, acc, in, n);
    } else {
      launch<T>(s, acc, in, n);
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
    constexpr int N = kPack<T>;
    A divisor = static_cast<A>(avgDivisor > 0 ? avgDivisor : 0);
    Split sp = splitFor(n, N, {{out, sizeof(T)}, {a, sizeof(T)}, {b, sizeof(T)}});
    T* o = static_cast<T*>(out);
    const T* x = static_cast<const T*>(a);
    const T* y = static_cast<const T*>(b);
    if constexpr (Op == zcollAvg) {
      if (divisor > A(0)) {
        combineKernel<T, Op, true><<<blocksFor(n, N, sp), kThreads, 0, s>>>(o, x, y, divisor, n,
                                                                            sp);
        return;
      }
    }
    combineKernel<T, Op, false><<<blocksFor(n, N, sp), kThreads, 0, s>>>(o, x, y, divisor, n, sp);
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
    constexpr int N = kPack<T, A>;
    Split sp = splitFor(n, N, {{out, sizeof(T)}, {acc, sizeof(A)}});
    T* o = static_cast<T*>(out);
    const A* x = static_cast<const A*>(acc);
    if (op == zcollAvg) {
      fromAccKernel<T, true><<<blocksFor(n, N, sp), kThreads, 0, s>>>(o, x, static_cast<A>(nranks),
                                                                      n, sp);
    } else {
      fromAccKernel<T, false><<<blocksFor(n, N, sp), kThreads, 0, s>>>(o, x, static_cast<A>(nranks),
                                                                       n, sp);
    }
  }
};

// One thread per element (grid-stride); the scalar from device memory when given, else the
// value passed. in may be out.
template <typename T>
__global__ void scaleKernel(T* out, const T* in, size_t n, const T* scalarOnDevice, T scalar) {
  const T s = scalarOnDevice != nullptr ? *scalarOnDevice : scalar;
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += stride)
    out[i] = redmath::scaleElement(in[i], s);
}

template <typename T>
struct LaunchScale {
  static void run(cudaStream_t s, void* out, const void* in, const void* scalar,
                  bool scalarOnDevice, size_t n) {
    T value{};
    if (!scalarOnDevice) std::memcpy(&value, scalar, sizeof(T));
    scaleKernel<T><<<blocksFor(n), kThreads, 0, s>>>(
        static_cast<T*>(out), static_cast<const T*>(in), n,
        scalarOnDevice ? static_cast<const T*>(scalar) : nullptr, value);
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

Result scale(void* out, const void* in, zcollDataType_t dtype, size_t n, const void* scalar,
             bool scalarOnDevice, cudaStream_t stream) {
  return launch<LaunchScale>("scale", dtype, n, stream, out, in, scalar, scalarOnDevice);
}

}  // namespace cuda
}  // namespace zcoll
