#include "types.h"

namespace zcoll_nccl {

bool servedType(ncclDataType_t t) { return t >= ncclInt8 && t <= ncclBfloat16; }

zcollDataType_t movedType(ncclDataType_t t) {
  if (t == ncclFloat8e4m3 || t == ncclFloat8e5m2) return zcollUint8;
  return static_cast<zcollDataType_t>(t);
}

zcollDataType_t reducedType(ncclDataType_t t) { return static_cast<zcollDataType_t>(t); }

size_t typeSize(ncclDataType_t t) {
  switch (t) {
    case ncclInt8: case ncclUint8: case ncclFloat8e4m3: case ncclFloat8e5m2: return 1;
    case ncclFloat16: case ncclBfloat16: return 2;
    case ncclInt32: case ncclUint32: case ncclFloat32: return 4;
    case ncclInt64: case ncclUint64: case ncclFloat64: return 8;
    default: return 0;
  }
}

bool floatType(ncclDataType_t t) {
  return t == ncclFloat16 || t == ncclFloat32 || t == ncclBfloat16 || t == ncclFloat64;
}

bool builtinOp(ncclRedOp_t op) { return op >= ncclSum && op < ncclNumOps; }

const char* typeName(ncclDataType_t t) {
  static const char* const kNames[] = {"ncclInt8",    "ncclUint8",   "ncclInt32",
                                       "ncclUint32",  "ncclInt64",   "ncclUint64",
                                       "ncclFloat16", "ncclFloat32", "ncclFloat64",
                                       "ncclBfloat16", "ncclFloat8e4m3", "ncclFloat8e5m2"};
  if (t < 0 || t >= ncclNumTypes) return "an unknown datatype";
  return kNames[t];
}

}  // namespace zcoll_nccl
