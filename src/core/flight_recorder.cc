#include "core/flight_recorder.h"

#include <unistd.h>

#include <cerrno>
#include <cinttypes>
#include <cstdarg>
#include <cstdio>
#include <algorithm>
#include <atomic>
#include <cctype>
#include <cstring>
#include <ctime>

#include "base/dtype.h"
#include "base/log.h"
#include "base/params.h"
#include "core/comm.h"
#include "core/live_comms.h"

namespace zcoll {

namespace {

int64_t nowNs() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

void appendEscaped(std::string* out, const char* s) {
  out->push_back('"');
  for (; *s != '\0'; ++s) {
    const unsigned char c = static_cast<unsigned char>(*s);
    if (c == '"' || c == '\\') {
      out->push_back('\\');
      out->push_back(static_cast<char>(c));
    } else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\u%04x", c);
      *out += buf;
    } else {
      out->push_back(static_cast<char>(c));
    }
  }
  out->push_back('"');
}

void appendf(std::string* out, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
void appendf(std::string* out, const char* fmt, ...) {
  char buf[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  *out += buf;
}

void appendEntry(std::string* out, const FlightEntry& e) {
  appendf(out, "{\"seq\": %" PRIu64 ", \"op\": ", e.seq);
  appendEscaped(out, e.op);
  *out += ", \"algorithm\": ";
  appendEscaped(out, e.algorithm);
  appendf(out, ", \"count\": %" PRIu64 ", \"dtype\": ", e.count);
  appendEscaped(out, e.dtype >= 0 ? dtypeName(static_cast<zcollDataType_t>(e.dtype)) : "");
  *out += ", \"redop\": ";
  appendEscaped(out, e.redop >= 0 ? opName(static_cast<zcollRedOp_t>(e.redop)) : "");
  appendf(out, ", \"root\": %d, \"peer\": %d, \"quant_bits\": %d, \"quant_block\": %d", e.root,
          e.peer, e.quantBits, e.quantBlock);
  appendf(out, ", \"start_ns\": %" PRId64 ", \"end_ns\": %" PRId64 ", \"state\": ", e.startNs,
          e.endNs);
  appendEscaped(out, e.endNs == 0 ? "running" : "done");
  *out += ", \"result\": ";
  appendEscaped(out, e.endNs == 0 ? "" : resultName(static_cast<Result>(e.result)));
  *out += ", \"waiting_on\": [";
  for (size_t i = 0; i < e.waitingOn.size(); ++i)
    appendf(out, "%s%d", i ? ", " : "", e.waitingOn[i]);
  *out += "]}";
}

// A name as a file name's part: letters, digits and ._:+- kept, anything else '_'.
std::string fileToken(const std::string& s) {
  std::string out = s.empty() ? std::string("-") : s;
  for (char& c : out)
    if (!std::isalnum(static_cast<unsigned char>(c)) && std::strchr("._:+-", c) == nullptr)
      c = '_';
  return out;
}

// `path` with `part` inserted before the extension of its last component ("a/b.json" + ".x":
// "a/b.x.json"), or appended when it has none (a leading dot is no extension).
std::string beforeExtension(const std::string& path, const std::string& part) {
  const size_t slash = path.rfind('/');
  const size_t base = slash == std::string::npos ? 0 : slash + 1;
  const size_t dot = path.rfind('.');
  if (dot == std::string::npos || dot <= base) return path + part;
  return path.substr(0, dot) + part + path.substr(dot);
}

std::string hexId(uint64_t id) {
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%016" PRIx64, id);
  return buf;
}

}  // namespace

FlightRecorder::FlightRecorder() {
  const int64_t size = paramInt("ZCOLL_RECORDER_SIZE");
  ring_.assign(size > 0 ? static_cast<size_t>(std::min<int64_t>(size, 1 << 20)) : 0, FlightEntry{});
}

void FlightRecorder::configure(size_t capacity) {
  std::lock_guard<std::mutex> lock(mu_);
  ring_.assign(capacity, FlightEntry{});
}

uint64_t FlightRecorder::begin(FlightEntry e) {
  std::lock_guard<std::mutex> lock(mu_);
  if (ring_.empty()) return 0;
  e.seq = nextSeq_++;
  e.startNs = nowNs();
  e.endNs = 0;
  e.waitingOn.clear();
  ring_[e.seq % ring_.size()] = std::move(e);
  return nextSeq_ - 1;
}

FlightEntry* FlightRecorder::find(uint64_t seq) {
  if (ring_.empty() || seq == 0) return nullptr;
  FlightEntry& e = ring_[seq % ring_.size()];
  return e.seq == seq ? &e : nullptr;
}

void FlightRecorder::end(uint64_t seq, Result r) {
  std::lock_guard<std::mutex> lock(mu_);
  if (FlightEntry* e = find(seq)) {
    e->endNs = nowNs();
    e->result = r;
    e->waitingOn.clear();
  }
}

void FlightRecorder::setWaitingOn(const std::vector<int>& peers) {
  std::lock_guard<std::mutex> lock(mu_);
  if (nextSeq_ == 1) return;
  if (FlightEntry* e = find(nextSeq_ - 1); e != nullptr && e->endNs == 0) e->waitingOn = peers;
}

std::vector<FlightEntry> FlightRecorder::snapshot() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<FlightEntry> out;
  if (ring_.empty()) return out;
  const uint64_t first = nextSeq_ > ring_.size() ? nextSeq_ - ring_.size() : 1;
  for (uint64_t s = first; s < nextSeq_; ++s) {
    const FlightEntry& e = ring_[s % ring_.size()];
    if (e.seq == s) out.push_back(e);
  }
  return out;
}

uint64_t FlightRecorder::lastSeq() const {
  std::lock_guard<std::mutex> lock(mu_);
  return nextSeq_ - 1;
}

std::string flightRecordJson(const zcollComm* comm) {
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  if (!comm->peers.empty()) std::snprintf(host, sizeof(host), "%s", comm->peers[comm->rank].hostName);
  std::string out = "{\"schema\": \"zcoll-flight-record/1\", \"comm\": ";
  appendEscaped(&out, comm->name.c_str());
  appendf(&out, ", \"comm_id\": \"%016" PRIx64 "\"", comm->id);
  appendf(&out, ", \"rank\": %d, \"nranks\": %d, \"pid\": %d, \"host\": ", comm->rank,
          comm->nranks, static_cast<int>(getpid()));
  appendEscaped(&out, host);
  const int err = comm->asyncError.load();
  out += ", \"error\": ";
  appendEscaped(&out, err == zcollSuccess ? "" : resultName(static_cast<Result>(err)));
  appendf(&out, ", \"last_seq\": %" PRIu64 ", \"ops\": [", comm->recorder.lastSeq());
  const std::vector<FlightEntry> entries = comm->recorder.snapshot();
  for (size_t i = 0; i < entries.size(); ++i) {
    out += i ? ",\n  " : "\n  ";
    appendEntry(&out, entries[i]);
  }
  out += "]}\n";
  return out;
}

std::string dumpPathFor(const zcollComm* comm, const std::string& pattern, bool severalComms,
                        bool* rankAdded) {
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  std::string out;
  bool hasRank = false, hasId = false;
  for (size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] != '%' || i + 1 == pattern.size()) {
      out.push_back(pattern[i]);
      continue;
    }
    switch (pattern[++i]) {
      case 'h': out += host; break;
      case 'p': out += std::to_string(getpid()); hasRank = true; break;
      case 'r': out += std::to_string(comm->rank); hasRank = true; break;
      case 'c': out += fileToken(comm->name); break;
      case 'i': out += hexId(comm->id); hasId = true; break;
      case '%': out.push_back('%'); break;
      default: out.push_back('%'); out.push_back(pattern[i]);
    }
  }
  std::string added;
  if (!hasRank) added += ".rank" + std::to_string(comm->rank);
  if (!hasId && severalComms) added += ".comm" + hexId(comm->id);
  if (!added.empty()) out = beforeExtension(out, added);
  if (rankAdded != nullptr) *rankAdded = !hasRank;
  return out;
}

