// hier_all_gather_perf: hpZ. Default: zcollAllGatherHier (forward) with INT8 rail traffic,
// filling a secondary shard. --bits 0: exact (no quantization); --from-secondary: times
// zcollAllGatherFromSecondary (backward) from a secondary shard filled by one forward call per
// size, so the inter column reads 0. Also --bits 4|8, --block N, --asym, --stochastic. Quantized,
// -d takes float, half, bfloat16 (or all); exact, every type.
// Size = the whole gathered buffer (as all_gather_perf). Needs the same ranks on every node.
#include <vector>

#include "base/dtype.h"
#include "common/device.h"
#include "common/registered_buffer.h"
#include "common/zeropp.h"

namespace zp = zcoll::perf;

namespace {

// The secondary shard of the current size, (re)filled by a forward call when the size changes;
// in device memory with --device 1 (the buffers of one call are all host or all device memory), in
// registered host memory with -R 1.
struct Secondary {
  std::vector<unsigned char> bytes;
  zp::RegisteredHostBuffer registeredBytes;
  zp::DeviceBuffer deviceBytes;
  void* ptr = nullptr;
  size_t count = static_cast<size_t>(-1);
  zcollDataType_t dtype = zcollFloat32;
};


}  // namespace

int main(int argc, char** argv) {
  zp::QuantFlags flags;
  if (!zp::takeQuantFlags(&argc, argv, &flags, /*exactAllowed=*/true)) return 2;
  static zcollQuantConfig_t storage;
  const zcollQuantConfig_t* quant = zp::quantConfig(flags, &storage);
  static Secondary sec;
  zp::Collective c = zp::allGatherShape(flags.fromSecondary ? "all_gather_from_secondary" : "hier_all_gather");
  if (flags.bits != 0) c.types = zp::quantizableTypes();  // exact (--bits 0): every type
  c.notes = {zp::describe(flags)};
  c.usage = zp::quantUsage("  --bits 0|4|8          bits per quantized value on the rail (0: "
                           "exact, no quantization), default 8", true);
  const bool backward = flags.fromSecondary;
  c.run = [quant, backward](const zp::RunArgs& a) {
    zcollComm_t comm = a.info->comm;
    size_t count = a.counts.count;
    if (sec.count != count || sec.dtype != a.dtype) {
      size_t bytes = count * a.info->nodes * zcoll::dtypeSize(a.dtype) + 1;
      if (a.device) {
        sec.ptr = sec.deviceBytes.ensure(bytes);  // the previous size's calls are complete
      } else if (a.registered) {
        sec.ptr = sec.registeredBytes.ensure(bytes);
      } else {
        sec.bytes.assign(bytes, 0);
        sec.ptr = sec.bytes.data();
      }
      sec.count = count;
      sec.dtype = a.dtype;
      if (backward) {  // fill it once per size (not timed when -w >= 1)
        zcollResult_t r = zcollAllGatherHier(a.send, a.recv, sec.ptr, count, a.dtype, quant, comm,
                                             a.stream);
        if (r != zcollSuccess) return r;
      }
    }
    if (backward)
      return zcollAllGatherFromSecondary(sec.ptr, a.recv, count, a.dtype, comm, a.stream);
    return zcollAllGatherHier(a.send, a.recv, sec.ptr, count, a.dtype, quant, comm, a.stream);
  };
  c.toleranceFor = [flags](zcollDataType_t t) { return zp::quantTolerance(flags, t); };
  c.extraColumns = zp::zeroppColumns();
  return zp::perfMain(argc, argv, c);
}
