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

const std::string& TransportAddresses::of(const std::string& transport) const {
  static const std::string kNone;
  for (const auto& [name, address] : rows)
    if (name == transport) return address;
  return kNone;
}

std::string packAddresses(const TransportAddresses& a) {
  std::string out;
  for (const auto& [name, address] : a.rows) {
    putField(&out, name);
    putField(&out, address);
  }
  return out;
}

Result unpackAddresses(const std::string& packed, int rank, TransportAddresses* out) {
  size_t pos = 0;
  *out = TransportAddresses{};
  while (pos < packed.size()) {
    std::string name, address;
    bool ok = takeField(packed, &pos, &name) && takeField(packed, &pos, &address) &&
              !name.empty();
    for (size_t i = 0; ok && i < out->rows.size(); ++i) ok = out->rows[i].first != name;
    if (!ok) {
      *out = TransportAddresses{};
      return fail(zcollRemoteError, "rank %d sent malformed transport addresses (%zu bytes)",
                  rank, packed.size());
    }
    out->rows.emplace_back(std::move(name), std::move(address));
  }
  return zcollSuccess;
}

}  // namespace zcoll
