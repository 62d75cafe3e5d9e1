// StageClock: where a loader worker's (or the consumer's) time goes, cut
// into the stages of ssdfeed/counters.h's timer table. One clock per thread
// that does the work, read with the Env's monotonic clock:
//
//   Begin()        the thread starts on a task (a sample, a batch)
//   Mark(stage)    the time since the previous mark (or Begin) was `stage`
//   End()          the task is done: its busy time, Begin to End, counts
//
// Marks chain, so one clock read ends one stage and starts the next: the
// stages of a task add up to its busy time less the gap after its last mark
// (bookkeeping), at one clock read per stage. Code deep in the pipeline
// (the cache's record decode, the decoder) marks through the thread's
// installed clock (ScopedStageClock), so no signature carries it; with none
// installed (`ssdfeed warm`, tests, metrics off) a mark is a null check.
//
// Totals are written by the owning thread only and read by any (stats()):
// relaxed loads and stores, no read-modify-write on a shared line.
#pragma once

#include <atomic>
#include <cstdint>

#include "ssdfeed/counters.h"
#include "ssdfeed/env.h"

namespace ssdfeed {

class StageClock {
 public:
  explicit StageClock(Env* env) : env_(env) {}

  void Begin() { begin_ = last_ = Now(); }
  void Mark(Tmr stage) {
    int64_t now = Now();
    Bump(stage, now - last_);
    last_ = now;
  }
  void End() { Bump(Tmr::kWorkerBusy, Now() - begin_); }

  // This clock's totals (nanoseconds; busy under kWorkerBusy).
  uint64_t Total(Tmr t) const {
    return ns_[static_cast<size_t>(t)].load(std::memory_order_relaxed);
  }
  // Adds this clock's totals into *sum.
  void AddTo(TimerArray* sum) const {
    for (size_t i = 0; i < kNumTimers; ++i) (*sum)[i] += ns_[i].load(std::memory_order_relaxed);
  }

 private:
  int64_t Now() const { return env_->MonotonicMicros(); }
  void Bump(Tmr t, int64_t us) {
    if (us <= 0) return;
    auto& v = ns_[static_cast<size_t>(t)];
    v.store(v.load(std::memory_order_relaxed) + static_cast<uint64_t>(us) * 1000,
            std::memory_order_relaxed);
  }

  Env* env_;
  int64_t begin_ = 0, last_ = 0;  // owner thread only
  std::array<std::atomic<uint64_t>, kNumTimers> ns_{};
};

// The clock of the calling thread, set by ScopedStageClock; null: none.
StageClock*& ThreadStageClock();

// Marks `stage` on the calling thread's clock, if it has one.
inline void MarkStage(Tmr stage) {
  if (StageClock* c = ThreadStageClock()) c->Mark(stage);
}

// Installs a clock as the calling thread's for its lifetime.
class ScopedStageClock {
 public:
  explicit ScopedStageClock(StageClock* c) : prev_(ThreadStageClock()) { ThreadStageClock() = c; }
  ~ScopedStageClock() { ThreadStageClock() = prev_; }
  ScopedStageClock(const ScopedStageClock&) = delete;
  ScopedStageClock& operator=(const ScopedStageClock&) = delete;

 private:
  StageClock* prev_;
};

}  // namespace ssdfeed
