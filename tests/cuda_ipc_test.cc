// CUDA's device identity and device IPC (cuda/cuda_ipc.h, transport/device_ipc.h) on a real GPU:
// the identity's bus id and UUID, export of an interior pointer (the allocation's base and the
// offset), a same-process handle mapped to its own address, copies device<->host with tickets,
// a copy that waits for a call's fence, stream-ordered memory refused, shared blocks exported, a
// second process (this binary run again) opening a handle this one exported, reading it and
// writing back, and a host-only job (another process) that creates no CUDA context. Skipped
// without a GPU; without one, the calls must fail cleanly (checked here too).
#include <gtest/gtest.h>

#if ZCOLL_HAVE_CUDA
#include <cuda_runtime_api.h>
#include <signal.h>
#include <spawn.h>
#include <strings.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "base/result.h"
#include "cuda/cuda_ipc.h"
#include "cuda/executor_cuda.h"
#include "transport/device_ipc.h"
#include "zcoll/zcoll.h"

extern char** environ;

namespace zcoll {
namespace {

constexpr const char* kChildHandleEnv = "ZCOLL_CUDA_IPC_TEST_HANDLE";
constexpr const char* kChildBytesEnv = "ZCOLL_CUDA_IPC_TEST_BYTES";
constexpr const char* kChildHostOnlyEnv = "ZCOLL_CUDA_IPC_TEST_HOST_ONLY";

bool haveGpu() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  return n > 0;
}

#define SKIP_WITHOUT_GPU()                                           \
  do {                                                               \
    if (!haveGpu()) GTEST_SKIP() << "no CUDA device available";      \
  } while (0)

uint8_t pattern(size_t i, uint8_t seed) { return static_cast<uint8_t>((i * 131u + seed) & 0xff); }

std::vector<uint8_t> patterned(size_t n, uint8_t seed) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = pattern(i, seed);
  return v;
}

std::string toHex(const void* p, size_t n) {
  static const char* kDigits = "0123456789abcdef";
  std::string s;
  const auto* b = static_cast<const uint8_t*>(p);
  for (size_t i = 0; i < n; ++i) {
    s += kDigits[b[i] >> 4];
    s += kDigits[b[i] & 15];
  }
  return s;
}

bool fromHex(const std::string& s, void* p, size_t n) {
  if (s.size() != 2 * n) return false;
  auto* b = static_cast<uint8_t*>(p);
  for (size_t i = 0; i < n; ++i) {
    unsigned v = 0;
    if (std::sscanf(s.c_str() + 2 * i, "%2x", &v) != 1) return false;
    b[i] = static_cast<uint8_t>(v);
  }
  return true;
}

// Waits for every copy, at most 10 s.
void drainOrFail(DeviceIpc& ipc) { ASSERT_EQ(ipc.drain(10000), zcollSuccess) << threadLastError(); }

// ---- without a GPU: clean failures --------------------------------------------------------------

TEST(CudaIpc, WithoutDeviceCallsFailCleanly) {
  if (haveGpu()) GTEST_SKIP() << "a device is present";
  DeviceIdentity id;
  std::memset(&id, 0xab, sizeof(id));
  EXPECT_EQ(describeCudaDevice(&id), zcollCudaError);
  EXPECT_EQ(id.present, 0);  // zeroed, not left half-filled
  EXPECT_NE(threadLastError().find("failed"), std::string::npos) << threadLastError();
  std::unique_ptr<DeviceIpc> ipc;
  Result r = makeCudaIpc(&ipc);
  if (r == zcollSuccess) {
    void* p = nullptr;
    EXPECT_EQ(ipc->allocShared(64, &p), zcollCudaError);
  } else {
    EXPECT_TRUE(r == zcollCudaError || r == zcollUnsupported) << resultName(r);
  }
}

// ---- identity -----------------------------------------------------------------------------------

