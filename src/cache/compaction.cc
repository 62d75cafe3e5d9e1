// `ssdfeed cache compact`: rewrites an unused entry's current records into
// one segment per GiB and deletes the rest. Writer slots already keep an
// entry's files bounded by the number of writers that ran at once; this
// folds what many concurrent writers left into few files again.
#include <unistd.h>

#include "cache/capacity.h"
#include "cache/entry_files.h"
#include "cache/record_format.h"
#include "cache/segment_index.h"
#include "cache/segment_writer.h"
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
  int next_n = 0;  // a segment number of slot 0 not in use
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
      if (slot == 0) out.next_n = std::max(out.next_n, k + 1);
    } else if (n.rfind("w-", 0) == 0 && n.size() > 7 && n.compare(n.size() - 5, 5, ".lock") == 0) {
      out.slot_locks.push_back(n);
    }
  }
  return out;
}

// Appends every present record of `index` to new slot-0 segments starting
// at number `n`, under one sequence number above all existing ones, reading
// one old segment at a time. `made` gets the base of every segment it
// created, finished or not.
Status WriteCompacted(const CacheOptions& opts, const std::string& dir, SegmentIndex* index, int n,
                      std::vector<std::string>* made, uint64_t* records, uint64_t* bytes) {
  Env* env = opts.env;
  WritableFileOptions wo;
  wo.truncate = true;
  wo.mode = FileMode(opts);
  std::unique_ptr<WritableFile> dat, idx;
  uint64_t seq = index->max_seq() + 1;
  auto roll = [&]() -> Status {
    if (dat) {
      SSDFEED_RETURN_IF_ERROR(dat->Sync());
      SSDFEED_RETURN_IF_ERROR(idx->Sync());
    }
    std::string base = SegmentBase(0, n++);
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

// A compaction that failed (a full disk, most often) leaves its new
// segments half written: each holds duplicates of old records and is
// charged to the entry, and every retry would add more. They go; the old
// segments, untouched, still hold every record.
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
  auto lock = env->LockFile(JoinPath(dir, "use.lock"), true, false, FileMode(opts));
  if (!lock.ok())
    return lock.status().IsBusy() ? Status::Busy(name + ": in use by a running process")
                                  : lock.status();
  SSDFEED_ASSIGN_OR_RETURN(EntryKey key, ReadEntryKey(env, dir));
  SegmentIndex index(env, dir, key.samples_total, RulesOf(key));
  SSDFEED_RETURN_IF_ERROR(index.Refresh());
  SegmentFiles before = ListSegmentFiles(env, dir);
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
  Status written = WriteCompacted(opts, dir, &index, before.next_n, &made, &report->records,
                                  &report->bytes_after);
  if (!written.ok()) return RemovePartial(env, dir, made, std::move(written));
  // The new segments are durable: the old ones (and their slots, which
  // nobody holds: we hold the entry exclusively) can go.
  // An old segment that stays holds duplicates of the new records (readers
  // take either) and its bytes: say so rather than report a compaction.
  Status removed;
  for (const auto& n : before.segments) KeepFirstError(env->RemoveFile(JoinPath(dir, n)), &removed);
  for (const auto& n : before.slot_locks)
    KeepFirstError(env->RemoveFile(JoinPath(dir, n)), &removed);
  SSDFEED_RETURN_IF_ERROR(env->SyncDir(dir));
  SSDFEED_RETURN_IF_ERROR(removed.WithContext("compact " + dir + ": old segments left"));
  report->files_after = ListSegmentFiles(env, dir).segments.size();
  return Status::OK();
}

}  // namespace ssdfeed
