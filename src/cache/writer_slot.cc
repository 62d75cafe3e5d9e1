#include "cache/writer_slot.h"

namespace ssdfeed {

std::string SlotLockPath(const std::string& dir, const std::string& prefix, uint32_t n) {
  return JoinPath(dir, prefix + std::to_string(n) + ".lock");
}

Result<std::unique_ptr<WriterSlot>> WriterSlot::Acquire(Env* env, const std::string& dir,
                                                        const std::string& prefix, uint32_t mode,
                                                        uint32_t max_slots) {
  Status last =
      Status::Busy(dir + ": all " + std::to_string(max_slots) + " writer slots are in use");
  for (uint32_t n = 0; n < max_slots; ++n) {
    auto lock = env->LockFile(SlotLockPath(dir, prefix, n), true, false, mode);
    if (lock.ok()) return std::unique_ptr<WriterSlot>(new WriterSlot(n, std::move(*lock)));
    // Busy: a live writer. Anything else (a file we may not open, a planted
    // FIFO) makes only that slot unusable, not every slot after it.
    if (!lock.status().IsBusy()) last = lock.status();
    if (lock.status().IsNoSpace() || lock.status().IsNotFound()) return lock.status();
  }
  return last;
}

bool SlotAlive(Env* env, const std::string& dir, const std::string& prefix, uint32_t n,
               uint32_t mode) {
  std::string path = SlotLockPath(dir, prefix, n);
  if (!env->FileExists(path)) return false;
  auto lock = env->LockFile(path, true, false, mode);
  // Busy: held by a live process. Any other failure (a file we may not
  // open) is treated as alive, so we never take over a live writer's work.
  return !lock.ok();
}

}  // namespace ssdfeed
