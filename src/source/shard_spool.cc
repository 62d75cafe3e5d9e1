#include "source/shard_spool.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>

namespace ssdfeed {

namespace {

using Slot = ShardSpools::Slot;

// A spool file opened for writing and reading, its name already removed:
// the kernel frees it when the last handle closes, however the job ends.
struct OpenedSpool {
  std::unique_ptr<WritableFile> writer;
  std::shared_ptr<const RandomAccessFile> reader;
};

Result<OpenedSpool> OpenSpool(Env* env, const std::string& dir) {
  static std::atomic<uint64_t> serial{0};
  std::string path = JoinPath(
      dir, "spool." + std::to_string(::getpid()) + "." + std::to_string(serial++) + ".tmp");
  OpenedSpool s;
  WritableFileOptions wo;
  wo.truncate = true;
  auto writer = env->NewWritableFile(path, wo);
  if (!writer.ok()) return writer.status();
  auto reader = env->NewRandomAccessFile(path);
  Status removed = env->RemoveFile(path);
  if (!reader.ok()) return reader.status();
  SSDFEED_RETURN_IF_ERROR(removed);
  s.writer = std::move(*writer);
  s.reader = std::move(*reader);
  return s;
}

// Whether the disk holding dir keeps a tenth of its size free after n more
// bytes.
bool RoomFor(Env* env, const std::string& dir, uint64_t n) {
  uint64_t free_bytes = 0, total = 0;
  return env->FsSpace(dir, &free_bytes, &total).ok() && free_bytes > total / kSpoolFreeShare + n;
}

// Streams one object forward in kSpoolChunkBytes ranges, keeping each in
// the slot's spool while the disk has room. Reads behind the newest range
// come from the spool (or, where it was not kept, the origin again).
class StreamingFile final : public RandomAccessFile {
 public:
  StreamingFile(Slot* slot, Env* env, std::string dir, std::unique_ptr<RandomAccessFile> origin)
      : slot_(slot), env_(env), dir_(std::move(dir)), origin_(std::move(origin)) {
    auto size = origin_->Size();
    size_ = size.ok() ? *size : 0;
    std::shared_ptr<const RandomAccessFile> reader;
    if (env_ != nullptr && !dir_.empty()) {
      auto spool = OpenSpool(env_, dir_);
      if (spool.ok()) {
        writer_ = std::move(spool->writer);
        reader = std::move(spool->reader);
      }
    }
    MutexLock l(&slot_->mu);
    slot_->file = std::move(reader);
    slot_->length = 0;
  }

  Status Read(uint64_t offset, size_t n, char* scratch, size_t* got) const override {
    MutexLock l(&mu_);
    *got = 0;
    if (offset >= size_) return Status::OK();
    uint64_t end = std::min<uint64_t>(offset + n, size_);
    while (fetched_ < end) SSDFEED_RETURN_IF_ERROR(FetchNext());
    if (offset >= chunk_off_ && end <= chunk_off_ + chunk_.size()) {
      std::memcpy(scratch, chunk_.data() + (offset - chunk_off_), end - offset);
      *got = end - offset;
      return Status::OK();
    }
    std::shared_ptr<const RandomAccessFile> spool;
    {
      MutexLock s(&slot_->mu);
      if (end <= slot_->length) spool = slot_->file;
    }
    if (spool) return spool->Read(offset, end - offset, scratch, got);
    return origin_->Read(offset, end - offset, scratch, got);  // behind, and not kept
  }
  Result<uint64_t> Size() const override { return size_; }
  const std::string& path() const override { return origin_->path(); }

 private:
  // The next range of the object, one request.
  Status FetchNext() const REQUIRES(mu_) {
    size_t want = static_cast<size_t>(std::min<uint64_t>(kSpoolChunkBytes, size_ - fetched_));
    chunk_.resize(want);
    size_t got = 0;
    SSDFEED_RETURN_IF_ERROR(origin_->Read(fetched_, want, chunk_.data(), &got));
    if (got == 0)
      return Status::Corruption(path() + ": ends at byte " + std::to_string(fetched_) +
                                ", listed as " + std::to_string(size_) + " bytes");
    chunk_.resize(got);
    chunk_off_ = fetched_;
    fetched_ += got;
    Keep();
    return Status::OK();
  }

  // Appends the newest range to the spool; stops keeping (for good) when
  // the disk runs short or a write fails, so the spool stays one prefix.
  void Keep() const REQUIRES(mu_) {
    if (!writer_) return;
    if (!RoomFor(env_, dir_, chunk_.size()) ||
        !writer_->Append(chunk_.data(), chunk_.size()).ok()) {
      writer_.reset();
      return;
    }
    MutexLock l(&slot_->mu);
    slot_->length = fetched_;
  }