TEST(CudaIpc, DescribeDeviceGivesBusIdAndUuid) {
  SKIP_WITHOUT_GPU();
  ASSERT_EQ(cudaFree(nullptr), cudaSuccess);  // an initialized device is described
  int dev = -1;
  ASSERT_EQ(cudaGetDevice(&dev), cudaSuccess);
  DeviceIdentity id;
  ASSERT_EQ(describeCudaDevice(&id), zcollSuccess) << threadLastError();
  EXPECT_EQ(id.present, 1);
  EXPECT_EQ(id.ordinal, dev);
  EXPECT_STREQ(id.kind, "cuda");
  ASSERT_NE(std::memchr(id.busId, '\0', sizeof(id.busId)), nullptr);
  EXPECT_TRUE(std::regex_match(std::string(id.busId),
                               std::regex("[0-9a-f]{4,8}:[0-9a-f]{2}:[0-9a-f]{2}\\.[0-7]")))
      << id.busId;
  char bus[64] = {};
  ASSERT_EQ(cudaDeviceGetPCIBusId(bus, sizeof(bus), dev), cudaSuccess);
  EXPECT_EQ(strcasecmp(bus, id.busId), 0) << bus << " vs " << id.busId;
  bool nonzero = false;
  for (uint8_t b : id.uuid) nonzero |= b != 0;
  EXPECT_TRUE(nonzero) << "UUID all zero";
  int unified = 0;
  ASSERT_EQ(cudaDeviceGetAttribute(&unified, cudaDevAttrUnifiedAddressing, dev), cudaSuccess);
  EXPECT_EQ(id.ipc, unified == 1 ? 1 : 0);
}

// ---- one process --------------------------------------------------------------------------------

class CudaIpcTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SKIP_WITHOUT_GPU();
    ASSERT_EQ(makeCudaIpc(&ipc_), zcollSuccess) << threadLastError();
    ASSERT_STREQ(ipc_->name(), "cuda");
  }
  void TearDown() override {
    ipc_.reset();
    for (void* p : blocks_) cudaFree(p);
  }
  void* deviceBlock(size_t bytes) {
    void* p = nullptr;
    EXPECT_EQ(cudaMalloc(&p, bytes), cudaSuccess);
    if (p != nullptr) blocks_.push_back(p);
    return p;
  }

  std::unique_ptr<DeviceIpc> ipc_;
  std::vector<void*> blocks_;
};

TEST_F(CudaIpcTest, ExportGivesTheAllocationBaseAndOffset) {
  constexpr size_t kBytes = 2 << 20;  // a multiple of any granularity the driver may round to
  auto* block = static_cast<uint8_t*>(deviceBlock(kBytes));
  ASSERT_NE(block, nullptr);
  IpcHandle h;
  ASSERT_EQ(ipc_->exportRange(block + 4099, 1000, &h), zcollSuccess) << threadLastError();
  EXPECT_EQ(h.base, reinterpret_cast<uint64_t>(block));
  EXPECT_EQ(h.offset, 4099u);
  EXPECT_EQ(h.pid, static_cast<int32_t>(getpid()));
  // The whole block, and a range ending exactly at its end.
  IpcHandle whole;
  ASSERT_EQ(ipc_->exportRange(block, kBytes, &whole), zcollSuccess) << threadLastError();
  EXPECT_EQ(std::memcmp(whole.opaque, h.opaque, sizeof(h.opaque)), 0)
      << "one allocation, one handle";
  EXPECT_EQ(whole.offset, 0u);
  ASSERT_EQ(ipc_->exportRange(block + kBytes - 16, 16, &h), zcollSuccess) << threadLastError();
  EXPECT_EQ(h.offset, kBytes - 16);
  // Past the end, and host memory.
  EXPECT_EQ(ipc_->exportRange(block + kBytes - 16, 17, &h), zcollInvalidArgument);
  EXPECT_NE(threadLastError().find("runs past"), std::string::npos) << threadLastError();
  std::vector<uint8_t> host(64);
  EXPECT_EQ(ipc_->exportRange(host.data(), host.size(), &h), zcollInvalidArgument);
  EXPECT_NE(threadLastError().find("not device memory"), std::string::npos) << threadLastError();
}

