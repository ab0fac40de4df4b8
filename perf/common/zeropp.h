// Shared by the ZeRO++ perf binaries (quantized_all_gather_perf, hier_all_gather_perf):
// quantization flags taken off the command line before the driver parses the rest, the
// documented error bound for the driver's inputs, and the wire-bytes / max-error columns.
#pragma once

#include <string>
#include <vector>

#include "common/driver.h"

namespace zcoll {
namespace perf {

struct QuantFlags {
  int bits = 8;            // --bits 4|8 (hier_all_gather_perf: 0 = exact, no quantization)
  int blockSize = 0;       // --block N (0: the collective's default, 256)
  bool asymmetric = false; // --asym
  bool stochastic = false; // --stochastic (seed 1)
  bool fromSecondary = false;  // --from-secondary (hier_all_gather_perf: time the backward call)
};

// Removes the flags above from argv and checks their values as the library would, so a bad one
// is a usage error before any rank starts: --bits 4|8 (also 0 where `exactAllowed`), --block 0
// or a multiple of 32 in [32, 4096]. Returns false on a bad value, with
// "PROG: --bits 3: takes 4 or 8" and a pointer to -h on stderr.
bool takeQuantFlags(int* argc, char** argv, QuantFlags* flags, bool exactAllowed = false);

// Reads the integer after flag argv[*i] (advancing *i) into *out, checked by `ok`; false, with
// "PROG: FLAG VALUE: takes WHAT" on stderr, when it is missing, not an integer or not ok.
bool takeIntFlag(int argc, char** argv, int* i, const char* what, bool (*ok)(int), int* out);

// The usage error line every refusal above ends with: "run 'PROG -h' for the options".
void pointToHelp(const char* prog);

// The float types the quantized collectives take (-d for the quantized binaries).
std::vector<zcollDataType_t> quantizableTypes();

// NULL when bits == 0 (exact), else `storage` filled from the flags.
const zcollQuantConfig_t* quantConfig(const QuantFlags& f, zcollQuantConfig_t* storage);

// The documented bound for the driver's inputs (integers in [0, 120], so every block's scale
// is at most 120/qmax): scale/2 (scale with stochastic rounding), plus the output dtype's
// rounding of values below 128, plus fp32 slack. 0 when bits == 0.
double quantTolerance(const QuantFlags& f, zcollDataType_t dtype);

// qgZ's error factor F (docs/ZEROPP.md "qgZ") for a layout of `nranks` on `nodes` and dtype t:
// ei + (1 + ei)/(2qe) on two hops (or the flat fallback), ei on one node, 1/(2qe) with one rank
// per node; q = 2^(bits-1) - 1; ei = 1/(2qi), or at intraBits 16 2^-8 for Float32 (bf16) and 0
// for Float16/Bfloat16 (exact); stochastic rounding doubles each 1/(2q).
double qgzFactor(int nranks, int nodes, int interBits, int intraBits, bool stochastic,
                 zcollDataType_t t);

// --intra-bits: 4, 8 or 16 (qgZ's intra-node hop as 16-bit floats); and how a note names it.
bool intraBitsOk(int v);
std::string intraHopName(int intraBits);

// A reduction's documented bound for the driver's inputs (non-negative integers, so every
// block's absmax is at most the rank's largest input A_s): F * sum_s A_s with fp32 slack
// (`slack` * sum_s A_s), divided by W for avg, plus `ulps` units of the output dtype.
double reduceTolerance(double factor, zcollRedOp_t op, int nranks, zcollDataType_t dtype,
                       double slack, int ulps);

// "wire(B)" and "inter(B)": bytes each rank sent to other ranks / to other nodes per call (max
// over ranks, from zcollCommGetStats); "maxerr": max |got - exact| over all checked elements.
std::vector<ExtraColumn> zeroppColumns();

// The `-h` lines of the shared flags above (Collective::usage): `bitsLine` describes --bits
// (its values and default differ per binary); --from-secondary only where `fromSecondary`.
std::vector<std::string> quantUsage(const std::string& bitsLine, bool fromSecondary);

// One line saying which quantization runs (printed by rank 0 before the table).
std::string describe(const QuantFlags& f);

}  // namespace perf
}  // namespace zcoll
