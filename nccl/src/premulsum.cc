#include "premulsum.h"

#include <cstring>
#include <memory>

#include "comm.h"
#include "errors.h"
#include "groups.h"
#include "types.h"

namespace zcoll_nccl {

ncclResult_t resolveOp(ncclComm_t comm, ncclRedOp_t op, ncclDataType_t type, const char* call,
                       ResolvedOp* out) {
  if (builtinOp(op)) {
    out->op = static_cast<zcollRedOp_t>(op);
    return ncclSuccess;
  }
  std::lock_guard<std::mutex> lock(comm->mutex);
  const size_t i = static_cast<size_t>(op) - ncclNumOps;
  if (op < ncclNumOps || i >= comm->preMulOps.size() || !comm->preMulOps[i].live)
    return fail(ncclInvalidArgument, "%s: op %d is neither a built-in operator nor a PreMulSum "
                "of this comm", call, static_cast<int>(op));
  const ncclComm::PreMulOp& pm = comm->preMulOps[i];
  if (pm.datatype != type)
    return fail(ncclInvalidArgument, "%s: PreMulSum op %d was made for %s, the call is on %s",
                call, static_cast<int>(op), typeName(pm.datatype), typeName(type));
  out->op = zcollSum;
  out->preMul = true;
  std::memcpy(out->scalarBytes, pm.scalarBytes, sizeof(out->scalarBytes));
  out->deviceScalar = pm.deviceScalar;
  return ncclSuccess;
}

ncclResult_t PreMultiplied::prepare(const ResolvedOp& op, const void* src, size_t count,
                                    ncclDataType_t type, const char* call) {
  in_ = src;
  if (!op.preMul || count == 0) return ncclSuccess;
  if (src == nullptr) return fail(ncclInvalidArgument, "%s: sendbuff is NULL", call);
  int device = -1;
  ncclResult_t r = fromZcoll(zcollPointerGetDevice(src, &device), nullptr);
  if (r != ncclSuccess) return r;
  return device < 0 ? onHost(op, src, count, type, call) : onDevice(op, src, count, type, call);
}

ncclResult_t PreMultiplied::onHost(const ResolvedOp& op, const void* src, size_t count,
                                   ncclDataType_t type, const char* call) {
  if (op.deviceScalar != nullptr)
    return fail(ncclInvalidUsage, "%s: a PreMulSum whose scalar is in device memory "
                "(ncclScalarDevice) on host buffers: zcoll scales host buffers on the host, "
                "which cannot read it", call);
  hostScratch_.resize(count * typeSize(type));
  ncclResult_t r = fromZcoll(zcollScale(hostScratch_.data(), src, count, reducedType(type),
                                        op.scalarBytes, 0, comm_->z, nullptr), comm_->z);
  if (r == ncclSuccess) in_ = hostScratch_.data();
  return r;
}

ncclResult_t PreMultiplied::onDevice(const ResolvedOp& op, const void* src, size_t count,
                                     ncclDataType_t type, const char* call) {
  (void)call;
  ncclResult_t r = fromZcoll(zcollMemAllocAsync(&deviceScratch_, count * typeSize(type),
                                                comm_->z, stream_), comm_->z);
  if (r != ncclSuccess) return r;
  const bool onDevice = op.deviceScalar != nullptr;
  r = fromZcoll(zcollScale(deviceScratch_, src, count, reducedType(type),
                           onDevice ? op.deviceScalar : op.scalarBytes, onDevice ? 1 : 0,
                           comm_->z, stream_), comm_->z);
  if (r == ncclSuccess) in_ = deviceScratch_;
  return r;
}

// After the collective was issued on the stream: device scratch is freed in its order (after
// that collective's work); inside a group zcoll issues the collective at zcollGroupEnd, so host
// and device scratch are given back after it.
PreMultiplied::~PreMultiplied() {
  if (deviceScratch_ != nullptr) {
    zcollComm_t z = comm_->z;
    void* p = deviceScratch_;
    cudaStream_t s = stream_;
    auto release = [z, p, s] { zcollMemFreeAsync(p, z, s); };
    if (groupDepth() > 0) releaseAtGroupEnd(release);
    else release();
  }
  if (!hostScratch_.empty() && groupDepth() > 0) {
    auto kept = std::make_shared<std::vector<unsigned char>>(std::move(hostScratch_));
    releaseAtGroupEnd([kept] { kept->clear(); });
  }
}

}  // namespace zcoll_nccl

using namespace zcoll_nccl;

extern "C" {

ncclResult_t ncclRedOpCreatePreMulSum(ncclRedOp_t* op, void* scalar, ncclDataType_t datatype,
                                      ncclScalarResidence_t residence, ncclComm_t comm) {
  ncclResult_t r = readyComm(comm, "ncclRedOpCreatePreMulSum");
  if (r != ncclSuccess) return r;
  if (op == nullptr || scalar == nullptr)
    return fail(ncclInvalidArgument, "ncclRedOpCreatePreMulSum: op or scalar is NULL");
  if (!servedType(datatype))
    return fail(ncclInvalidArgument, "ncclRedOpCreatePreMulSum: datatype %d is not one zcoll "
                "reduces", static_cast<int>(datatype));
  if (residence != ncclScalarHostImmediate && residence != ncclScalarDevice)
    return fail(ncclInvalidArgument, "ncclRedOpCreatePreMulSum: residence %d", residence);
  // A device scalar is read by each call's kernel; without device support the "device" memory
  // is host memory, read now.
  int device = 0;
  zcollGetDeviceSupport(&device);
  ncclComm::PreMulOp pm{};
  pm.datatype = datatype;
  pm.live = true;
  if (residence == ncclScalarDevice && device) pm.deviceScalar = scalar;
  else std::memcpy(pm.scalarBytes, scalar, typeSize(datatype));
  std::lock_guard<std::mutex> lock(comm->mutex);
  comm->preMulOps.push_back(pm);
  *op = static_cast<ncclRedOp_t>(ncclNumOps + comm->preMulOps.size() - 1);
  return ncclSuccess;
}

ncclResult_t ncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm) {
  ncclResult_t r = readyComm(comm, "ncclRedOpDestroy");
  if (r != ncclSuccess) return r;
  std::lock_guard<std::mutex> lock(comm->mutex);
  const size_t i = static_cast<size_t>(op) - ncclNumOps;
  if (op < ncclNumOps || i >= comm->preMulOps.size() || !comm->preMulOps[i].live)
    return fail(ncclInvalidArgument, "ncclRedOpDestroy: op %d is not a live PreMulSum of this "
                "comm", static_cast<int>(op));
  comm->preMulOps[i].live = false;
  return ncclSuccess;
}

}  // extern "C"