TEST_F(CudaIpcTest, SameProcessHandleMapsToItsOwnAddress) {
  auto* block = static_cast<uint8_t*>(deviceBlock(8192));
  ASSERT_NE(block, nullptr);
  IpcHandle h;
  ASSERT_EQ(ipc_->exportRange(block + 100, 200, &h), zcollSuccess) << threadLastError();
  const void* mapped = nullptr;
  ASSERT_EQ(ipc_->map(h, &mapped, MapUse::kCached), zcollSuccess) << threadLastError();
  EXPECT_EQ(mapped, block + 100);
  // Another object of this process (another rank's, as when ranks are threads) too, twice.
  std::unique_ptr<DeviceIpc> other;
  ASSERT_EQ(makeCudaIpc(&other), zcollSuccess) << threadLastError();
  for (int i = 0; i < 2; ++i) {
    mapped = nullptr;
    ASSERT_EQ(other->map(h, &mapped, MapUse::kCached), zcollSuccess) << threadLastError();
    EXPECT_EQ(mapped, block + 100);
  }
  // An offset far past the allocation is refused.
  IpcHandle bad = h;
  bad.offset = uint64_t{1} << 40;
  EXPECT_EQ(other->map(bad, &mapped, MapUse::kCached), zcollInvalidArgument);
}

