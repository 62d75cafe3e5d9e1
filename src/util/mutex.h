// Mutexes that clang's -Wthread-safety understands: a member marked
// GUARDED_BY(mu) may only be touched with mu held, and clang checks it at
// compile time (GCC ignores the annotations). libstdc++'s std::mutex carries
// no capability attribute, hence these thin wrappers.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <shared_mutex>

#if defined(__clang__)
#define SSDFEED_TSA(x) __attribute__((x))
#else
#define SSDFEED_TSA(x)
#endif

#define CAPABILITY(x) SSDFEED_TSA(capability(x))
#define SCOPED_CAPABILITY SSDFEED_TSA(scoped_lockable)
#define GUARDED_BY(x) SSDFEED_TSA(guarded_by(x))
#define PT_GUARDED_BY(x) SSDFEED_TSA(pt_guarded_by(x))
#define ACQUIRED_BEFORE(...) SSDFEED_TSA(acquired_before(__VA_ARGS__))
#define REQUIRES(...) SSDFEED_TSA(requires_capability(__VA_ARGS__))
#define REQUIRES_SHARED(...) SSDFEED_TSA(requires_shared_capability(__VA_ARGS__))
#define ACQUIRE(...) SSDFEED_TSA(acquire_capability(__VA_ARGS__))
#define ACQUIRE_SHARED(...) SSDFEED_TSA(acquire_shared_capability(__VA_ARGS__))
#define RELEASE(...) SSDFEED_TSA(release_capability(__VA_ARGS__))
#define RELEASE_SHARED(...) SSDFEED_TSA(release_shared_capability(__VA_ARGS__))
#define RELEASE_GENERIC(...) SSDFEED_TSA(release_generic_capability(__VA_ARGS__))
#define EXCLUDES(...) SSDFEED_TSA(locks_excluded(__VA_ARGS__))
#define NO_THREAD_SAFETY_ANALYSIS SSDFEED_TSA(no_thread_safety_analysis)

namespace ssdfeed {

class CAPABILITY("mutex") Mutex {
 public:
  void Lock() ACQUIRE() { mu_.lock(); }
  void Unlock() RELEASE() { mu_.unlock(); }
  std::mutex& native() { return mu_; }

 private:
  std::mutex mu_;
};

class CAPABILITY("shared_mutex") SharedMutex {
 public:
  void Lock() ACQUIRE() { mu_.lock(); }
  void Unlock() RELEASE() { mu_.unlock(); }
  void LockShared() ACQUIRE_SHARED() { mu_.lock_shared(); }
  void UnlockShared() RELEASE_SHARED() { mu_.unlock_shared(); }

 private:
  std::shared_mutex mu_;
};

class SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex* mu) ACQUIRE(mu) : mu_(mu) { mu_->Lock(); }
  ~MutexLock() RELEASE() { mu_->Unlock(); }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

 private:
  Mutex* mu_;
};

class SCOPED_CAPABILITY WriterLock {
 public:
  explicit WriterLock(SharedMutex* mu) ACQUIRE(mu) : mu_(mu) { mu_->Lock(); }
  ~WriterLock() RELEASE() { mu_->Unlock(); }
  WriterLock(const WriterLock&) = delete;
  WriterLock& operator=(const WriterLock&) = delete;

 private:
  SharedMutex* mu_;
};

class SCOPED_CAPABILITY ReaderLock {
 public:
  explicit ReaderLock(SharedMutex* mu) ACQUIRE_SHARED(mu) : mu_(mu) { mu_->LockShared(); }
  ~ReaderLock() RELEASE() { mu_->UnlockShared(); }
  ReaderLock(const ReaderLock&) = delete;
  ReaderLock& operator=(const ReaderLock&) = delete;

 private:
  SharedMutex* mu_;
};

// Waits on cv with mu (held through a MutexLock) released meanwhile, as
// std::condition_variable::wait does; mu is held again on return. Spurious
// wake-ups happen: callers loop on their condition.
inline void CondWait(std::condition_variable* cv, Mutex* mu) REQUIRES(mu) {
  std::unique_lock<std::mutex> l(mu->native(), std::adopt_lock);
  cv->wait(l);
  l.release();
}
// The same with a limit; true when it timed out.
inline bool CondWaitFor(std::condition_variable* cv, Mutex* mu, int64_t micros) REQUIRES(mu) {
  std::unique_lock<std::mutex> l(mu->native(), std::adopt_lock);
  bool timed_out = cv->wait_for(l, std::chrono::microseconds(micros)) == std::cv_status::timeout;
  l.release();
  return timed_out;
}

}  // namespace ssdfeed
