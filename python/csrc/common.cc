#include "common.h"

#include <cstdlib>

namespace zcoll_torch ZCOLL_TORCH_HIDDEN {

std::string lastError(zcollComm_t comm) {
  const char* message = comm ? zcollGetLastError(comm) : nullptr;
  if (message == nullptr || *message == '\0') message = zcollGetLastError(nullptr);
  if (message == nullptr || *message == '\0') return "(zcoll gave no message)";
  return message;
}

std::exception_ptr zcollError(zcollResult_t rc, zcollComm_t comm, const char* what) {
  try {
    throwZcoll(rc, comm, what);
  } catch (...) {
    return std::current_exception();
  }
}

void throwZcoll(zcollResult_t rc, zcollComm_t comm, const char* what) {
  TORCH_CHECK_VALUE(rc != zcollInvalidArgument, "zcoll ", what, " failed: ",
                    zcollGetErrorString(rc), " (", static_cast<int>(rc), "): ", lastError(comm));
  TORCH_CHECK_WITH(DistBackendError, false, "zcoll ", what, " failed: ", zcollGetErrorString(rc),
                   " (", static_cast<int>(rc), "): ", lastError(comm));
}

std::string dtypeName(at::ScalarType t) {
  switch (t) {  // torch's Python names (torch.int32 rather than c10's "Int")
    case at::kBool: return "torch.bool";
    case at::kByte: return "torch.uint8";
    case at::kChar: return "torch.int8";
    case at::kShort: return "torch.int16";
    case at::kInt: return "torch.int32";
    case at::kLong: return "torch.int64";
    case at::kUInt16: return "torch.uint16";
    case at::kUInt32: return "torch.uint32";
    case at::kUInt64: return "torch.uint64";
    case at::kHalf: return "torch.float16";
    case at::kFloat: return "torch.float32";
    case at::kDouble: return "torch.float64";
    case at::kBFloat16: return "torch.bfloat16";
    case at::kComplexHalf: return "torch.complex32";
    case at::kComplexFloat: return "torch.complex64";
    case at::kComplexDouble: return "torch.complex128";
    case at::kFloat8_e4m3fn: return "torch.float8_e4m3fn";
    case at::kFloat8_e5m2: return "torch.float8_e5m2";
    default: return std::string("torch dtype ") + c10::toString(t);
  }
}

std::string reduceOpName(const c10d::ReduceOp& op) {
  switch (op.op_) {
    case c10d::ReduceOp::SUM: return "ReduceOp.SUM";
    case c10d::ReduceOp::AVG: return "ReduceOp.AVG";
    case c10d::ReduceOp::PRODUCT: return "ReduceOp.PRODUCT";
    case c10d::ReduceOp::MIN: return "ReduceOp.MIN";
    case c10d::ReduceOp::MAX: return "ReduceOp.MAX";
    case c10d::ReduceOp::BAND: return "ReduceOp.BAND";
    case c10d::ReduceOp::BOR: return "ReduceOp.BOR";
    case c10d::ReduceOp::BXOR: return "ReduceOp.BXOR";
    case c10d::ReduceOp::PREMUL_SUM: return "ReduceOp.PREMUL_SUM";
    default: return "ReduceOp " + std::to_string(static_cast<int>(op.op_));
  }
}

void checkQuantizable(const at::Tensor& t, const char* what) {
  at::ScalarType s = t.scalar_type();
  TORCH_CHECK_TYPE(s == at::kFloat || s == at::kHalf || s == at::kBFloat16, "zcoll: ", what,
                   " quantizes torch.float32, torch.float16 or torch.bfloat16 tensors, got ",
                   dtypeName(s));
}

zcollDataType_t toZcollType(const at::Tensor& t) {
  switch (t.scalar_type()) {
    case at::kChar: return zcollInt8;
    case at::kByte: return zcollUint8;
    case at::kBool: return zcollUint8;  // bytes, exact for gathers/broadcast; reductions rejected
    case at::kInt: return zcollInt32;
    case at::kLong: return zcollInt64;
    case at::kHalf: return zcollFloat16;
    case at::kFloat: return zcollFloat32;
    case at::kDouble: return zcollFloat64;
    case at::kBFloat16: return zcollBfloat16;
    default:
      TORCH_CHECK_TYPE(false, "zcoll: unsupported dtype ", dtypeName(t.scalar_type()),
                       " (supported: torch.int8, torch.uint8, torch.bool (no reductions), "
                       "torch.int32, torch.int64, torch.float16, torch.float32, torch.float64, "
                       "torch.bfloat16)");
  }
}

at::Tensor Reduction::scaled(const at::Tensor& t) const {
  if (factor) return at::mul(t, *factor).to(t.scalar_type());
  if (tensorFactor.defined()) {
    // A 0-dim factor keeps t's dtype (torch's promotion); multiplied in that dtype, as NCCL.
    return at::mul(t, tensorFactor.reshape({}).to(t.device(), t.scalar_type()));
  }
  return t;
}

Reduction toReduction(const c10d::ReduceOp& op, const at::Tensor& t) {
  TORCH_CHECK_TYPE(t.scalar_type() != at::kBool,
                   "zcoll: reductions on torch.bool tensors are not supported");
  Reduction r;
  switch (op.op_) {
    case c10d::ReduceOp::SUM: r.op = zcollSum; break;
    case c10d::ReduceOp::PRODUCT: r.op = zcollProd; break;
    case c10d::ReduceOp::MIN: r.op = zcollMin; break;
    case c10d::ReduceOp::MAX: r.op = zcollMax; break;
    case c10d::ReduceOp::AVG: r.op = zcollAvg; break;
    case c10d::ReduceOp::PREMUL_SUM: {
      TORCH_CHECK_TYPE(at::isFloatingType(t.scalar_type()),
                       "zcoll: ReduceOp.PREMUL_SUM needs a floating-point tensor (got ",
                       dtypeName(t.scalar_type()), ")");
      // NCCLPreMulSumSupplement: torch 2.11's name, kept as an alias by 2.15 (PreMulSumSupplement).
      const auto* s = dynamic_cast<const c10d::NCCLPreMulSumSupplement*>(op.supplement_.get());
      TORCH_CHECK_VALUE(s != nullptr, "zcoll: ReduceOp.PREMUL_SUM without its factor (make "
                        "it with dist._make_nccl_premul_sum(factor))");
      r.op = zcollSum;
      if (s->tensor_factor.defined()) {
        TORCH_CHECK_VALUE(s->tensor_factor.numel() == 1,
                          "zcoll: ReduceOp.PREMUL_SUM's factor tensor must have one element");
        r.tensorFactor = s->tensor_factor;
      } else {
        r.factor = s->double_factor;
      }
      break;
    }
    default:
      TORCH_CHECK_VALUE(false, "zcoll: unsupported ", reduceOpName(op), " (supported: SUM, "
                        "AVG, PRODUCT, MIN, MAX, PREMUL_SUM; BAND/BOR/BXOR are not)");
  }
  return r;
}

bool zcollTakesDeviceBuffers() {
  static const bool supported = [] {
    int s = 0;
    return zcollGetDeviceSupport(&s) == zcollSuccess && s == 1;
  }();
  return supported;
}

namespace {
void checkCudaTensor(const at::Tensor& t) {
#ifdef ZCOLL_TORCH_CUDA
  TORCH_CHECK(zcollTakesDeviceBuffers(), "zcoll: got a tensor on ", t.device(),
              ", but the libzcoll in this process takes no device buffers (built without CUDA, or "
              "no CUDA device visible to it: see zcoll_info)");
#else
  TORCH_CHECK(false, "zcoll: got a tensor on ", t.device(),
              ", but this build of zcoll's torch backend has no CUDA support (torch without CUDA, "
              "or no CUDA toolkit when it was built: reinstall with pip install ./python)");
#endif
}
}  // namespace

void checkTensor(const at::Tensor& t) {
  TORCH_CHECK_VALUE(t.device().is_cpu() || t.device().is_cuda(),
                    "zcoll: tensors must be on the CPU or a CUDA device (got ", t.device(), ")");
  if (t.device().is_cuda()) checkCudaTensor(t);
  TORCH_CHECK_TYPE(!t.is_sparse(), "zcoll: sparse tensors are not supported");
  toZcollType(t);
}

c10::Device deviceOf(const std::vector<at::Tensor>& a, const std::vector<at::Tensor>& b) {
  std::optional<c10::Device> device;
  for (const auto* list : {&a, &b}) {
    for (const auto& t : *list) {
      if (!t.defined()) continue;
      if (!device) device = t.device();
      TORCH_CHECK_VALUE(t.device() == *device, "zcoll: the tensors of one operation must be "
                        "on one device (got ", *device, " and ", t.device(), ")");
    }
  }
  return device.value_or(c10::Device(c10::kCPU));
}

bool zcollTimeoutFromEnv() {
  const char* v = std::getenv("ZCOLL_TIMEOUT");
  return v != nullptr && *v != '\0';
}

int asyncErrorHandlingFromEnv() {
  const char* v = std::getenv("ZCOLL_TORCH_ASYNC_ERROR_HANDLING");
  if (v == nullptr || *v == '\0') return 0;
  const std::string s(v);
  TORCH_CHECK_VALUE(s == "0" || s == "1" || s == "2" || s == "3",
                    "zcoll: ZCOLL_TORCH_ASYNC_ERROR_HANDLING=", s, " is not valid: 0 (the "
                    "default: failed Works report it, the group stays for shrink_group), 1 (abort "
                    "the group, then end the process), 2 (abort the group) or 3 (end the process)");
  return s[0] - '0';
}

bool deviceCallsReturnCompleteFromEnv() {
  const char* v = std::getenv("ZCOLL_DEVICE_CALLS");
  return v == nullptr || *v == '\0' || std::string(v) != "async";
}

}  // namespace zcoll_torch
