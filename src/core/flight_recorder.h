// A communicator's flight recorder: its last operations (ZCOLL_RECORDER_SIZE of them), each with
// what was called, the algorithm that ran it, its start and end times, its result, and, while
// it waits, the peers it still waits for. Read while the job is alive (the status service,
// core/status_service.h, answers `zcoll_info --status`) and dumped as JSON (docs/
// FLIGHT_RECORDER.md) when the communicator breaks (core/progress.h: breakComm), on
// zcollCommAbort, and on the signal ZCOLL_DEBUG_DUMP_SIGNAL.
//
// Why a fixed ring behind one mutex: the operation that records runs on one thread at a time
// (the comm's engine), and readers (a dump, a status query) are rare; recording costs two clock
// reads and a few stores per operation, which is nothing next to a collective (perf/LOG.md).
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "base/result.h"

struct zcollComm;

namespace zcoll {

struct FlightEntry {
  uint64_t seq = 0;          // this comm's operation number, from 1
  const char* op = "";       // "allgather", "sendrecv", "barrier", ... (static strings)
  const char* algorithm = "";
  uint64_t count = 0;        // elements per rank, as the call's count argument
  int32_t dtype = -1;        // zcollDataType_t, -1: none
  int32_t redop = -1;        // zcollRedOp_t, -1: no reduction
  int32_t root = -1;         // -1: no root
  int32_t peer = -1;         // point to point: the peer of a single send or receive
  int32_t quantBits = 0;     // 0: not quantized; else bits per element on the wire
  int32_t quantBlock = 0;
  int64_t startNs = 0;       // CLOCK_REALTIME
  int64_t endNs = 0;         // 0 while running
  int32_t result = -1;       // zcollResult_t once ended
  std::vector<int> waitingOn;  // while waiting: the peers not heard from yet
};

class FlightRecorder {
 public:
  // Sized by ZCOLL_RECORDER_SIZE, read when the communicator is made (0 records nothing).
  FlightRecorder();
  // Keeps the last `capacity` operations from now on (0: none).
  void configure(size_t capacity);
  bool enabled() const { return !ring_.empty(); }

  // Starts an entry (its seq and start time are set here); returns its seq (0 when disabled).
  uint64_t begin(FlightEntry e);
  void end(uint64_t seq, Result r);
  // The running operation waits for these peers (empty: it waits for none any more).
  void setWaitingOn(const std::vector<int>& peers);

  std::vector<FlightEntry> snapshot() const;
  uint64_t lastSeq() const;

 private:
  FlightEntry* find(uint64_t seq);

  mutable std::mutex mu_;
  std::vector<FlightEntry> ring_;
  uint64_t nextSeq_ = 1;
};

// The comm's recorder as JSON (docs/FLIGHT_RECORDER.md): identity, health, and its entries,
// oldest first.
std::string flightRecordJson(const zcollComm* comm);

// The file a dump of `comm` goes to, from the ZCOLL_DEBUG_DUMP `pattern` (docs/
// FLIGHT_RECORDER.md): %h host, %p pid, %r rank, %c the comm's name (characters other than
// letters, digits and ._:+- as '_'), %i its id (16 hex digits), %% a '%'. So that files never
// overwrite one another: a pattern with neither %r nor %p gets ".rank<R>" before the extension
// (*rankAdded: true), and one without %i gets ".comm<ID>" there when `severalComms` (the process
// has made more than one communicator).
std::string dumpPathFor(const zcollComm* comm, const std::string& pattern, bool severalComms,
                        bool* rankAdded);

// Writes flightRecordJson to the file dumpPathFor names (ZCOLL_DEBUG_DUMP), with `why`
// ("timeout", "error", "revoke", "abort", "signal", "request"); nothing when it is unset. The first pattern that
// needed ".rank<R>" is a warning, once per process. Never fails the caller: a dump that cannot
// be written is a warning.
void dumpFlightRecord(const zcollComm* comm, const char* why);

// One entry of the comm's recorder for the lifetime of an operation: begins it, ends it with the
// result given to finish() (zcollInternalError if never given: an exception or early exit).
class RecordedOp {
 public:
  RecordedOp(zcollComm* comm, FlightEntry e);
  ~RecordedOp();
  RecordedOp(const RecordedOp&) = delete;
  RecordedOp& operator=(const RecordedOp&) = delete;
  Result finish(Result r) {
    result_ = r;
    return r;
  }

 private:
  zcollComm* comm_;
  uint64_t seq_;
  Result result_ = zcollInternalError;
};

}  // namespace zcoll
