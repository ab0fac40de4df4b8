#include "core/rank_blob.h"

#include <cstring>

namespace zcoll {

std::string encodeRankBlob(const PeerInfo& info, const std::string& address) {
  std::string blob(reinterpret_cast<const char*>(&info), sizeof(info));
  return blob + address;
}

namespace {

bool deviceIdentityPlausible(const DeviceIdentity& d) {
  return (d.present == 0 || d.present == 1) && (d.ipc == 0 || d.ipc == 1) &&
         (d.netDirect == 0 || d.netDirect == 1) &&
         std::memchr(d.kind, 0, sizeof(d.kind)) != nullptr &&
         std::memchr(d.busId, 0, sizeof(d.busId)) != nullptr;
}

bool topologyPlausible(const TopoSummary& t) {
  return t.packages >= 0 && t.numaNodes >= 0 && t.cores >= 0 && t.pus >= 0 && t.gpus >= 0 &&
         t.nics >= 0 && t.myPackage >= -1 && t.myNuma >= -1;
}

}  // namespace

Result decodeRankBlob(const std::string& blob, int rank, PeerInfo* info, std::string* address) {
  if (blob.size() < sizeof(PeerInfo))
    return fail(zcollRemoteError, "malformed description of rank %d (%zu bytes, at least %zu "
                "expected): mismatched zcoll versions?", rank, blob.size(), sizeof(PeerInfo));
  PeerInfo in;
  std::memcpy(&in, blob.data(), sizeof(in));
  const char* why = nullptr;
  if (in.rank != rank) {
    why = "it names another rank";
  } else if (in.pid <= 0) {
    why = "its process id is not positive";
  } else if (std::memchr(in.hostName, 0, sizeof(in.hostName)) == nullptr) {
    why = "its host name is not terminated";
  } else if (!topologyPlausible(in.topo)) {
    why = "its topology counts are negative";
  } else if (!deviceIdentityPlausible(in.device)) {
    why = "its device identity is malformed";
  } else if (blob.size() - sizeof(PeerInfo) > kMaxTransportAddress) {
    why = "its transport address is over 64 KiB";
  }
  if (why != nullptr)
    return fail(zcollRemoteError, "malformed description of rank %d: %s (a process that is "
                "not a zcoll rank of this build joined the rendezvous?)", rank, why);
  *info = in;
  *address = blob.substr(sizeof(PeerInfo));
  return zcollSuccess;
}

}  // namespace zcoll