TEST_F(CudaIpcTest, CopiesRoundTripWithTickets) {
  constexpr size_t kBytes = 3 * 1024 * 1024 + 5;
  void* dev = deviceBlock(kBytes);
  ASSERT_NE(dev, nullptr);
  std::vector<uint8_t> src = patterned(kBytes, 7), back(kBytes, 0);

  uint64_t t0 = 0, t1 = 0, t2 = 0, t3 = 0;
  ASSERT_EQ(ipc_->startCopy(back.data(), src.data(), 0, &t0), zcollSuccess);  // nothing pending
  bool done = false;
  ASSERT_EQ(ipc_->copyDone(t0, &done), zcollSuccess);
  EXPECT_TRUE(done) << "a 0-byte copy with nothing before it is done";

  ASSERT_EQ(ipc_->startCopy(dev, src.data(), kBytes, &t1), zcollSuccess) << threadLastError();
  ASSERT_EQ(ipc_->startCopy(back.data(), dev, kBytes, &t2), zcollSuccess) << threadLastError();
  ASSERT_EQ(ipc_->startCopy(back.data(), dev, 0, &t3), zcollSuccess) << threadLastError();
  EXPECT_EQ(t1, t0 + 1);
  EXPECT_EQ(t2, t1 + 1);
  EXPECT_EQ(t3, t2 + 1);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  done = false;
  while (!done && std::chrono::steady_clock::now() < deadline) {
    ASSERT_EQ(ipc_->copyDone(t3, &done), zcollSuccess) << threadLastError();
    if (!done) std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  ASSERT_TRUE(done);
  for (uint64_t t : {t1, t2}) {  // everything before a done ticket is done
    ASSERT_EQ(ipc_->copyDone(t, &done), zcollSuccess);
    EXPECT_TRUE(done);
  }
  EXPECT_EQ(back, src);
  EXPECT_EQ(ipc_->copyDone(t3 + 1, &done), zcollInvalidArgument) << "never issued";
  EXPECT_EQ(ipc_->copyDone(0, &done), zcollInvalidArgument);

  // Through a mapped handle, many copies, then drain.
  IpcHandle h;
  ASSERT_EQ(ipc_->exportRange(static_cast<uint8_t*>(dev) + 1000, 4096, &h), zcollSuccess);
  const void* mapped = nullptr;
  ASSERT_EQ(ipc_->map(h, &mapped, MapUse::kCached), zcollSuccess) << threadLastError();
  std::vector<uint8_t> chunk(4096, 0);
  uint64_t t = 0;
  for (int i = 0; i < 64; ++i)
    ASSERT_EQ(ipc_->startCopy(chunk.data(), mapped, chunk.size(), &t), zcollSuccess);
  drainOrFail(*ipc_);
  ASSERT_EQ(ipc_->copyDone(t, &done), zcollSuccess);
  EXPECT_TRUE(done);
  EXPECT_EQ(std::memcmp(chunk.data(), src.data() + 1000, chunk.size()), 0);
  EXPECT_EQ(ipc_->drain(0), zcollSuccess) << "nothing left";
}

// A copy on the inbound lane waits for a fence of a call's work (the CUDA executor's event):
// it reads what the executor's copies wrote, however long they run (issue 30: transfers wait
// for an event, not a host synchronization of the call's stream).
TEST_F(CudaIpcTest, CopiesWaitForTheCallsFence) {
  constexpr size_t kBytes = size_t(64) << 20;
  auto* a = static_cast<uint8_t*>(deviceBlock(kBytes));
  auto* b = static_cast<uint8_t*>(deviceBlock(kBytes));
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  std::vector<uint8_t> fill = patterned(kBytes, 5), back(kBytes, 0);
  ASSERT_EQ(cudaMemcpy(a, fill.data(), kBytes, cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemset(b, 0, kBytes), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  int device = 0;
  ASSERT_EQ(cudaGetDevice(&device), cudaSuccess);
  std::unique_ptr<Executor> exec;
  ASSERT_EQ(makeCudaExecutor(stream, device, &exec), zcollSuccess);
  for (int i = 0; i < 8; ++i) {  // work that takes a while: b ends as a
    ASSERT_EQ(exec->copy(b, a, kBytes), zcollSuccess);
    ASSERT_EQ(exec->copy(a, b, kBytes), zcollSuccess);
  }
  std::shared_ptr<DeviceFence> fence;
  ASSERT_EQ(exec->fence(&fence), zcollSuccess) << threadLastError();
  ASSERT_NE(fence, nullptr);
  uint64_t t = 0;
  ASSERT_EQ(ipc_->startCopy(back.data(), b, kBytes, &t, DeviceIpc::Lane::kIn, fence.get()),
            zcollSuccess) << threadLastError();
  fence.reset();  // the wait is queued: the event may go back to its pool
  drainOrFail(*ipc_);
  EXPECT_EQ(back, fill) << "the copy ran before the call's work it waits for";
  EXPECT_EQ(exec->flush(), zcollSuccess);
  exec.reset();
  cudaStreamDestroy(stream);
}

TEST_F(CudaIpcTest, StreamOrderedMemoryIsRefused) {
  int dev = 0, pools = 0;
  ASSERT_EQ(cudaGetDevice(&dev), cudaSuccess);
  if (cudaDeviceGetAttribute(&pools, cudaDevAttrMemoryPoolsSupported, dev) != cudaSuccess ||
      pools == 0) {
    cudaGetLastError();
    GTEST_SKIP() << "cudaMallocAsync is not supported on this device";
  }
  void* p = nullptr;
  ASSERT_EQ(cudaMallocAsync(&p, 1 << 20, nullptr), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(nullptr), cudaSuccess);
  IpcHandle h;
  EXPECT_EQ(ipc_->exportRange(static_cast<uint8_t*>(p) + 64, 256, &h), zcollUnsupported);
  EXPECT_NE(threadLastError().find("stream-ordered"), std::string::npos) << threadLastError();
  EXPECT_EQ(cudaGetLastError(), cudaSuccess) << "the refusal left a CUDA error behind";
  ASSERT_EQ(cudaFreeAsync(p, nullptr), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(nullptr), cudaSuccess);
}

TEST_F(CudaIpcTest, SharedBlocksExport) {
  void* p = nullptr;
  ASSERT_EQ(ipc_->allocShared(3000, &p), zcollSuccess) << threadLastError();
  ASSERT_NE(p, nullptr);
  IpcHandle h;
  ASSERT_EQ(ipc_->exportRange(p, 3000, &h), zcollSuccess) << threadLastError();
  EXPECT_EQ(h.base, reinterpret_cast<uint64_t>(p));
  EXPECT_EQ(h.offset, 0u);
  void* q = nullptr;
  ASSERT_EQ(ipc_->allocShared(0, &q), zcollSuccess) << threadLastError();  // 0 bytes: a block
  ASSERT_NE(q, nullptr);
  ipc_->freeShared(p);
  // q is left for the destructor to free.
}

// ---- two processes ------------------------------------------------------------------------------

// Runs this binary again with only `filter`, `env` added to the environment; its exit status.
int runChild(const std::string& filter, const std::vector<std::string>& env) {
  std::string exe = "/proc/self/exe";
  std::string arg = "--gtest_filter=" + filter;
  std::vector<char*> argv = {exe.data(), arg.data(), nullptr};
  std::vector<std::string> envStrings(env);
  for (char** e = environ; *e != nullptr; ++e) {
    if (std::strncmp(*e, "GTEST_", 6) == 0) continue;  // sharding, output files: the parent's
    envStrings.push_back(*e);
  }
  std::vector<char*> envp;
  for (std::string& s : envStrings) envp.push_back(s.data());
  envp.push_back(nullptr);
  pid_t pid = 0;
  int rc = posix_spawn(&pid, exe.c_str(), nullptr, nullptr, argv.data(), envp.data());
  if (rc != 0) {
    ADD_FAILURE() << "posix_spawn: " << std::strerror(rc);
    return -1;
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  int status = 0;
  for (;;) {
    pid_t w = waitpid(pid, &status, WNOHANG);
    if (w == pid) break;
    if (w < 0) {
      ADD_FAILURE() << "waitpid: " << std::strerror(errno);
      return -1;
    }
    if (std::chrono::steady_clock::now() > deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      ADD_FAILURE() << "the child process did not finish in 120 s";
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (WIFSIGNALED(status)) {
    ADD_FAILURE() << "the child process died of signal " << WTERMSIG(status);
    return -1;
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// The parent: exports the second quarter of a block filled with pattern 11; the child reads it
// through the handle and writes pattern 23 over the range's second half.
TEST_F(CudaIpcTest, AnotherProcessOpensTheHandle) {
  constexpr size_t kBlock = 1 << 20, kOffset = kBlock / 4, kBytes = kBlock / 4;
  auto* block = static_cast<uint8_t*>(deviceBlock(kBlock));
  ASSERT_NE(block, nullptr);
  std::vector<uint8_t> fill = patterned(kBlock, 11);
  ASSERT_EQ(cudaMemcpy(block, fill.data(), kBlock, cudaMemcpyHostToDevice), cudaSuccess);
  IpcHandle h;
  ASSERT_EQ(ipc_->exportRange(block + kOffset, kBytes, &h), zcollSuccess) << threadLastError();

  int rc = runChild("CudaIpcChild.OpensParentHandle",
                    {std::string(kChildHandleEnv) + "=" + toHex(&h, sizeof(h)),
                     std::string(kChildBytesEnv) + "=" + std::to_string(kBytes)});
  ASSERT_EQ(rc, 0) << "the child's checks failed (its output is above)";

  std::vector<uint8_t> after(kBlock);
  ASSERT_EQ(cudaMemcpy(after.data(), block, kBlock, cudaMemcpyDeviceToHost), cudaSuccess);
  for (size_t i = 0; i < kBlock; ++i) {
    const bool written = i >= kOffset + kBytes / 2 && i < kOffset + kBytes;
    const uint8_t want = written ? pattern(i - kOffset, 23) : pattern(i, 11);
    ASSERT_EQ(after[i], want) << "byte " << i << (written ? " (written by the child)" : "");
  }
}

// A job that communicates host buffers only, on a machine with GPUs, must not create a CUDA
// context (hundreds of MiB on GPU 0 per rank): zcoll asks pointer attributes only once the
// process uses CUDA (DeviceComponent::inUse). Run in a process of its own, which touches CUDA
// through nothing but zcoll.
TEST_F(CudaIpcTest, AHostOnlyJobCreatesNoContext) {
  EXPECT_EQ(runChild("CudaIpcChild.HostOnlyJob", {std::string(kChildHostOnlyEnv) + "=1"}), 0)
      << "the child's checks failed (its output is above)";
}

// Run only by AHostOnlyJobCreatesNoContext.
TEST(CudaIpcChild, HostOnlyJob) {
  if (std::getenv(kChildHostOnlyEnv) == nullptr)
    GTEST_SKIP() << "run by CudaIpcTest.AHostOnlyJobCreatesNoContext in a child process only";
  zcollUniqueId id;
  zcollComm_t comm = nullptr;
  ASSERT_EQ(zcollGetUniqueId(&id), zcollSuccess);
  ASSERT_EQ(zcollCommInitRank(&comm, 1, id, 0), zcollSuccess) << zcollGetLastError(nullptr);
  std::vector<float> x(1 << 16, 1.0f), y(1 << 16);
  ASSERT_EQ(zcollAllReduce(x.data(), y.data(), x.size(), zcollFloat32, zcollSum, comm, nullptr),
            zcollSuccess) << zcollGetLastError(comm);
  ASSERT_EQ(zcollAllGather(x.data(), y.data(), x.size(), zcollFloat32, comm, nullptr),
            zcollSuccess);
  ASSERT_EQ(zcollCommDestroy(comm), zcollSuccess);
  EXPECT_FALSE(cudaInUse()) << "a context exists after a host-only job";
  // Asked of the driver directly too (nothing here has created a context).
  using DeviceGet = int (*)(int*, int);
  using PrimaryState = int (*)(int, unsigned int*, int*);
  void* get = nullptr;
  void* state = nullptr;
  cudaDriverEntryPointQueryResult q1{}, q2{};
  ASSERT_EQ(cudaGetDriverEntryPointByVersion("cuDeviceGet", &get, 12000, cudaEnableDefault, &q1),
            cudaSuccess);
  ASSERT_EQ(cudaGetDriverEntryPointByVersion("cuDevicePrimaryCtxGetState", &state, 12000,
                                             cudaEnableDefault, &q2),
            cudaSuccess);
  int n = 0;
  ASSERT_EQ(cudaGetDeviceCount(&n), cudaSuccess);
  for (int d = 0; d < n; ++d) {
    int dev = 0, active = 0;
    unsigned int flags = 0;
    ASSERT_EQ(reinterpret_cast<DeviceGet>(get)(&dev, d), 0);
    ASSERT_EQ(reinterpret_cast<PrimaryState>(state)(dev, &flags, &active), 0);
    EXPECT_EQ(active, 0) << "device " << d << " has an active primary context";
  }
}

// Run only by AnotherProcessOpensTheHandle, in a process of its own.
TEST(CudaIpcChild, OpensParentHandle) {
  const char* hex = std::getenv(kChildHandleEnv);
  const char* bytesText = std::getenv(kChildBytesEnv);
  if (hex == nullptr || bytesText == nullptr)
    GTEST_SKIP() << "run by CudaIpcTest.AnotherProcessOpensTheHandle in a child process only";
  ASSERT_TRUE(haveGpu());
  IpcHandle h;
  ASSERT_TRUE(fromHex(hex, &h, sizeof(h))) << "bad " << kChildHandleEnv;
  ASSERT_NE(h.pid, static_cast<int32_t>(getpid()));
  const size_t bytes = std::strtoull(bytesText, nullptr, 10);
  ASSERT_GT(bytes, 1u);

  std::unique_ptr<DeviceIpc> ipc;
  ASSERT_EQ(makeCudaIpc(&ipc), zcollSuccess) << threadLastError();
  const void* peer = nullptr;
  ASSERT_EQ(ipc->map(h, &peer, MapUse::kHeld), zcollSuccess) << threadLastError();
  ASSERT_NE(peer, nullptr);
  // A second window carved from the same allocation (as any caching allocator hands out) shares
  // the mapping; deregistering it (unmap) must leave the first one readable: the second CUDA
  // review's defect closed the mapping under it (an illegal address on the reads below).
  IpcHandle second = h;
  second.offset = h.offset + 1;
  const void* again = nullptr;
  ASSERT_EQ(ipc->map(second, &again, MapUse::kHeld), zcollSuccess) << threadLastError();
  EXPECT_EQ(again, static_cast<const uint8_t*>(peer) + 1) << "a second map uses the open mapping";
  ipc->unmap(second);
  EXPECT_TRUE(ipc->mapped(h)) << "the first window's hold keeps the mapping open";

  std::vector<uint8_t> got(bytes, 0);
  uint64_t t = 0;
  ASSERT_EQ(ipc->startCopy(got.data(), peer, bytes, &t), zcollSuccess) << threadLastError();
  drainOrFail(*ipc);
  for (size_t i = 0; i < bytes; ++i)
    ASSERT_EQ(got[i], pattern(h.offset + i, 11)) << "byte " << i << " of the peer's range";

  // Write the second half back, from device memory of this process (through a shared block).
  std::vector<uint8_t> mine = patterned(bytes, 23);
  void* stage = nullptr;
  ASSERT_EQ(ipc->allocShared(bytes, &stage), zcollSuccess) << threadLastError();
  ASSERT_EQ(ipc->startCopy(stage, mine.data(), bytes, &t), zcollSuccess) << threadLastError();
  auto* dst = const_cast<uint8_t*>(static_cast<const uint8_t*>(peer)) + bytes / 2;
  ASSERT_EQ(ipc->startCopy(dst, static_cast<uint8_t*>(stage) + bytes / 2, bytes - bytes / 2, &t),
            zcollSuccess)
      << threadLastError();
  drainOrFail(*ipc);
  ipc->freeShared(stage);
  ipc.reset();  // closes the mapping
}

}  // namespace
}  // namespace zcoll

#else  // built without CUDA

TEST(CudaIpc, NotBuilt) { GTEST_SKIP() << "zcoll built without CUDA"; }

#endif
