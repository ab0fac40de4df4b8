#include "transport/addresses.h"

#include <cstdint>

namespace zcoll {

namespace {

void putField(std::string* out, const std::string& field) {
  uint32_t n = static_cast<uint32_t>(field.size());
  for (int i = 0; i < 4; ++i) out->push_back(static_cast<char>((n >> (8 * i)) & 0xff));
  *out += field;
}

bool takeField(const std::string& in, size_t* pos, std::string* field) {
  if (in.size() - *pos < 4) return false;
  uint32_t n = 0;
  for (int i = 0; i < 4; ++i) n |= uint32_t{static_cast<unsigned char>(in[*pos + i])} << (8 * i);
  *pos += 4;
  if (in.size() - *pos < n) return false;
  *field = in.substr(*pos, n);
  *pos += n;
  return true;
}

}  // namespace

std::string packAddresses(const TransportAddresses& a) {
  std::string out;
  putField(&out, a.shm);
  putField(&out, a.ucx);
  putField(&out, a.cudaIpc);
  return out;
}

Result unpackAddresses(const std::string& packed, int rank, TransportAddresses* out) {
  size_t pos = 0;
  *out = TransportAddresses{};
  if (packed.empty()) return zcollSuccess;  // a rank alone: no transports beyond self
  if (!takeField(packed, &pos, &out->shm) || !takeField(packed, &pos, &out->ucx) ||
      !takeField(packed, &pos, &out->cudaIpc) || pos != packed.size())
    return fail(zcollRemoteError, "rank %d sent malformed transport addresses (%zu bytes)", rank,
                packed.size());
  return zcollSuccess;
}

}  // namespace zcoll
