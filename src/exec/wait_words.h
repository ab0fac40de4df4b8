// The words a communicator's queued device calls hold their callers' streams on (api/launch.h):
// call `seq` queues a stream memory wait for words[seq % kWords] >= seq on each caller's stream,
// and the progress thread stores seq there once the call is over, so a ring of kWords words
// serves kWords calls in flight.
//
// Lifetime: allocated when the communicator is made (host memory the device reads: CUDA's
// cudaHostAlloc, mapped and portable), and freed when it is destroyed, once no stream can still
// read them. A wait reads its word until it is satisfied, and a stream runs a wait only when it
// reaches it, possibly long after the call was released (the caller's stream may still be busy
// with its own earlier work). So after each wait a mark (Executor::markStream: an event) is
// queued on the same stream; in stream order, once the last mark of every stream has passed,
// every wait before it has run and read its word for the last time. Until then the words are
// kept (retired, checked again whenever a communicator's words are made or freed), never freed
// under a waiting stream. The free itself synchronizes the device (cudaFreeHost), so it runs
// when no stream is held (base/stream_holds.h), as the allocation does.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>

#include "base/result.h"
#include "exec/device_component.h"

namespace zcoll {

// A point queued on a stream (Executor::markStream): passed() once the stream got past it.
class StreamMark {
 public:
  virtual ~StreamMark() = default;
  virtual bool passed() = 0;
};

class WaitWords {
 public:
  static constexpr uint32_t kWords = 64;

  // The words of one communicator, from `device` (its allocWaitWords), allocated once no stream
  // of this process is held, waiting at most `waitMs`.
  static Result make(const DeviceComponent& device, int waitMs, std::unique_ptr<WaitWords>* out);
  // Frees the words once every stream that waited on one got past its mark (see above).
  ~WaitWords();
  WaitWords(const WaitWords&) = delete;
  WaitWords& operator=(const WaitWords&) = delete;

  uint32_t* word(uint32_t seq) { return &words_[seq % kWords]; }
  // The mark queued after a wait on the stream known as `stream` (its newest: earlier marks of
  // that stream are passed once it is).
  void noteMark(uintptr_t stream, std::shared_ptr<StreamMark> mark);

  // The calls in flight (api/launch.cc), under mu.
  std::mutex mu;
  std::condition_variable changed;
  uint32_t seq = 0;
  int inFlight = 0;

  // Words of destroyed communicators still kept for streams that have not got past them.
  static size_t retiredForTests();

 private:
  WaitWords() = default;
  const DeviceComponent* device_ = nullptr;
  uint32_t* words_ = nullptr;
  std::map<uintptr_t, std::shared_ptr<StreamMark>> marks_;  // per stream, its newest (under mu)
};

}  // namespace zcoll
