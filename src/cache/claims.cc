#include "cache/claims.h"

#include <atomic>
#include <cstring>

#include "util/sigbus_guard.h"

namespace ssdfeed {

namespace {

constexpr size_t kHeaderBytes = 64;
constexpr char kMagic[8] = {'S', 'D', 'F', 'C', 'L', 'M', '0', '2'};

}  // namespace

Claims::~Claims() {
  SigbusGuard::Release(guard_);  // before file_ unmaps
}

bool Claims::Lost() {
  if (guard_ == nullptr || !guard_->lost()) return false;
  if (!warned_.exchange(true))
    env_->Warn(path_ + " shrank while in use; filling without coordination (samples may be " +
               "prepared twice)");
  return true;
}

Status Claims::Open(Env* env, const std::string& path, uint64_t n, uint32_t mode, uint32_t slot,
                    std::function<bool(uint32_t)> alive) {
  me_ = slot + 1;
  alive_ = std::move(alive);
  env_ = env;
  path_ = path;
  uint64_t bytes = (kHeaderBytes + n * sizeof(uint32_t) + 4095) / 4096 * 4096;
  MappedFileOptions o;
  o.mode = mode;
  SSDFEED_ASSIGN_OR_RETURN(auto file, env->NewMappedFile(path, bytes, o));
  // A group member may cut the file while it is mapped (util/sigbus_guard.h):
  // the fault then zeroes the mapping, and zeros are a claims table where
  // every sample is free and the sequence counter is 0, so this process goes
  // on filling without coordination, as when the file cannot be mapped:
  // samples may be prepared twice, never served wrong.
  guard_ = SigbusGuard::Acquire(file->data(), file->size());
  if (guard_ == nullptr) return Status::Aborted("too many claims files mapped in this process");
  file_ = std::move(file);
  base_ = file_->data();
  slots_ = reinterpret_cast<uint32_t*>(base_ + kHeaderBytes);
  n_ = n;
  if (std::memcmp(base_, kMagic, sizeof(kMagic)) != 0) std::memcpy(base_, kMagic, sizeof(kMagic));
  DropStaleClaims();
  return Status::OK();
}

void Claims::DropStaleClaims() {
  for (uint64_t i = 0; i < n_; ++i) {
    std::atomic_ref<uint32_t> slot(slots_[i]);
    uint32_t cur = me_;
    // The dead predecessor may have stored the sample before it died.
    if (slot.load(std::memory_order_relaxed) == me_)
      slot.compare_exchange_strong(cur, kReleased, std::memory_order_acq_rel);
  }
}

bool Claims::TryClaim(uint64_t id, bool* released) {
  if (released != nullptr) *released = false;
  if (slots_ == nullptr || id >= n_ || Lost()) return true;  // no coordination: go ahead
  std::atomic_ref<uint32_t> slot(slots_[id]);
  uint32_t cur = slot.load(std::memory_order_acquire);
  if (cur == me_) {  // another thread of ours: fine, bounded
    // It may have put the sample since this thread missed it.
    if (released != nullptr) *released = true;
    return true;
  }
  if (cur != 0 && cur != kReleased && alive_(cur - 1)) return false;
  // Free, or its owner died: take it. Any owner it had, dead or done, may
  // have stored the sample.
  bool took = slot.compare_exchange_strong(cur, me_, std::memory_order_acq_rel);
  if (took && cur != 0 && released != nullptr) *released = true;
  return took;
}

void Claims::Release(uint64_t id) {
  if (slots_ == nullptr || id >= n_) return;
  std::atomic_ref<uint32_t> slot(slots_[id]);
  uint32_t me = me_;
  slot.compare_exchange_strong(me, kReleased, std::memory_order_acq_rel);
}

uint64_t Claims::NextSeq(uint64_t seen) {
  if (base_ == nullptr) return seen + 1;
  std::atomic_ref<uint64_t> seq(*reinterpret_cast<uint64_t*>(base_ + 8));
  // Never behind what is on disk (a claims file rebuilt after a crash).
  uint64_t cur = seq.load(std::memory_order_relaxed);
  while (cur <= seen && !seq.compare_exchange_weak(cur, seen + 1, std::memory_order_relaxed)) {
  }
  return seq.fetch_add(1, std::memory_order_relaxed) + 1;
}

}  // namespace ssdfeed
