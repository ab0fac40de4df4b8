// ncclCollConfig_t (NCCL 2.31's per-collective configuration) and zcoll's options in its
// vendor extension list (include/zcoll/zcoll_nccl.h): which ZeRO++ collective a nccl*Config call
// runs, with which quantization. NCCL's own fields (CTAs, algorithm strings, profiler tag) have
// no meaning for zcoll and are ignored; options of other vendors too.
#pragma once

#include <nccl.h>

#include "choice.h"
#include "zcoll/zcoll_nccl.h"

namespace zcoll_nccl {

// Reads `config` (NULL: nothing) for a call of `kind`; ncclInvalidArgument naming `call` for a
// config not made with NCCL_COLLCONFIG_INITIALIZER, a circular or overlong list, or a zcoll
// option zcoll does not know or whose value is out of range.
ncclResult_t readCollConfig(const ncclCollConfig_t* config, CollKind kind, const char* call,
                            Choice* choice);

}  // namespace zcoll_nccl
