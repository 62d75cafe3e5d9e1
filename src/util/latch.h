// A one-shot countdown latch: the part of std::latch the core uses.
// std::latch (<latch>) arrived in libstdc++ 11; the wheel is built against
// Debian 11's GCC 10 (glibc 2.31, so it installs on older systems), whose
// libstdc++ has no <latch>.
#pragma once

#include <condition_variable>
#include <cstddef>

#include "util/mutex.h"

namespace ssdfeed {

class Latch {
 public:
  explicit Latch(ptrdiff_t count) : count_(count) {}
  Latch(const Latch&) = delete;
  Latch& operator=(const Latch&) = delete;

  void CountDown() EXCLUDES(mu_) {
    MutexLock l(&mu_);
    if (--count_ == 0) cv_.notify_all();
  }
  // Returns once the count has reached zero.
  void Wait() EXCLUDES(mu_) {
    MutexLock l(&mu_);
    while (count_ > 0) CondWait(&cv_, &mu_);
  }

 private:
  Mutex mu_;
  std::condition_variable cv_;
  ptrdiff_t count_ GUARDED_BY(mu_);
};

}  // namespace ssdfeed
