// The Python module zcoll._C: the backend class (torch.distributed's Backend methods come from
// its base), the ZeRO++ calls, and the helpers python/zcoll/__init__.py uses.
#include <torch/python.h>
#include <torch/csrc/utils/pybind.h>
#include <pybind11/chrono.h>

#include "backend.h"

namespace zcoll_torch ZCOLL_TORCH_HIDDEN {
namespace {

// Quantization settings from Python keyword arguments; 0 keeps zcoll's documented default. A
// value zcoll does not take is a ValueError here, before anything is issued (zcoll.h's ranges).
zcollQuantConfig_t quantConfig(const char* what, int bits, int intraBits, int blockSize,
                               bool symmetric, bool stochastic, uint64_t seed,
                               int pipelineDepth) {
  TORCH_CHECK_VALUE(bits == 0 || bits == 4 || bits == 8, "zcoll: ", what, ": bits=", bits,
                    " is not 4 or 8 (None: zcoll's default)");
  TORCH_CHECK_VALUE(intraBits == 0 || intraBits == 4 || intraBits == 8 || intraBits == 16,
                    "zcoll: ", what, ": intra_bits=", intraBits,
                    " is not 4, 8 or 16 (None: zcoll's default)");
  TORCH_CHECK_VALUE(blockSize == 0 || (blockSize >= 32 && blockSize <= 4096 && blockSize % 32 == 0),
                    "zcoll: ", what, ": block_size=", blockSize, " is not a multiple of 32 in "
                    "[32, 4096] (None: zcoll's default, 256)");
  TORCH_CHECK_VALUE(pipelineDepth >= 0 && pipelineDepth <= 64, "zcoll: ", what,
                    ": pipeline_depth=", pipelineDepth, " is not in [1, 64] (None: zcoll's "
                    "default)");
  zcollQuantConfig_t q = ZCOLL_QUANT_CONFIG_INITIALIZER;
  q.bits = bits;
  q.intraBits = intraBits;
  q.blockSize = blockSize;
  q.mode = symmetric ? zcollQuantSymmetric : zcollQuantAsymmetric;
  q.rounding = stochastic ? zcollRoundStochastic : zcollRoundNearestEven;
  q.seed = seed;
  q.pipelineDepth = pipelineDepth;
  return q;
}

pybind11::bytes getUniqueId() {
  zcollUniqueId id;
  zcollResult_t rc = zcollGetUniqueId(&id);
  if (rc != zcollSuccess) throwZcoll(rc, nullptr, "zcollGetUniqueId");
  return pybind11::bytes(id.internal, ZCOLL_UNIQUE_ID_BYTES);
}

}  // namespace
}  // namespace zcoll_torch

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  namespace py = pybind11;
  using zcoll_torch::ZcollBackend;
  py::module::import("torch.distributed");
  py::class_<ZcollBackend, c10d::Backend, c10::intrusive_ptr<ZcollBackend>>(m, "ZcollBackend")
      .def(py::init<const std::string&, int, int, int, const std::string&>(),
           py::arg("unique_id"), py::arg("rank"), py::arg("size"), py::arg("timeout_sec"),
           py::arg("comm_name") = "torch")
      // The group's communicator name: "torch:<group name>" (zcoll_info --status, dumps).
      .def_property_readonly("comm_name", &ZcollBackend::commName)
      .def("node_count", &ZcollBackend::nodeCount)
      .def("local_size", &ZcollBackend::localSize)
      .def("rebuild_from_secondary", &ZcollBackend::rebuildFromSecondary, py::arg("output"),
           py::arg("secondary"), py::arg("primary"), py::arg("shard_numel"),
           py::arg("total_numel"))
      .def("rebuild_from_buddy", &ZcollBackend::rebuildFromBuddy, py::arg("output"),
           py::arg("primary"), py::arg("copy"), py::arg("total_numel"))
      .def("buddy_copy", &ZcollBackend::buddyCopy, py::arg("copy"), py::arg("shard"))
      .def("buddy_copy_numel", &ZcollBackend::buddyCopyNumel, py::arg("numel"))
      // zcoll.get_stats / zcoll.reset_stats (python/zcoll/__init__.py, python/README.md)
      .def("get_stats",
           [](ZcollBackend& b) {
             zcollStats_t s = b.stats();
             py::dict d;
             const char* paths[zcollNumPaths] = {"self", "intra", "inter"};
             for (int p = 0; p < zcollNumPaths; ++p)
               d[py::str(std::string("bytes_sent_") + paths[p])] = s.bytesSent[p];
             for (int p = 0; p < zcollNumPaths; ++p)
               d[py::str(std::string("bytes_recv_") + paths[p])] = s.bytesRecv[p];
             d["op_count"] = s.opCount;
             return d;
           })
      .def("reset_stats", &ZcollBackend::resetStats)
      // new_group splitting a group (torch passes it as split_from): members call this with the
      // new group's ranks, non-members perform_nocolor_split; collective over this group.
      .def(
          "split_ranks",
          [](ZcollBackend& b, const std::vector<int>& ranks, std::chrono::milliseconds timeout,
             const std::string& commName) {
            return b.splitAs(ranks, c10::make_intrusive<c10d::Backend::Options>("zcoll", timeout),
                             commName.empty() ? b.commName() + ".split" : commName);
          },
          py::arg("ranks"), py::arg("timeout"), py::arg("comm_name") = "")
      .def(
          "perform_nocolor_split",
          [](ZcollBackend& b, const std::optional<at::Device>&) { b.splitNoColor(); },
          py::arg("device") = std::nullopt)
      .def(
          "quantized_all_gather",
          [](ZcollBackend& b, at::Tensor out, at::Tensor in, int bits, int blockSize,
             bool symmetric, bool stochastic, uint64_t seed) {
            return b.quantizedAllGather(
                out, in,
                zcoll_torch::quantConfig("quantized_all_gather", bits, 0, blockSize, symmetric,
                                         stochastic, seed, 0));
          },
          py::arg("output"), py::arg("input"), py::arg("bits"), py::arg("block_size"),
          py::arg("symmetric"), py::arg("stochastic"), py::arg("seed"))
      .def(
          "all_gather_hier",
          [](ZcollBackend& b, at::Tensor out, at::Tensor in, std::optional<at::Tensor> secondary,
             bool quantized, int bits, int blockSize, bool symmetric, bool stochastic,
             uint64_t seed) {
            std::optional<zcollQuantConfig_t> q;
            if (quantized)
              q = zcoll_torch::quantConfig("all_gather_hier", bits, 0, blockSize, symmetric,
                                           stochastic, seed, 0);
            return b.allGatherHier(out, in, secondary, q);
          },
          py::arg("output"), py::arg("input"), py::arg("secondary"), py::arg("quantized"),
          py::arg("bits"), py::arg("block_size"), py::arg("symmetric"), py::arg("stochastic"),
          py::arg("seed"))
      .def("all_gather_from_secondary", &ZcollBackend::allGatherFromSecondary, py::arg("output"),
           py::arg("secondary"))
      .def(
          "quantized_reduce_scatter",
          [](ZcollBackend& b, at::Tensor out, at::Tensor in, const c10d::ReduceOp& op, int bits,
             int intraBits, int blockSize, bool symmetric, bool stochastic, uint64_t seed,
             int pipelineDepth) {
            return b.quantizedReduceScatter(
                out, in, op,
                zcoll_torch::quantConfig("quantized_reduce_scatter", bits, intraBits, blockSize,
                                         symmetric, stochastic, seed, pipelineDepth));
          },
          py::arg("output"), py::arg("input"), py::arg("op"), py::arg("bits"),
          py::arg("intra_bits"), py::arg("block_size"), py::arg("symmetric"),
          py::arg("stochastic"), py::arg("seed"), py::arg("pipeline_depth"))
      .def(
          "quantized_all_reduce",
          [](ZcollBackend& b, at::Tensor tensor, const c10d::ReduceOp& op, int bits,
             int intraBits, int blockSize, bool symmetric, bool stochastic, uint64_t seed,
             int pipelineDepth, std::optional<at::Tensor> residual) {
            return b.quantizedAllReduce(
                tensor, op,
                zcoll_torch::quantConfig("quantized_all_reduce", bits, intraBits, blockSize,
                                         symmetric, stochastic, seed, pipelineDepth),
                residual);
          },
          py::arg("tensor"), py::arg("op"), py::arg("bits"), py::arg("intra_bits"),
          py::arg("block_size"), py::arg("symmetric"), py::arg("stochastic"), py::arg("seed"),
          py::arg("pipeline_depth"), py::arg("residual"))
      .def(
          "quantized_all_reduce_residual_bytes",
          [](ZcollBackend& b, int64_t numel, at::ScalarType dtype, int bits, int intraBits,
             int blockSize, bool symmetric, bool stochastic, uint64_t seed, int pipelineDepth) {
            return b.quantizedAllReduceResidualBytes(
                numel, dtype,
                zcoll_torch::quantConfig("quantized_all_reduce", bits, intraBits, blockSize,
                                         symmetric, stochastic, seed, pipelineDepth));
          },
          py::arg("numel"), py::arg("dtype"), py::arg("bits"), py::arg("intra_bits"),
          py::arg("block_size"), py::arg("symmetric"), py::arg("stochastic"), py::arg("seed"),
          py::arg("pipeline_depth"));
  m.def("get_unique_id", &zcoll_torch::getUniqueId);
  // The version of the libzcoll this process loaded, "X.Y.Z" (zcollGetVersion).
  m.def("library_version", [] {
    int v = 0;
    zcoll_torch::check(zcollGetVersion(&v), nullptr, "zcollGetVersion");
    return std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." +
           std::to_string(v % 100);
  });
  m.def("host_bytes", &zcoll_torch::hostBytes, py::arg("bytes"));
  // Whether CUDA tensors can be passed: this extension was built with CUDA and the libzcoll it
  // loaded recognises device buffers (a CUDA build, a device visible).
#ifdef ZCOLL_TORCH_CUDA
  m.attr("built_with_cuda") = true;
#else
  m.attr("built_with_cuda") = false;
#endif
  m.def("zcoll_takes_device_buffers", &zcoll_torch::zcollTakesDeviceBuffers);
  // Whether this build reports supports_shrinking and implements Backend.shrink (torch >= 2.10:
  // dist.shrink_group).
  m.attr("supports_shrink") = static_cast<bool>(ZCOLL_TORCH_SHRINK);
}
