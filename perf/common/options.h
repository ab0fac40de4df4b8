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
  bool check = true;                    // -c
  zcollDataType_t dtype = zcollFloat32; // -d
  zcollRedOp_t op = zcollSum;           // -o
  int root = 0;                         // -r
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

// "4096", "8K", "16M", "1G" (binary multiples, case-insensitive). False on anything else.
bool parseSize(const char* text, size_t* bytes);

const char* typeName(zcollDataType_t t);
const char* opName(zcollRedOp_t op);

}  // namespace perf
}  // namespace zcoll
