// Writer slots: how processes on one node tell who is alive without pids.
// A slot is a lock file "<dir>/<prefix><n>.lock" held with flock(LOCK_EX) for
// as long as its writer lives; the kernel drops the lock when the process
// dies, however it dies. flock works across PID namespaces (containers share
// the host's open-file table) and across users, where kill(pid, 0) does not.
// A new writer takes the lowest free slot, so a dead writer's slot — and the
// files named after it — are reused, which bounds the files of an entry by
// the number of writers alive at once.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "ssdfeed/env.h"

namespace ssdfeed {

// The slots of an entry's writers (and of a compaction's copy) are
// "<entry>/w-<n>.lock"; a root's reservations are "<root>/writers/w-<n>.lock".
constexpr char kEntrySlotPrefix[] = "w-";

class WriterSlot {
 public:
  // Takes the lowest-numbered free slot in dir (creating its lock file with
  // `mode`). Fails only on I/O errors or when max_slots are all held.
  static Result<std::unique_ptr<WriterSlot>> Acquire(Env* env, const std::string& dir,
                                                     const std::string& prefix, uint32_t mode,
                                                     uint32_t max_slots = 4096);
  uint32_t id() const { return id_; }

 private:
  WriterSlot(uint32_t id, std::unique_ptr<FileLock> lock) : id_(id), lock_(std::move(lock)) {}
  uint32_t id_;
  std::unique_ptr<FileLock> lock_;
};

std::string SlotLockPath(const std::string& dir, const std::string& prefix, uint32_t n);

// True while some process holds slot n. A probe briefly takes the lock when
// it is free, so a concurrent Acquire may skip that slot (harmless).
bool SlotAlive(Env* env, const std::string& dir, const std::string& prefix, uint32_t n,
               uint32_t mode = 0600);

}  // namespace ssdfeed
