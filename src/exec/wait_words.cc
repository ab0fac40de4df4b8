#include "exec/wait_words.h"

#include <utility>
#include <vector>

#include "base/stream_holds.h"

namespace zcoll {

namespace {

// Words whose communicator is gone while a stream may still read them.
struct Retired {
  const DeviceComponent* device;
  uint32_t* words;
  std::vector<std::shared_ptr<StreamMark>> marks;
};

std::mutex gRetiredMu;
std::vector<Retired>& retired() {
  static auto* r = new std::vector<Retired>;  // never destroyed: streams outlive static exit
  return *r;
}

bool allPassed(const std::vector<std::shared_ptr<StreamMark>>& marks) {
  for (const auto& m : marks)
    if (!m->passed()) return false;
  return true;
}

void freeWhenNoneHeld(const DeviceComponent* device, uint32_t* words) {
  streams::deferUntilNoneHeld([device, words] { device->freeWaitWords(words); });
}

// Frees the retired words every stream got past (the rest stay).
void freePassed() {
  std::vector<Retired> done;
  {
    std::lock_guard<std::mutex> lock(gRetiredMu);
    auto& all = retired();
    for (size_t i = 0; i < all.size();) {
      if (allPassed(all[i].marks)) {
        done.push_back(std::move(all[i]));
        all.erase(all.begin() + static_cast<std::ptrdiff_t>(i));
      } else {
        ++i;
      }
    }
  }
  for (Retired& r : done) freeWhenNoneHeld(r.device, r.words);
}

}  // namespace

Result WaitWords::make(const DeviceComponent& device, int waitMs,
                       std::unique_ptr<WaitWords>* out) {
  freePassed();
  if (device.allocWaitWords == nullptr || device.freeWaitWords == nullptr)
    return fail(zcollUnsupported, "the %s device has no stream memory waits", device.name);
  std::unique_ptr<WaitWords> w(new WaitWords);
  w->device_ = &device;
  ZCOLL_CHECK(streams::whenNoneHeld(waitMs, "allocating a communicator's wait words", [&] {
    return device.allocWaitWords(kWords, &w->words_);
  }));
  *out = std::move(w);
  return zcollSuccess;
}

void WaitWords::noteMark(uintptr_t stream, std::shared_ptr<StreamMark> mark) {
  marks_[stream] = std::move(mark);
}

WaitWords::~WaitWords() {
  if (words_ != nullptr) {
    Retired r{device_, words_, {}};
    for (auto& [stream, mark] : marks_) r.marks.push_back(std::move(mark));
    if (allPassed(r.marks)) {
      freeWhenNoneHeld(device_, words_);
    } else {
      std::lock_guard<std::mutex> lock(gRetiredMu);
      retired().push_back(std::move(r));
    }
  }
  freePassed();
}

size_t WaitWords::retiredForTests() {
  std::lock_guard<std::mutex> lock(gRetiredMu);
  return retired().size();
}

}  // namespace zcoll
