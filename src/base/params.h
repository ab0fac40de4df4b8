// One declarative table of every tunable: name (the ZCOLL_* environment variable), default,
// description. Values are read from the environment at each lookup, so tests can change them
// between communicators; `zcoll_info` prints the table with current values.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "zcoll/zcoll.h"

namespace zcoll {

enum class ParamType { kInt, kString };

struct ParamDesc {
  const char* name;          // environment variable, e.g. "ZCOLL_TIMEOUT"
  ParamType type;
  const char* defaultValue;  // as text
  const char* description;
};

// Every parameter: the table in params.cc, then the rows of each registered source.
const std::vector<ParamDesc>& allParams();

// Rows a higher layer owns (coll/ makes ZCOLL_ALGO_<KIND> from its table of collectives): the
// source is registered while the library loads and called once, at the first lookup or listing,
// so it may read other globals of its layer.
using ParamSource = std::vector<ParamDesc> (*)();
void registerParamSource(ParamSource source);

// Current value: the environment's if set to something non-empty (and, for ints, parsable),
// else the default. An empty variable counts as unset (as NCCL's). Looking up a name missing
// from the table is a programming error and aborts loudly.
int64_t paramInt(const char* name);
std::string paramString(const char* name);

// The one policy for bad values, applied when a communicator (or a unique id) is created: an
// integer parameter set to something that is not an integer fails with zcollInvalidArgument
// naming the variable and what it takes. (Values out of a parameter's range, and strings outside
// its set, are refused where they are read at init, by the same rule.)
zcollResult_t checkParamValues();

}  // namespace zcoll