  Slot* slot_;
  Env* env_;
  std::string dir_;
  std::unique_ptr<RandomAccessFile> origin_;
  uint64_t size_ = 0;
  mutable Mutex mu_;
  mutable std::unique_ptr<WritableFile> writer_ GUARDED_BY(mu_);
  mutable uint64_t fetched_ GUARDED_BY(mu_) = 0;  // bytes [0, fetched_) were fetched
  mutable std::string chunk_ GUARDED_BY(mu_);     // the newest range
  mutable uint64_t chunk_off_ GUARDED_BY(mu_) = 0;
};

// Where the slot holds [offset, offset + n): a spool file and the offset
// in it; null when it does not.
std::shared_ptr<const RandomAccessFile> Kept(Slot* slot, uint64_t offset, size_t n, uint64_t* at) {
  MutexLock l(&slot->mu);
  if (slot->file && offset + n <= slot->length) {
    *at = offset;
    return slot->file;
  }
  auto it = slot->kept.upper_bound(offset);
  if (it == slot->kept.begin()) return nullptr;
  --it;
  if (!slot->runs || offset + n > it->second.end) return nullptr;
  *at = it->second.at + (offset - it->first);
  return slot->runs;
}

// Takes the planned run holding [offset, offset + n) out of the plan.
bool TakePlanned(Slot* slot, uint64_t offset, size_t n, ShardFiles::Run* run) {
  MutexLock l(&slot->mu);
  auto& p = slot->planned;
  auto it = std::upper_bound(p.begin(), p.end(), offset,
                             [](uint64_t o, const ShardFiles::Run& r) { return o < r.begin; });
  if (it == p.begin()) return false;
  --it;
  if (offset + n > it->end) return false;
  *run = *it;
  p.erase(it);
  return true;
}

// Reads what the slot keeps from its spools, a planned run with one request
// (kept for the run's other samples), the rest from the origin.
class ReadingFile final : public RandomAccessFile {
 public:
  ReadingFile(Slot* slot, Env* env, const std::string& dir,
              std::unique_ptr<RandomAccessFile> origin)
      : slot_(slot), env_(env), dir_(dir), origin_(std::move(origin)) {}
  Status Read(uint64_t offset, size_t n, char* scratch, size_t* got) const override {
    uint64_t at = 0;
    if (auto kept = Kept(slot_, offset, n, &at)) return kept->Read(at, n, scratch, got);
    ShardFiles::Run run;
    {
      MutexLock f(&slot_->fetch_mu);  // a reader of the same run waits, then finds it kept
      if (auto kept = Kept(slot_, offset, n, &at)) return kept->Read(at, n, scratch, got);
      // A run is fetched whole only where it can be kept for its other samples.
      if (TakePlanned(slot_, offset, n, &run) && CanKeep(run.end - run.begin))
        return FetchRun(run, offset, n, scratch, got);
    }
    return origin_->Read(offset, n, scratch, got);
  }
  Result<uint64_t> Size() const override { return origin_->Size(); }
  const std::string& path() const override { return origin_->path(); }

 private:
  // One request for the run; [offset, offset + n) served from it, the rest
  // kept in the run spool when the disk has room.
  Status FetchRun(const ShardFiles::Run& run, uint64_t offset, size_t n, char* scratch,
                  size_t* got) const REQUIRES(slot_->fetch_mu) {
    std::string buf(run.end - run.begin, '\0');
    size_t fetched = 0;
    SSDFEED_RETURN_IF_ERROR(origin_->Read(run.begin, buf.size(), buf.data(), &fetched));
    buf.resize(fetched);
    uint64_t from = offset - run.begin;
    *got = from < buf.size() ? std::min<uint64_t>(n, buf.size() - from) : 0;
    std::memcpy(scratch, buf.data() + from, *got);
    Keep(run.begin, buf);
    return Status::OK();
  }

  bool CanKeep(uint64_t n) const {
    return env_ != nullptr && !dir_.empty() && RoomFor(env_, dir_, n);
  }

  // Appends the run to the run spool; where that fails, the plan is dropped
  // (its runs would be fetched for one sample each).
  void Keep(uint64_t begin, const std::string& buf) const {
    MutexLock l(&slot_->mu);
    if (!slot_->runs_writer) {
      auto spool = OpenSpool(env_, dir_);
      if (spool.ok()) {
        slot_->runs_writer = std::move(spool->writer);
        slot_->runs = std::move(spool->reader);
      }
    }
    uint64_t at = slot_->runs_writer ? slot_->runs_writer->Size() : 0;
    if (!slot_->runs_writer || !slot_->runs_writer->Append(buf.data(), buf.size()).ok()) {
      slot_->planned.clear();
      return;
    }
    slot_->kept[begin] = {begin + buf.size(), at};
  }

  Slot* slot_;
  Env* env_;
  std::string dir_;
  std::unique_ptr<RandomAccessFile> origin_;
};

}  // namespace

void ShardSpools::Configure(Env* env, std::string dir) {
  env_ = env;
  dir_ = std::move(dir);
}

std::unique_ptr<RandomAccessFile> ShardSpools::Streaming(size_t i,
                                                         std::unique_ptr<RandomAccessFile> origin) {
  return std::make_unique<StreamingFile>(&slots_[i], env_, dir_, std::move(origin));
}

void ShardSpools::Release(size_t i) {
  Slot& s = slots_[i];
  MutexLock l(&s.mu);
  s.file.reset();
  s.length = 0;
  s.planned.clear();
  s.kept.clear();
  s.runs.reset();
  s.runs_writer.reset();
}

void ShardSpools::Plan(size_t i, std::vector<ShardFiles::Run> runs) {
  Slot& s = slots_[i];
  MutexLock l(&s.mu);
  s.planned = std::move(runs);
}

std::unique_ptr<RandomAccessFile> ShardSpools::Reading(size_t i,
                                                       std::unique_ptr<RandomAccessFile> origin) {
  return std::make_unique<ReadingFile>(&slots_[i], env_, dir_, std::move(origin));
}

}  // namespace ssdfeed
