#include "base/dtype.h"

namespace zcoll {

const char* dtypeName(zcollDataType_t t) {
  static const char* kNames[] = {"int8", "uint8", "int32", "uint32", "int64",
                                 "uint64", "half", "float", "double", "bfloat16"};
  return dtypeValid(t) ? kNames[t] : "invalid";
}

const char* opName(zcollRedOp_t op) {
  static const char* kNames[] = {"sum", "prod", "max", "min", "avg"};
  return opValid(op) ? kNames[op] : "invalid";
}

}  // namespace zcoll
