#include "quantize_policy.h"

#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string>

#include "errors.h"
#include "log.h"

namespace zcoll_nccl {
namespace {

struct Policy {
  int allGatherBits = 0;
  int reduceScatterBits = 0;
  int allReduceBits = 0;
  size_t minBytes = 0;
  std::string error;  // non-empty: the value could not be parsed
  std::string text;
};

int bitsOf(const std::string& v) {
  if (v == "int8") return 8;
  if (v == "int4") return 4;
  return 0;
}

bool parseItem(const std::string& item, Policy* p) {
  const size_t colon = item.find(':');
  if (item.rfind("min=", 0) == 0) {
    char* end = nullptr;
    const char* digits = item.c_str() + 4;
    unsigned long long v = std::strtoull(digits, &end, 10);
    if (*digits == '\0' || *end != '\0') return false;
    p->minBytes = static_cast<size_t>(v);
    return true;
  }
  if (colon == std::string::npos) return false;
  const std::string coll = item.substr(0, colon);
  const int bits = bitsOf(item.substr(colon + 1));
  if (bits == 0) return false;
  if (coll == "allgather") p->allGatherBits = bits;
  else if (coll == "reducescatter") p->reduceScatterBits = bits;
  else if (coll == "allreduce") p->allReduceBits = bits;
  else return false;
  return true;
}

Policy parse() {
  Policy p;
  const char* v = std::getenv("ZCOLL_NCCL_QUANTIZE");
  if (v == nullptr || *v == '\0') return p;
  p.text = v;
  std::stringstream ss(v);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (!parseItem(item, &p)) {
      p.error = "ZCOLL_NCCL_QUANTIZE=" + p.text + ": '" + item +
                "' is not one of allgather:int8|int4, reducescatter:int8|int4, "
                "allreduce:int8|int4, min=BYTES";
      return p;
    }
  }
  logInfo("ZCOLL_NCCL_QUANTIZE=%s: plain NCCL calls of floating types quantized: allgather %s, "
          "reducescatter %s, allreduce %s, from %zu bytes per rank",
          v, p.allGatherBits ? (p.allGatherBits == 8 ? "int8 (qwZ)" : "int4 (qwZ)") : "exact",
          p.reduceScatterBits ? (p.reduceScatterBits == 8 ? "int8 (qgZ)" : "int4 (qgZ)") : "exact",
          p.allReduceBits ? (p.allReduceBits == 8 ? "int8" : "int4") : "exact", p.minBytes);
  return p;
}

const Policy& policy() {
  static const Policy p = parse();
  return p;
}

bool quantizableType(ncclDataType_t t) {
  return t == ncclFloat32 || t == ncclFloat16 || t == ncclBfloat16;
}

}  // namespace

ncclResult_t checkQuantizePolicy() {
  const Policy& p = policy();
  if (!p.error.empty()) return fail(ncclInvalidArgument, "%s", p.error.c_str());
  return ncclSuccess;
}

void applyQuantizePolicy(CollKind kind, ncclDataType_t type, ncclRedOp_t op, size_t sendBytes,
                         Choice* choice) {
  const Policy& p = policy();
  if (choice->explicitAlgo || !quantizableType(type) || sendBytes < p.minBytes) return;
  const bool sumLike = op == ncclSum || op == ncclAvg;
  if (kind == CollKind::kAllGather && p.allGatherBits) {
    choice->algo = Algo::kQwz;
    choice->quant.bits = p.allGatherBits;
  } else if (kind == CollKind::kReduceScatter && sumLike && p.reduceScatterBits) {
    choice->algo = Algo::kQgz;
    choice->quant.bits = p.reduceScatterBits;
    choice->quant.intraBits = p.reduceScatterBits;
  } else if (kind == CollKind::kAllReduce && sumLike && p.allReduceBits) {
    choice->algo = Algo::kQuantizedAllReduce;
    choice->quant.bits = p.allReduceBits;
    choice->quant.intraBits = p.allReduceBits;
  }
}

}  // namespace zcoll_nccl
