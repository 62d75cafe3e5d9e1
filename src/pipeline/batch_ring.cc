#include "pipeline/batch_ring.h"

#include <algorithm>
#include <utility>

namespace ssdfeed {

BatchRing::BatchRing(size_t nslots, size_t batch_size, size_t sample_bytes,
                     std::shared_ptr<BatchPool> pool, std::vector<MaskPlane> planes)
    : nslots_(nslots),
      batch_size_(batch_size),
      sample_bytes_(sample_bytes),
      pool_(std::move(pool)),
      planes_(std::move(planes)) {}

void BatchRing::Start(uint64_t cursor, uint64_t end) {
  MutexLock l(&mu_);
  end_sample_ = end;
  next_sample_ = cursor;
  uint64_t first = cursor / batch_size_;
  next_chunk_ = first;
  slots_.assign(nslots_, RingSlot{});
  for (size_t i = 0; i < nslots_; ++i) ResetLocked(&slots_[(first + i) % nslots_], first + i);
  RingSlot& head = slots_[first % nslots_];
  if (head.count > 0) head.done = cursor - first * batch_size_;
  stop_ = false;
}

void BatchRing::Stop() {
  {
    MutexLock l(&mu_);
    stop_ = true;
  }
  space_cv_.notify_all();
}

bool BatchRing::Take(size_t group, bool try_only, RingRun* run) {
  MutexLock l(&mu_);
  if (stop_ || next_sample_ >= end_sample_) return false;
  uint64_t k = next_sample_, b = k / batch_size_;
  if (try_only && b >= next_chunk_ + nslots_) return false;
  run->k = k;
  run->n =
      static_cast<size_t>(std::min<uint64_t>({group, end_sample_ - k, (b + 1) * batch_size_ - k}));
  next_sample_ += run->n;
  while (!stop_ && b >= next_chunk_ + nslots_) CondWait(&space_cv_, &mu_);
  if (stop_) return false;
  run->slot = &slots_[b % nslots_];
  return true;
}

void BatchRing::Finish(RingSlot* slot, const Status& s) {
  MutexLock l(&mu_);
  if (!s.ok() && slot->error.ok()) slot->error = s;
  if (++slot->done == slot->count) ready_cv_.notify_all();
}

Status BatchRing::WaitChunk(uint64_t c, RingSlot** out) {
  MutexLock l(&mu_);
  RingSlot& slot = slots_[c % nslots_];
  while (slot.batch != c || slot.done != slot.count) CondWait(&ready_cv_, &mu_);
  *out = &slot;
  return slot.error;
}

void BatchRing::Release(uint64_t c) {
  {
    MutexLock l(&mu_);
    ++next_chunk_;
    ResetLocked(&slots_[c % nslots_], c + nslots_);
  }
  space_cv_.notify_all();
}

void BatchRing::ResetLocked(RingSlot* s, uint64_t chunk) {
  s->batch = chunk;
  s->done = 0;
  s->error = Status::OK();
  uint64_t first = chunk * batch_size_;
  s->count = first >= end_sample_ ? 0 : std::min<uint64_t>(batch_size_, end_sample_ - first);
  s->buffer.reset();
  if (s->count == 0) return;
  if (s->fields.size() < batch_size_) s->fields.resize(batch_size_);
  if (s->planes.size() != planes_.size()) s->planes = planes_;
  // After a batch took the plane's storage this is the pooled field's it
  // swapped out: already this size but for the first chunks.
  for (MaskPlane& p : s->planes) p.data.resize(batch_size_ * p.sample_bytes);
  if (sample_bytes_ > 0) {
    s->buffer = pool_->Acquire(sample_bytes_ * batch_size_, batch_size_);
  } else {
    s->buffer = pool_->Acquire(0, batch_size_);
    s->staging.resize(batch_size_);
  }
}

}  // namespace ssdfeed
