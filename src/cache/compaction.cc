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
// at number `n`, under one sequence number above all existing ones.
Status WriteCompacted(const CacheOptions& opts, const std::string& dir, SegmentIndex* index, int n,
                      uint64_t* records, uint64_t* bytes) {
  Env* env = opts.env;
  WritableFileOptions wo;
  wo.truncate = true;
  wo.mode = FileMode(opts);
  std::unique_ptr<WritableFile> dat, idx;
  uint64_t seq = index->max_seq() + 1;
  std::string buf;
  auto roll = [&]() -> Status {
    if (dat) {
      SSDFEED_RETURN_IF_ERROR(dat->Sync());
      SSDFEED_RETURN_IF_ERROR(idx->Sync());
    }
    std::string base = SegmentBase(0, n++);
    SSDFEED_ASSIGN_OR_RETURN(dat, env->NewWritableFile(JoinPath(dir, base + ".dat"), wo));
    SSDFEED_ASSIGN_OR_RETURN(idx, env->NewWritableFile(JoinPath(dir, base + ".idx"), wo));
    return Status::OK();
  };
  for (uint64_t id = 0; id < index->size(); ++id) {
    CachedSample s;
    Status st = index->Get(id, &buf, &s);
    if (st.IsNotFound() || st.IsCorruption()) continue;  // a bad record is not carried over
    SSDFEED_RETURN_IF_ERROR(st);
    if (!dat || dat->Size() + buf.size() > opts.segment_bytes) SSDFEED_RETURN_IF_ERROR(roll());
    cf::RecordHeader h;
    cf::CheckRecord(buf.data(), buf.size(), id, &h);  // for its checksum: already checked
    cf::IndexEntry e{id,       dat->Size(), static_cast<uint32_t>(buf.size()),
                     h.height, h.width,     h.channels,
                     seq,      h.checksum};
    char ie[cf::kIndexEntrySize];
    cf::EncodeIndexEntry(e, ie);
    SSDFEED_RETURN_IF_ERROR(dat->Append(buf.data(), buf.size()));
    SSDFEED_RETURN_IF_ERROR(idx->Append(ie, sizeof(ie)));
    ++*records;
    *bytes += buf.size() + sizeof(ie);
  }
  if (dat) {
    SSDFEED_RETURN_IF_ERROR(dat->Sync());
    SSDFEED_RETURN_IF_ERROR(idx->Sync());
    SSDFEED_RETURN_IF_ERROR(dat->Close());
    SSDFEED_RETURN_IF_ERROR(idx->Close());
  }
  return env->SyncDir(dir);
}

}  // namespace

Status CompactEntry(const CacheOptions& in, const std::string& name, CompactReport* report) {
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
  SegmentIndex index(env, dir, key.samples_total);
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
  SSDFEED_RETURN_IF_ERROR(
      WriteCompacted(opts, dir, &index, before.next_n, &report->records, &report->bytes_after));
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