void dumpFlightRecord(const zcollComm* comm, const char* why) {
  const std::string pattern = paramString("ZCOLL_DEBUG_DUMP");
  if (pattern.empty()) return;
  bool rankAdded = false;
  const std::string path = dumpPathFor(comm, pattern, commsRegisteredSoFar() > 1, &rankAdded);
  static std::atomic<bool> warned{false};
  if (rankAdded && !warned.exchange(true))
    ZCOLL_WARN(LogSubsys::kCore, "ZCOLL_DEBUG_DUMP=%s names neither %%r (rank) nor %%p (pid): "
               "so that ranks do not overwrite one another's dumps, each file name gets "
               ".rank<R> before its extension (%s)", pattern.c_str(), path.c_str());
  std::string json = flightRecordJson(comm);
  json.insert(1, std::string("\"reason\": \"") + why + "\", ");
  FILE* f = std::fopen(path.c_str(), "w");
  if (f == nullptr || std::fwrite(json.data(), 1, json.size(), f) != json.size()) {
    ZCOLL_WARN(LogSubsys::kCore, "ZCOLL_DEBUG_DUMP: cannot write %s: %s", path.c_str(),
               std::strerror(errno));
  } else {
    ZCOLL_WARN(LogSubsys::kCore, "%s rank %d: flight record (%s) written to %s",
               comm->name.c_str(), comm->rank, why, path.c_str());
  }
  if (f != nullptr) std::fclose(f);
}

RecordedOp::RecordedOp(zcollComm* comm, FlightEntry e)
    : comm_(comm), seq_(comm->recorder.begin(std::move(e))) {}

RecordedOp::~RecordedOp() { comm_->recorder.end(seq_, result_); }

}  // namespace zcoll
