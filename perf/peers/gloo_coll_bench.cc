// The same measurement as perf/peers/mpi_coll_bench.c, over Gloo (Debian libgloo-dev, TCP on
// loopback), so perf/peers/intra_node.sh can put it beside zcoll and Open MPI:
//   gloo_coll_bench allgather|reduce_scatter|allreduce BYTES_PER_RANK ITERS WARMUP RANK SIZE DIR
// Ranks meet through a gloo FileStore in DIR. Prints (rank 0) one line:
// "<coll> <bytes per rank> <time us> <busbw GB/s>". Float sum, out of place (reduce-scatter is
// Gloo's in-place halving-doubling, the one it has). Sizes and bus bandwidth as in
// mpi_coll_bench.c.
#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/reduce_scatter.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/transport/tcp/device.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

void sum(void* c, const void* a, const void* b, size_t n) {
  float* out = static_cast<float*>(c);
  const float* x = static_cast<const float*>(a);
  const float* y = static_cast<const float*>(b);
  for (size_t i = 0; i < n; ++i) out[i] = x[i] + y[i];
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 8) {
    std::fprintf(stderr, "usage: %s allgather|reduce_scatter|allreduce BYTES ITERS WARMUP RANK "
                 "SIZE DIR\n", argv[0]);
    return 2;
  }
  const std::string coll = argv[1];
  const size_t count = std::strtoull(argv[2], nullptr, 10) / sizeof(float);
  const int iters = std::atoi(argv[3]), warmup = std::atoi(argv[4]);
  const int rank = std::atoi(argv[5]), w = std::atoi(argv[6]);
  gloo::transport::tcp::attr attr;
  attr.hostname = "127.0.0.1";
  auto device = gloo::transport::tcp::CreateDevice(attr);
  gloo::rendezvous::FileStore store(argv[7]);
  auto context = std::make_shared<gloo::rendezvous::Context>(rank, w);
  context->connectFullMesh(store, device);

  std::vector<float> small(count, float(rank)), big(count * w, float(rank));
  std::vector<int> recvElems(w, static_cast<int>(count));
  std::vector<float*> ptrs = {big.data()};
  gloo::ReduceScatterHalvingDoubling<float> reduceScatter(context, ptrs,
                                                          static_cast<int>(count * w), recvElems);
  auto run = [&] {
    if (coll == "allgather") {
      gloo::AllgatherOptions opts(context);
      opts.setInput(small.data(), count);
      opts.setOutput(big.data(), count * w);
      gloo::allgather(opts);
    } else if (coll == "allreduce") {
      gloo::AllreduceOptions opts(context);
      opts.setInput(small.data(), count);
      opts.setOutput(big.data(), count);
      opts.setReduceFunction(&sum);
      gloo::allreduce(opts);
    } else {
      reduceScatter.run();
    }
  };
  Clock::time_point start;
  for (int i = 0; i < warmup + iters; ++i) {
    if (i == warmup) {
      gloo::BarrierOptions b(context);
      gloo::barrier(b);
      start = Clock::now();
    }
    run();
  }
  gloo::BarrierOptions b(context);
  gloo::barrier(b);
  double t = std::chrono::duration<double>(Clock::now() - start).count() / iters;
  if (rank == 0) {
    const bool allreduce = coll == "allreduce";
    double size = double(count) * sizeof(float) * (allreduce ? 1 : w);
    double factor = allreduce ? 2.0 * (w - 1) / w : double(w - 1) / w;
    std::printf("%s %zu %.1f %.2f\n", coll.c_str(), count * sizeof(float), t * 1e6,
                size / t / 1e9 * factor);
  }
  return 0;
}
