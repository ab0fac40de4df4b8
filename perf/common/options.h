// Command line of the perf binaries: nccl-tests' flags and their defaults.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "zcoll/zcoll.h"

namespace zcoll {
namespace perf {

struct Collective;

struct Options {
  size_t minBytes = size_t(32) << 20;   // -b
  size_t maxBytes = size_t(32) << 20;   // -e
  size_t stepBytes = size_t(1) << 20;   // -i (used when the step factor is 1)
  size_t stepFactor = 1;                // -f (> 1: multiply instead of add)
  int iters = 20;                       // -n
  int warmup = 5;                       // -w
  int check = 1;                        // -c N: checked calls per size and mode (0: none)
  zcollDataType_t dtype = zcollFloat32; // -d (the type of the current run under -d all)
  zcollRedOp_t op = zcollSum;           // -o (likewise under -o all)
  int root = 0;                         // -r (likewise under -r all)
  bool allTypes = false;                // -d all: one sweep per type the binary takes
  bool allOps = false;                  // -o all: one sweep per op the binary takes
  bool allRoots = false;                // -r all: one sweep per rank as root
  bool streamNull = false;              // -y 1: device calls on CUDA's default stream (NULL)
  int corruptRank = -1;                 // --test-corrupt: this rank spoils one checked value
  bool device = false;                  // --device: buffers in CUDA device memory, on a stream
  bool registered = false;              // -R: host buffers from zcollMemAllocHost
  // nccl-tests' flags, with their meaning (perf/README.md):
  int average = 3;         // -a: time over ranks: 0 rank 0's, 1 mean, 2 min, 3 max
  int aggIters = 1;        // -m: calls per timed iteration
  bool blocking = false;   // -z 1: wait for each call's stream before the next (device buffers)
  int timeoutSec = 0;      // -T: seconds any wait may last (0: ZCOLL_TIMEOUT)
  bool cpuTime = false;    // -C 1: report the process's CPU time instead of wall time
  int cycles = 1;          // -N: run the sweep this many times (0: until stopped)
  std::string outputFile;    // -J FILE: the results for plotting
  std::string outputFormat;  // --output-format csv|json; "": CSV for a FILE ending .csv, else JSON
};

// Parses argv into *opt. Returns -1 to go on, else the exit code to return at once
// (0 after -h, 2 after a usage error, with the message printed).
int parseOptions(int argc, char** argv, const Collective& coll, Options* opt);

// The sizes to run, in bytes: min, then +step or *factor while <= max.
std::vector<size_t> sizeList(const Options& opt);

// The runs -d all, -o all and -r all ask for, in nccl-tests' order (for each type: each op of a
// reducing collective, or each root of a rooted one), each a copy of `opt` with its dtype, op and
// root set; just `opt` without "all".
std::vector<Options> expandRuns(const Options& opt, const Collective& coll, int nranks);

// "4096", "8K", "16M", "1G" (binary multiples, case-insensitive). False on anything else.
bool parseSize(const char* text, size_t* bytes);

const char* typeName(zcollDataType_t t);
const char* opName(zcollRedOp_t op);

}  // namespace perf
}  // namespace zcoll
