// Env wrappers any test can use to observe or control the core through its
// one seam: a captured log, a clock that moves only when slept on, and the
// process's surroundings (environment variables, /proc and /sys files) with
// chosen contents. For tests only: built into ssdfeed_testutil.
#pragma once

#include <atomic>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "ssdfeed/env.h"

namespace ssdfeed {

// Keeps every line logged, for a test to read back.
class CaptureLogger final : public Logger {
 public:
  void Log(Level level, const std::string& msg) override;
  std::vector<std::string> lines() const;
  // True when some line holds what.
  bool Has(const std::string& what) const;

 private:
  mutable std::mutex mu_;
  std::vector<std::string> lines_;
};

// A monotonic clock that moves only when someone sleeps, and a captured log.
class FakeClockEnv final : public EnvWrapper {
 public:
  explicit FakeClockEnv(Env* target) : EnvWrapper(target) {}
  int64_t MonotonicMicros() override { return now_us_.load(); }
  void SleepForMicroseconds(int64_t micros) override {
    now_us_ += micros;
    sleeps_++;
  }
  Logger* GetLogger() override { return &log_; }
  int64_t now() const { return now_us_.load(); }
  int sleeps() const { return sleeps_.load(); }
  const CaptureLogger& log() const { return log_; }

 private:
  // Far from 0, as a real monotonic clock is: "never refreshed" is 0.
  std::atomic<int64_t> now_us_{1'000'000'000'000};
  std::atomic<int> sleeps_{0};
  CaptureLogger log_;
};

// Chosen environment variables and kernel pseudo-files: only the variables
// set here exist, and a /proc or /sys path not set here is NotFound, so
// nothing of the machine the test runs on leaks in. Every other path (and
// call) goes to the target. Set everything before handing it to the core.
class SurroundingsEnv final : public EnvWrapper {
 public:
  explicit SurroundingsEnv(Env* target) : EnvWrapper(target) {}
  void SetVar(const std::string& name, const std::string& value) { vars_[name] = value; }
  void SetFile(const std::string& path, const std::string& text) { files_[path] = text; }

  std::optional<std::string> GetEnvVar(const std::string& name) override;
  Result<std::unique_ptr<RandomAccessFile>> NewRandomAccessFile(
      const std::string& path, const RandomAccessFileOptions& opts = {}) override;

 private:
  std::map<std::string, std::string> vars_, files_;
};

}  // namespace ssdfeed
