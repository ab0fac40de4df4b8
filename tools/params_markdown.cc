// docs/ENVIRONMENT.md from the parameter table (params_markdown.h).
#include "params_markdown.h"

#include <string>

#include "base/params.h"

namespace zcoll {
namespace {

// Environment variables zcoll reads that are not its parameters (not in base/params.cc): the
// launchers' rank variables, UCX's and CUDA's own, and the Python package's build switches.
// Keep in step with the getenv calls (tests/scripts/environment_page.sh checks every name a
// getenv in src/ reads is on the page).
struct OtherVariable {
  const char* names;    // as shown: "`RANK`, `WORLD_SIZE`"
  const char* readBy;
  const char* meaning;
};

constexpr OtherVariable kOtherVariables[] = {
    {"`RANK`, `WORLD_SIZE`", "`zcollCommInitFromEnv`",
     "This rank and the number of ranks (torchrun, `tools/zcollrun`). The first pair set, in "
     "this order, is used."},
    {"`OMPI_COMM_WORLD_RANK`, `OMPI_COMM_WORLD_SIZE`", "`zcollCommInitFromEnv`",
     "The same, under Open MPI's `mpirun`."},
    {"`PMI_RANK`, `PMI_SIZE`", "`zcollCommInitFromEnv`", "The same, under a PMI launcher."},
    {"`SLURM_PROCID`, `SLURM_NTASKS`", "`zcollCommInitFromEnv`", "The same, under `srun`."},
    {"`MASTER_ADDR`, `MASTER_PORT`", "`zcollCommInitFromEnv`",
     "When `ZCOLL_COMM_ID` is empty: the rendezvous is at `MASTER_ADDR`, port `MASTER_PORT`+1 "
     "(torchrun's own store owns `MASTER_PORT`)."},
    {"`UCX_TLS`", "the UCX transport, and UCX",
     "Set: UCX starts with these transports only. Unset: UCX's default, and when its "
     "shared-memory transports cannot start (a small /dev/shm) zcoll starts UCX without them "
     "(`^sm`), with a warning."},
    {"`UCX_RNDV_THRESH`", "the UCX transport, and UCX",
     "Unset, on a machine with no RDMA device, for a UCX worker that carries no node peers: zcoll "
     "sets UCX's rendezvous threshold to `inf` (large messages go eagerly over TCP). Set: UCX's "
     "own choice is kept."},
    {"`UCX_NET_DEVICES`", "UCX itself",
     "The network devices UCX may use (`eth0`, `mlx5_0:1`, `lo`); ctest sets `lo`. See "
     "docs/MULTI_NODE.md."},
    {"`CUDA_DEVICE_MAX_CONNECTIONS`", "device calls",
     "`1`: calls on device buffers return complete, as with `ZCOLL_DEVICE_CALLS=sync`."},
    {"`ZCOLL_BUILD_DIR`", "python/setup.py (building the torch backend)",
     "The build directory whose libzcoll.so the package bundles. Default: `../build` when it "
     "holds one; else setup.py builds the library itself."},
    {"`ZCOLL_TORCH_CUDA`", "python/setup.py (building the torch backend)",
     "`1` or `0`: build the backend with or without CUDA tensors. Default: with them when torch "
     "has CUDA and a CUDA toolkit is found."},
    {"`ZCOLL_CORE_REQUIREMENT`", "python/setup.py (building the torch backend)",
     "The zcoll-core requirement the torch package's metadata names, for a wheel meant for an "
     "index (e.g. `zcoll-core==0.1.0`). Default: zcoll-core from this checkout (`python/core`)."},
    {"`ZCOLL_TORCH_ASYNC_ERROR_HANDLING`", "the torch backend's watchdog (python/README.md)",
     "What the watchdog does once a group's communicator reports an asynchronous error (it always "
     "warns once and fails the outstanding CUDA Works): `0` nothing more (default: the group "
     "stays, for `shrink_group`), `1` abort the group and end the process, `2` abort the group, "
     "`3` end the process; torch's TORCH_NCCL_ASYNC_ERROR_HANDLING values. Read at group "
     "creation; anything else is a ValueError."},
    {"`ZCOLL_LIBRARY`", "zcoll.core (python/zcoll/core/_library.py)",
     "A libzcoll.so path that zcoll.core loads instead of the copy installed beside the package "
     "(zcoll-core's), e.g. `build/libzcoll.so` to test a build."},
    {"`ZCOLL_JAX_LIBRARY`", "zcoll.jax (python/zcoll/jax/_targets.py)",
     "A libzcoll_jax.so path (the XLA FFI handlers) that zcoll.jax loads instead of the one "
     "beside the package; it must come from the same build as the libzcoll.so loaded."},
    {"`ZCOLL_NCCL_LIBRARY`", "libzcoll_nccl_audit.so (the LD_AUDIT module, nccl/audit)",
     "The library every load of libnccl.so* is redirected to. Default: libzcoll_nccl.so in the "
     "module's own folder. Not readable: said once on stderr, nothing redirected."},
    {"`ZCOLL_NCCL_AUDIT_DEBUG`", "libzcoll_nccl_audit.so (the LD_AUDIT module, nccl/audit)",
     "Any non-empty value: the first redirection is said on stderr (the name searched, how, and "
     "the target)."},
};

// A table cell: '|' would end the cell, a newline the row.
std::string cell(const char* text) {
  std::string out;
  for (const char* c = text; *c != '\0'; ++c) {
    if (*c == '|')
      out += "\\|";
    else if (*c == '\n')
      out += ' ';
    else
      out += *c;
  }
  return out;
}

std::string parameterRows() {
  std::string rows = "| variable | default | description |\n|---|---|---|\n";
  for (const ParamDesc& p : allParams()) {
    std::string def = *p.defaultValue != '\0' ? "`" + cell(p.defaultValue) + "`" : "(empty)";
    rows += "| `" + std::string(p.name) + "` | " + def + " | " + cell(p.description) + " |\n";
  }
  return rows;
}

std::string otherRows() {
  std::string rows = "| variable | read by | what it does |\n|---|---|---|\n";
  for (const OtherVariable& v : kOtherVariables)
    rows += "| " + std::string(v.names) + " | " + v.readBy + " | " + cell(v.meaning) + " |\n";
  return rows;
}

}  // namespace

std::string environmentPageMarkdown() {
  return "# Environment variables\n"
         "\n"
         "<!-- Generated: do not edit. Regenerate with\n"
         "     build/tools/zcoll_info --params-markdown > docs/ENVIRONMENT.md\n"
         "     (ctest's script.environment_page fails while this page and the table differ). -->\n"
         "\n"
         "Generated from zcoll's parameter table (`src/base/params.cc`, and the table of "
         "collectives in `src/coll/` for `ZCOLL_ALGO_*`) by `build/tools/zcoll_info "
         "--params-markdown`. `build/tools/zcoll_info --params` prints the same table with each "
         "variable's current value.\n"
         "\n"
         "One policy for every `ZCOLL_*` value: an empty variable is the same as an unset one, and "
         "a value the parameter does not take fails init with `zcollInvalidArgument` naming the "
         "variable and the values it takes; only the log variables (`ZCOLL_DEBUG`, "
         "`ZCOLL_DEBUG_SUBSYS`) warn instead. Parameters that shape a call are read when the "
         "communicator is created (a split inherits its parent's), never per call.\n"
         "\n"
         "## zcoll's parameters\n"
         "\n" +
         parameterRows() +
         "\n"
         "## Other variables zcoll reads\n"
         "\n" +
         otherRows() +
         "\n"
         "`tools/zcollrun` sets `RANK`, `WORLD_SIZE`, `LOCAL_RANK`, `LOCAL_WORLD_SIZE`, "
         "`GROUP_RANK`, `NODE_RANK`, `ZCOLL_COMM_ID`, `ZCOLL_AUTH_TOKEN`, `MASTER_ADDR`, "
         "`MASTER_PORT` and, with `--nodes`, `ZCOLL_HOSTID` (tools/README.md).\n";
}

}  // namespace zcoll
