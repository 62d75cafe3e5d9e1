// `ssdfeed cache compact`: rewrites an unused entry's current records into
// one segment per GiB and deletes the rest. Writer slots already keep an
// entry's files bounded by the number of writers that ran at once; this
// folds what many concurrent writers left into few files again.
#include <unistd.h>

#include <charconv>
#include <map>

#include "cache/capacity.h"
#include "cache/entry_files.h"
#include "cache/record_format.h"
#include "cache/segment_index.h"
#include "cache/segment_writer.h"
#include "cache/writer_slot.h"
#include "ssdfeed/cache.h"
#include "util/fd_limit.h"

namespace ssdfeed {

namespace cf = cache_format;

namespace {

// For a loop that should try every step: the first failure is kept. A file
// already gone is no failure.
void KeepFirstError(Status s, Status* first) {
  if (!s.ok() && !s.IsNotFound() && first->ok()) *first = std::move(s);
}

struct SegmentFiles {
  std::vector<std::string> segments, slot_locks;
  std::map<std::string, uint64_t> sizes;  // of every segment file, by name
  int next_n = 0;                         // a segment number of slot 0 not in use
};

SegmentFiles ListSegmentFiles(Env* env, const std::string& dir) {
  SegmentFiles out;
  std::vector<std::string> names;
  if (!env->GetChildren(dir, &names).ok()) return out;
  for (const auto& n : names) {
    std::string base;
    uint32_t slot;
    int k;
    if ((SegmentBaseOf(n, ".dat", &base) || SegmentBaseOf(n, ".idx", &base)) &&
        ParseSegmentBase(base, &slot, &k)) {
      out.segments.push_back(n);
      auto fi = env->Lstat(JoinPath(dir, n));
      out.sizes[n] = fi.ok() ? fi->size : UINT64_MAX;
      if (slot == 0) out.next_n = std::max(out.next_n, k + 1);
    } else if (n.rfind("w-", 0) == 0 && n.size() > 7 && n.compare(n.size() - 5, 5, ".lock") == 0) {
      out.slot_locks.push_back(n);
    }
  }
  return out;
}

// The copy is written under names no reader loads ("compact-<slot>-<n>",
// the slot being the compactor's entry writer slot, held meanwhile), and
// renamed to segment names only under the exclusive lock: a reader sees
// the old segments or the new ones, never a copy half written.
constexpr char kCopyPrefix[] = "compact-";
std::string CopyBase(uint32_t slot, int n) {
  return kCopyPrefix + std::to_string(slot) + "-" + std::to_string(n);
}

// Copies a killed compactor left (its slot nobody holds) go.
void RemoveStaleCopies(Env* env, const std::string& dir, uint32_t mode) {
  std::vector<std::string> names;
  if (!env->GetChildren(dir, &names).ok()) return;
  for (const auto& n : names) {
    if (n.rfind(kCopyPrefix, 0) != 0) continue;
    uint32_t slot = 0;
    const char* p = n.c_str() + sizeof(kCopyPrefix) - 1;
    auto [end, ec] = std::from_chars(p, n.c_str() + n.size(), slot);
    if (ec != std::errc() || *end != '-') continue;
    if (!SlotAlive(env, dir, kEntrySlotPrefix, slot, mode))
      env->RemoveFile(JoinPath(dir, n)).IgnoreError();
  }
}

// Appends every present record of `index` to new copy files of `slot`,
// under one sequence number above all existing ones, reading one old
// segment at a time. `made` gets the base of every copy it created,
// finished or not.
Status WriteCompacted(const CacheOptions& opts, const std::string& dir, SegmentIndex* index,
                      uint32_t slot, std::vector<std::string>* made, uint64_t* records,
                      uint64_t* bytes) {
  Env* env = opts.env;
  WritableFileOptions wo;
  wo.truncate = true;
  wo.mode = FileMode(opts);
  std::unique_ptr<WritableFile> dat, idx;
  uint64_t seq = index->max_seq() + 1;
  int n = 0;
  auto roll = [&]() -> Status {
    if (dat) {
      SSDFEED_RETURN_IF_ERROR(dat->Sync());
      SSDFEED_RETURN_IF_ERROR(idx->Sync());
    }
    std::string base = CopyBase(slot, n++);
    made->push_back(base);
    SSDFEED_ASSIGN_OR_RETURN(dat, env->NewWritableFile(JoinPath(dir, base + ".dat"), wo));
    SSDFEED_ASSIGN_OR_RETURN(idx, env->NewWritableFile(JoinPath(dir, base + ".idx"), wo));
    return Status::OK();
  };
  SSDFEED_RETURN_IF_ERROR(index->ForEachRecord([&](uint64_t id, const std::string& buf) -> Status {
    if (!dat || dat->Size() + buf.size() > opts.segment_bytes) SSDFEED_RETURN_IF_ERROR(roll());
    cf::RecordHeader h;
    cf::CheckRecord(buf.data(), buf.size(), id, index->rules(), &h);  // for its checksum: checked
    cf::IndexEntry e{id,       dat->Size(), static_cast<uint32_t>(buf.size()),
                     h.height, h.width,     h.channels,
                     seq,      h.checksum};
    char ie[cf::kIndexEntrySize];
    cf::EncodeIndexEntry(e, ie);
    SSDFEED_RETURN_IF_ERROR(dat->Append(buf.data(), buf.size()));
    SSDFEED_RETURN_IF_ERROR(idx->Append(ie, sizeof(ie)));
    ++*records;
    *bytes += buf.size() + sizeof(ie);
    return Status::OK();
  }));
  if (dat) {
    SSDFEED_RETURN_IF_ERROR(dat->Sync());
    SSDFEED_RETURN_IF_ERROR(idx->Sync());
    SSDFEED_RETURN_IF_ERROR(dat->Close());
    SSDFEED_RETURN_IF_ERROR(idx->Close());
  }
  return env->SyncDir(dir);
}

// A compaction that failed (a full disk, most often) or gave up (the entry
// in use or changed meanwhile) leaves its copy: it holds duplicates of old
// records and is charged to the entry, and every retry would add more. It
// goes; the old segments, untouched, still hold every record.
Status RemovePartial(Env* env, const std::string& dir, const std::vector<std::string>& made,
                     Status cause) {
  Status removed;
  for (const auto& base : made)
    for (const char* ext : {".dat", ".idx"})
      KeepFirstError(env->RemoveFile(JoinPath(dir, base + ext)), &removed);
  KeepFirstError(env->SyncDir(dir), &removed);
  if (!removed.ok())
    return cause.WithContext(
        "compact " + dir + " (and its partial new segments are left: " + removed.ToString() + ")");
  return cause.WithContext("compact " + dir + " (partial new segments removed)");
}

// Under the exclusive lock: whether the entry is the one copied, with the
// very segment files (names and sizes) the copy was read from. A writer
// that came and went while we copied makes it differ.
Status CheckUnchanged(Env* env, const std::string& dir, const FileInfo& was,
                      const SegmentFiles& before, SegmentFiles* now) {
  auto fi = env->Lstat(dir);
  if (!fi.ok() || fi->inode != was.inode)
    return Status::Busy(dir + ": evicted while it was being compacted");
  *now = ListSegmentFiles(env, dir);
  if (now->sizes != before.sizes)
    return Status::Busy(dir + ": written to while it was being compacted; run it again");
  return Status::OK();
}

// Renames the copy to slot 0's next segment names (.dat first: a .dat
// without its .idx is never read, and is cut to nothing by the next writer
// of slot 0), then deletes the old segments and the slots' lock files
// (nobody holds them: we hold the entry exclusively), except our own.
Status SwapIn(Env* env, const std::string& dir, const std::vector<std::string>& made,
              const SegmentFiles& old, const std::string& own_slot_lock) {
  int n = old.next_n;
  for (const auto& base : made) {
    std::string to = SegmentBase(0, n++);
    for (const char* ext : {".dat", ".idx"})
      SSDFEED_RETURN_IF_ERROR(env->RenameFile(JoinPath(dir, base + ext), JoinPath(dir, to + ext)));
  }
  SSDFEED_RETURN_IF_ERROR(env->SyncDir(dir));
  // An old segment that stays holds duplicates of the new records (readers
  // take either) and its bytes: say so rather than report a compaction.
  Status removed;
  for (const auto& f : old.segments) KeepFirstError(env->RemoveFile(JoinPath(dir, f)), &removed);
  for (const auto& f : old.slot_locks)
    if (f != own_slot_lock) KeepFirstError(env->RemoveFile(JoinPath(dir, f)), &removed);
  SSDFEED_RETURN_IF_ERROR(env->SyncDir(dir));
  return removed.WithContext("compact " + dir + ": old segments left");
}

}  // namespace

Status CompactEntry(const CacheOptions& in, const std::string& name, CompactReport* report) {
  RaiseFdLimit();
  CacheOptions opts = in;
  if (opts.env == nullptr) opts.env = Env::Default();
  Env* env = opts.env;
  *report = {};
  RootPaths p(opts.root);
  SSDFEED_RETURN_IF_ERROR(CheckRootTrusted(env, opts));
  std::string dir = JoinPath(p.entries, name);
  SSDFEED_ASSIGN_OR_RETURN(FileInfo fi, env->Lstat(dir));
  if (!fi.is_dir || fi.is_symlink) return Status::InvalidArgument(dir + ": not an entry directory");
  if (IsForeignEntry(fi, opts)) return Status::InvalidArgument(name + ": owned by another user");
  // Unused now? Refused at once if not (a job trains from it).
  {
    auto probe = env->LockFile(JoinPath(dir, "use.lock"), true, false, FileMode(opts));
    if (!probe.ok())
      return probe.status().IsBusy() ? Status::Busy(name + ": in use by a running process")
                                     : probe.status();
  }
  // The copy is made under the shared lock, as a reader's: a job may open
  // the entry meanwhile, and a compaction stopped (Ctrl-Z) halfway holds
  // nobody up. Only the swap below takes the lock exclusively.
  SSDFEED_ASSIGN_OR_RETURN(auto shared, LockEntryUse(env, dir, false, FileMode(opts)));
  SSDFEED_ASSIGN_OR_RETURN(auto slot,
                           WriterSlot::Acquire(env, dir, kEntrySlotPrefix, FileMode(opts)));
  RemoveStaleCopies(env, dir, FileMode(opts));
  SSDFEED_ASSIGN_OR_RETURN(EntryKey key, ReadEntryKey(env, dir));
  // Sizes before the index is read: unchanged at the swap, the index read
  // is all there is.
  SegmentFiles before = ListSegmentFiles(env, dir);
  SegmentIndex index(env, dir, key.samples_total, RulesOf(key));
  SSDFEED_RETURN_IF_ERROR(index.Refresh());
  report->files_before = before.segments.size() + before.slot_locks.size();
  std::vector<EntryDirInfo> all;
  SSDFEED_RETURN_IF_ERROR(ScanEntries(env, p, opts, &all));
  for (const auto& e : all)
    if (e.name == name) report->bytes_before = e.bytes;
  // The copy exists next to the original for a while: charge it first.
  Capacity capacity(opts, dir, nullptr);
  uint64_t need = 0;
  for (const auto& e : all)
    if (e.name == name) need = e.bytes;
  if (need > 0) SSDFEED_RETURN_IF_ERROR(capacity.Reserve(need).status());
  std::vector<std::string> made;
  Status written =
      WriteCompacted(opts, dir, &index, slot->id(), &made, &report->records, &report->bytes_after);
  if (!written.ok()) return RemovePartial(env, dir, made, std::move(written));
  // Shared to exclusive: flock converts without a guarantee of atomicity,
  // so let go and wait (bounded) for it; the checks below catch whatever
  // happened in between.
  shared.reset();
  auto exclusive = LockEntryUse(env, dir, true, FileMode(opts));
  if (!exclusive.ok()) {
    Status why = exclusive.status().IsBusy()
                     ? Status::Busy(name + ": in use by a running process (opened meanwhile)")
                     : exclusive.status();
    return RemovePartial(env, dir, made, std::move(why));
  }
  SegmentFiles now;
  Status same = CheckUnchanged(env, dir, fi, before, &now);
  if (!same.ok()) return RemovePartial(env, dir, made, std::move(same));
  std::string own_lock = Basename(SlotLockPath(dir, kEntrySlotPrefix, slot->id()));
  SSDFEED_RETURN_IF_ERROR(SwapIn(env, dir, made, now, own_lock));
  report->files_after = ListSegmentFiles(env, dir).segments.size();
  return Status::OK();
}

}  // namespace ssdfeed
