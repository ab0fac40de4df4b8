/* LD_PRELOAD shim for the GPU kit's step 5: one GPU seen as several by a program linked against
 * the shared CUDA runtime (libcudart.so.13), so that nccl-tests, which puts in-process rank i on
 * device gpu0 + i, can run 2 ranks (threads) on the one GPU of the lent machine.
 *
 *   ZCOLL_ONE_GPU_AS=2 LD_PRELOAD=one_gpu_as_many.so all_reduce_perf -t 2 -g 1 -p 1 ...
 *
 * cudaGetDeviceCount reports ZCOLL_ONE_GPU_AS (default 2) when the machine has fewer; every other
 * call that takes a device ordinal (cudaSetDevice, cudaGetDeviceProperties, cudaDeviceGetAttribute:
 * the ones nccl-tests imports) gets it modulo the real count. Built by tools/gpu_nccl_step.sh with
 * a version script naming libcudart.so.13's version node, so the program's versioned references
 * bind here. libzcoll_nccl.so links the CUDA runtime statically and is not affected. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>

typedef int cudaError_t;
struct cudaDeviceProp;

static void* next(const char* name) { return dlsym(RTLD_NEXT, name); }

static int real_count(void) {
  static int count = -1;
  if (count < 0) {
    cudaError_t (*f)(int*) = (cudaError_t (*)(int*))next("cudaGetDeviceCount");
    int n = 0;
    count = f != NULL && f(&n) == 0 && n > 0 ? n : 0;
  }
  return count;
}

static int mapped(int device) {
  const int n = real_count();
  return n > 0 && device >= 0 ? device % n : device;
}

cudaError_t cudaGetDeviceCount(int* count) {
  cudaError_t (*f)(int*) = (cudaError_t (*)(int*))next("cudaGetDeviceCount");
  cudaError_t rc = f(count);
  const char* as = getenv("ZCOLL_ONE_GPU_AS");
  const int want = as != NULL && atoi(as) > 0 ? atoi(as) : 2;
  if (rc == 0 && *count > 0 && *count < want) *count = want;
  return rc;
}

cudaError_t cudaSetDevice(int device) {
  cudaError_t (*f)(int) = (cudaError_t (*)(int))next("cudaSetDevice");
  return f(mapped(device));
}

cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp* prop, int device) {
  cudaError_t (*f)(struct cudaDeviceProp*, int) =
      (cudaError_t (*)(struct cudaDeviceProp*, int))next("cudaGetDeviceProperties");
  return f(prop, mapped(device));
}

cudaError_t cudaDeviceGetAttribute(int* value, int attr, int device) {
  cudaError_t (*f)(int*, int, int) = (cudaError_t (*)(int*, int, int))next("cudaDeviceGetAttribute");
  return f(value, attr, mapped(device));
}
