// Portable entries: `ssdfeed cache export` / `import`. The stream is a tar
// (pax) of, in this order:
//   ssdfeed-export.json   what follows: entry, samples, records, their bytes
//   manifest.json         the entry's manifest as exported
//   records/NNNNNN.dat    records in the cache's own format, ascending ids,
//                         whole records only, at most kChunkBytes each
//   checksums.json        every member above with its size and XXH3-64
// Records are checked on both sides (each carries its checksum); the table
// at the end catches what a record check cannot (a flipped manifest, a
// member left out or added). See docs/cache-format.md "Portable entries".
#include <archive.h>
#include <archive_entry.h>
#include <unistd.h>
#include <xxhash.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>

#include "cache/capacity.h"
#include "cache/entry_files.h"
#include "cache/record_format.h"
#include "cache/segment_index.h"
#include "cache/segment_writer.h"
#include "image/pixel_codec.h"
#include "ssdfeed/cache.h"

namespace ssdfeed {

namespace cf = cache_format;

namespace {

constexpr char kFormatName[] = "ssdfeed-entry-export";
constexpr int kStreamVersion = 1;
constexpr char kHeaderMember[] = "ssdfeed-export.json";
constexpr char kManifestMember[] = "manifest.json";
constexpr char kChecksumMember[] = "checksums.json";
constexpr char kRecordsPrefix[] = "records/";
// Records are buffered into members of at most this size (a tar member's
// size goes before its data, and a record is never split).
constexpr size_t kChunkBytes = 64u << 20;
// The small members are read whole; anything larger is not ours.
constexpr int64_t kMaxSmallMember = 16 << 20;
using cf::kMaxPayload;  // a record's payload above it is damage
std::string Hex64(uint64_t v) {
  char b[17];
  std::snprintf(b, sizeof b, "%016llx", static_cast<unsigned long long>(v));
  return b;
}

uint64_t LoadU64(const char* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}
uint32_t LoadU32(const char* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// XXH3-64 over a member's bytes, however they arrive.
class StreamHash {
 public:
  StreamHash() : st_(XXH3_createState()) { XXH3_64bits_reset(st_); }
  ~StreamHash() { XXH3_freeState(st_); }
  StreamHash(const StreamHash&) = delete;
  StreamHash& operator=(const StreamHash&) = delete;
  void Add(const void* p, size_t n) { XXH3_64bits_update(st_, p, n); }
  uint64_t Digest() const { return XXH3_64bits_digest(st_); }

 private:
  XXH3_state_t* st_;
};

struct WriteCloser {
  void operator()(archive* a) const { archive_write_free(a); }
};
struct ReadCloser {
  void operator()(archive* a) const { archive_read_free(a); }
};

// ---------------------------------------------------------------- export

class ExportWriter {
 public:
  // mtime: what every member is stamped with (seconds since the epoch).
  Status Open(int fd, bool zstd, int64_t mtime) {
    mtime_ = mtime;
    a_.reset(archive_write_new());
    // No padding of the last block: zeros after a zstd frame are not zstd,
    // and libarchive pads when writing to a pipe.
    archive_write_set_bytes_in_last_block(a_.get(), 1);
    if (archive_write_set_format_pax_restricted(a_.get()) != ARCHIVE_OK ||
        (zstd && archive_write_add_filter_zstd(a_.get()) != ARCHIVE_OK) ||
        archive_write_open_fd(a_.get(), fd) != ARCHIVE_OK)
      return Error("cannot start the export stream");
    return Status::OK();
  }

  Status Member(const std::string& name, const std::string& data) {
    archive_entry* e = archive_entry_new();
    archive_entry_set_pathname(e, name.c_str());
    archive_entry_set_size(e, static_cast<int64_t>(data.size()));
    archive_entry_set_filetype(e, AE_IFREG);
    archive_entry_set_perm(e, 0644);
    archive_entry_set_mtime(e, mtime_, 0);
    int r = archive_write_header(a_.get(), e);
    archive_entry_free(e);
    if (r != ARCHIVE_OK) return Error("writing " + name);
    for (size_t off = 0; off < data.size();) {
      la_ssize_t n = archive_write_data(a_.get(), data.data() + off, data.size() - off);
      if (n <= 0) return Error("writing " + name);
      off += static_cast<size_t>(n);
    }
    table_.push_back({{"name", name},
                      {"bytes", data.size()},
                      {"xxh3_64", Hex64(XXH3_64bits(data.data(), data.size()))}});
    return Status::OK();
  }

  Status Finish(uint64_t records, uint64_t record_bytes) {
    nlohmann::json t = {{"members", table_}, {"records", records}, {"record_bytes", record_bytes}};
    SSDFEED_RETURN_IF_ERROR(Member(kChecksumMember, t.dump(1) + "\n"));
    if (archive_write_close(a_.get()) != ARCHIVE_OK) return Error("finishing the stream");
    return Status::OK();
  }

 private:
  Status Error(const std::string& what) {
    const char* why = archive_error_string(a_.get());
    return Status::IOError("export stream: " + what + ": " + (why ? why : "write failed"));
  }
  std::unique_ptr<archive, WriteCloser> a_;
  int64_t mtime_ = 0;
  nlohmann::json table_ = nlohmann::json::array();
};

// The entry directory with its use lock held (no eviction meanwhile).
struct LockedEntry {
  std::string dir;
  std::unique_ptr<FileLock> use_lock;
  EntryKey key;
};

Result<LockedEntry> LockEntryForExport(const CacheOptions& opts, const std::string& name) {
  Env* env = opts.env;
  RootPaths paths(opts.root);
  SSDFEED_RETURN_IF_ERROR(CheckRootTrusted(env, opts));
  LockedEntry le;
  le.dir = JoinPath(paths.entries, name);
  auto fi = env->Lstat(le.dir);
  if (!fi.ok())
    return fi.status().IsNotFound()
               ? Status::NotFound("no cache entry " + name + " under " + opts.root)
               : fi.status();
  if (fi->is_symlink || !fi->is_dir)
    return Status::InvalidArgument(le.dir + ": not a directory (a symlink?); refusing it");
  // Bounded, as an open: Busy while a stopped process holds it exclusively.
  SSDFEED_ASSIGN_OR_RETURN(le.use_lock, LockEntryUse(env, le.dir, false, FileMode(opts)));
  auto after = env->Lstat(le.dir);
  if (!after.ok() || after->inode != fi->inode)
    return Status::Busy(le.dir + ": evicted while the export started; try again");
  SSDFEED_ASSIGN_OR_RETURN(le.key, ReadEntryKey(env, le.dir));
  if (le.key.fingerprint() != name)
    return Status::Corruption(le.dir + "/manifest.json: not the manifest of entry " + name);
  return le;
}

std::string ChunkName(int n) {
  char b[32];
  std::snprintf(b, sizeof b, "%s%06d.dat", kRecordsPrefix, n);
  return b;
}

}  // namespace

Status ExportEntry(const CacheOptions& in, const std::string& name, int fd, const ExportOptions& eo,
                   TransferReport* report) {
  CacheOptions opts = in;
  if (opts.env == nullptr) opts.env = Env::Default();
  *report = {};
  SSDFEED_ASSIGN_OR_RETURN(LockedEntry le, LockEntryForExport(opts, name));
  // The snapshot: what the index holds now. Records appended later are not
  // read; those read stay valid (segments are append-only).
  SegmentIndex index(opts.env, le.dir, le.key.samples_total, RulesOf(le.key));
  SSDFEED_RETURN_IF_ERROR(index.Refresh());
  uint64_t total = le.key.samples_total, present = index.present();
  if (!eo.partial && present < total)
    return Status::InvalidArgument("entry " + name + " is partial (" + std::to_string(present) +
                                   " of " + std::to_string(total) +
                                   " samples); fill it (ssdfeed warm) or pass --partial");
  uint64_t declared_bytes = 0;
  for (uint64_t id = 0; id < total; ++id) declared_bytes += index.RecordLength(id);
  std::string manifest;
  SSDFEED_RETURN_IF_ERROR(ReadManifest(opts.env, le.dir, &manifest));

  ExportWriter w;
  SSDFEED_RETURN_IF_ERROR(w.Open(fd, eo.zstd, opts.env->NowMicros() / 1000000));
  nlohmann::json header = {{"format", kFormatName},
                           {"version", kStreamVersion},
                           {"cache_format_version", cf::kFormatVersion},
                           {"entry", name},
                           {"samples_total", total},
                           {"records", present},
                           {"record_bytes", declared_bytes},
                           {"partial", present < total}};
  SSDFEED_RETURN_IF_ERROR(w.Member(kHeaderMember, header.dump(1) + "\n"));
  SSDFEED_RETURN_IF_ERROR(w.Member(kManifestMember, manifest));

  std::string chunk, buf;
  int chunk_n = 0;
  for (uint64_t id = 0; id < total; ++id) {
    if (!index.Contains(id)) continue;
    CachedSample s;
    Status st = index.GetStored(id, &buf, &s);  // the record as it is, stored pixels and all
    if (st.IsCorruption()) {
      if (!eo.partial)
        return st.WithContext("entry " + name +
                              " holds a corrupt record (ssdfeed cache verify "
                              "--repair mends it; --partial exports without it)");
      continue;
    }
    SSDFEED_RETURN_IF_ERROR(st);
    if (chunk.size() + buf.size() > kChunkBytes && !chunk.empty()) {
      SSDFEED_RETURN_IF_ERROR(w.Member(ChunkName(chunk_n++), chunk));
      chunk.clear();
    }
    chunk += buf;
    report->records++;
    report->record_bytes += buf.size();
  }
  if (!chunk.empty()) SSDFEED_RETURN_IF_ERROR(w.Member(ChunkName(chunk_n++), chunk));
  SSDFEED_RETURN_IF_ERROR(w.Finish(report->records, report->record_bytes));
  report->entry = name;
  report->source_uri = le.key.source_uri;
  report->samples_total = total;
  return Status::OK();
}

// ---------------------------------------------------------------- import

namespace {

// Segments of a new entry, written into its staging directory as slot 0's
// (the first process to open the entry takes slot 0 over and appends).
class StagedSegments {
 public:
  StagedSegments(Env* env, std::string dir, uint32_t mode, uint64_t segment_bytes)
      : env_(env), dir_(std::move(dir)), mode_(mode), segment_bytes_(segment_bytes) {}

  Status Append(const char* rec, size_t len, const cf::RecordHeader& h) {
    if (!dat_ || (dat_size_ > 0 && dat_size_ + len > segment_bytes_))
      SSDFEED_RETURN_IF_ERROR(Roll());
    cf::IndexEntry e;
    e.sample_id = h.sample_id;
    e.offset = dat_size_;
    e.record_len = static_cast<uint32_t>(len);
    e.height = h.height;
    e.width = h.width;
    e.channels = h.channels;
    e.stamp = ++seq_;
    e.record_checksum = h.checksum;
    char ie[cf::kIndexEntrySize];
    cf::EncodeIndexEntry(e, ie);
    SSDFEED_RETURN_IF_ERROR(dat_->Append(rec, len));
    SSDFEED_RETURN_IF_ERROR(idx_->Append(ie, sizeof ie));
    dat_size_ += len;
    return Status::OK();
  }

  // Everything durable before the entry is renamed into place.
  Status Finish() {
    SSDFEED_RETURN_IF_ERROR(CloseCurrent());
    return env_->SyncDir(dir_);
  }

 private:
  Status CloseCurrent() {
    if (!dat_) return Status::OK();
    SSDFEED_RETURN_IF_ERROR(dat_->Sync());
    SSDFEED_RETURN_IF_ERROR(idx_->Sync());
    SSDFEED_RETURN_IF_ERROR(dat_->Close());
    SSDFEED_RETURN_IF_ERROR(idx_->Close());
    dat_.reset();
    idx_.reset();
    return Status::OK();
  }
  Status Roll() {
    SSDFEED_RETURN_IF_ERROR(CloseCurrent());
    std::string base = JoinPath(dir_, SegmentBase(0, n_++));
    WritableFileOptions wo;
    wo.truncate = true;
    wo.mode = mode_;
    SSDFEED_ASSIGN_OR_RETURN(dat_, env_->NewWritableFile(base + ".dat", wo));
    SSDFEED_ASSIGN_OR_RETURN(idx_, env_->NewWritableFile(base + ".idx", wo));
    dat_size_ = 0;
    return Status::OK();
  }

  Env* env_;
  std::string dir_;
  uint32_t mode_;
  uint64_t segment_bytes_;
  int n_ = 0;
  uint64_t seq_ = 0, dat_size_ = 0;
  std::unique_ptr<WritableFile> dat_, idx_;
};

// Reads and checks the stream member by member.
class ImportReader {
 public:
  Status Open(int fd) {
    a_.reset(archive_read_new());
    // zstd only: filter_all would also enable filters that run external
    // programs (lrzip, lzop, grzip...) on bytes from the stream's producer.
    archive_read_support_filter_zstd(a_.get());
    archive_read_support_format_tar(a_.get());
    if (archive_read_open_fd(a_.get(), fd, 1 << 20) != ARCHIVE_OK)
      return Error("cannot read the stream");
    return Status::OK();
  }

  // The next member's name; empty at the end of the stream.
  Status Next(std::string* name, int64_t* size) {
    archive_entry* e = nullptr;
    int r = archive_read_next_header(a_.get(), &e);
    if (r == ARCHIVE_EOF) {
      name->clear();
      return Status::OK();
    }
    if (r != ARCHIVE_OK) return Error("reading a member header");
    if (archive_entry_filetype(e) != AE_IFREG || archive_entry_pathname(e) == nullptr)
      return Status::Corruption("export stream: a member that is not a regular file");
    *name = archive_entry_pathname(e);
    *size = archive_entry_size(e);
    member_ = *name;
    hash_ = std::make_unique<StreamHash>();
    got_ = 0;
    return Status::OK();
  }

  // Reads up to n bytes of the current member; fewer only at its end.
  Status Read(char* dst, size_t n, size_t* got) {
    *got = 0;
    while (*got < n) {
      la_ssize_t r = archive_read_data(a_.get(), dst + *got, n - *got);
      if (r < 0) return Error("reading " + member_);
      if (r == 0) break;
      *got += static_cast<size_t>(r);
    }
    hash_->Add(dst, *got);
    got_ += *got;
    return Status::OK();
  }

  Status ReadSmall(int64_t size, std::string* out, int64_t max = kMaxSmallMember) {
    if (size < 0 || size > max)
      return Status::Corruption("export stream: " + member_ + " is too large");
    out->resize(static_cast<size_t>(size));
    size_t got = 0;
    SSDFEED_RETURN_IF_ERROR(Read(out->data(), out->size(), &got));
    if (got != out->size()) return Status::Corruption("export stream: " + member_ + " cut short");
    return EndMember();
  }

  // Checks that the member has no bytes left and records its checksum.
  Status EndMember() {
    char extra;
    size_t got = 0;
    SSDFEED_RETURN_IF_ERROR(Read(&extra, 1, &got));
    if (got != 0)
      return Status::Corruption("export stream: " + member_ + ": bytes after its last record");
    seen_.push_back({{"name", member_}, {"bytes", got_}, {"xxh3_64", Hex64(hash_->Digest())}});
    return Status::OK();
  }

  const nlohmann::json& seen() const { return seen_; }
  const std::string& member() const { return member_; }

 private:
  Status Error(const std::string& what) {
    const char* why = archive_error_string(a_.get());
    return Status::Corruption("export stream: " + what + ": " +
                              (why ? why : "damaged or cut short"));
  }
  std::unique_ptr<archive, ReadCloser> a_;
  std::string member_;
  std::unique_ptr<StreamHash> hash_;
  uint64_t got_ = 0;
  nlohmann::json seen_ = nlohmann::json::array();
};

struct StreamHeader {
  std::string entry;
  uint64_t samples_total = 0, records = 0, record_bytes = 0;
};

Status ParseHeader(const std::string& text, StreamHeader* h) {
  auto j = nlohmann::json::parse(text, nullptr, false);
  auto bad = [](const std::string& why) {
    return Status::Corruption(std::string("export stream: ") + kHeaderMember + ": " + why);
  };
  if (!j.is_object() || !j["format"].is_string() || j["format"].get<std::string>() != kFormatName)
    return bad("not an ssdfeed entry export");
  if (!j["version"].is_number_integer() || j["version"].get<int>() != kStreamVersion)
    return Status::NotSupported(std::string("export stream: version ") + j["version"].dump() +
                                " (this ssdfeed reads version " + std::to_string(kStreamVersion) +
                                ")");
  if (!j["cache_format_version"].is_number_unsigned() ||
      j["cache_format_version"].get<uint32_t>() != cf::kFormatVersion)
    return Status::NotSupported("export stream: records of cache format " +
                                j["cache_format_version"].dump() + " (this ssdfeed uses " +
                                std::to_string(cf::kFormatVersion) + ")");
  for (const char* k : {"samples_total", "records", "record_bytes"})
    if (!j[k].is_number_unsigned()) return bad(std::string("no ") + k);
  if (!j["entry"].is_string()) return bad("no entry");
  h->entry = j["entry"].get<std::string>();
  h->samples_total = j["samples_total"].get<uint64_t>();
  h->records = j["records"].get<uint64_t>();
  h->record_bytes = j["record_bytes"].get<uint64_t>();
  // Bounded before any arithmetic on them (the capacity charge): with
  // samples_total <= 2^32 and a record at most kMaxPayload, no sum wraps.
  if (h->samples_total > kMaxSamplesTotal)
    return bad("entry " + h->entry + ": samples_total " + std::to_string(h->samples_total) +
               " is out of range (at most " + std::to_string(kMaxSamplesTotal) + ")");
  if (h->records > h->samples_total || h->record_bytes < h->records * cf::kRecordHeaderSize ||
      h->record_bytes > h->records * (cf::kRecordHeaderSize + kMaxPayload))
    return bad("entry " + h->entry + ": record counts do not add up (" +
               std::to_string(h->records) + " records of " + std::to_string(h->record_bytes) +
               " bytes, " + std::to_string(h->samples_total) + " samples)");
  return Status::OK();
}

// Streams one records member into the staging segments, checking each.
// Every record must be what the entry's records are (rules: RulesOf its
// key), checked on its header before its pixels are decoded.
Status ImportRecords(ImportReader* rd, const StreamHeader& sh, const cf::RecordRules& rules,
                     const ImportOptions& io, StagedSegments* out, int64_t* last_id,
                     TransferReport* report) {
  std::string rec;
  // Every record of another codec is decoded once: the checksum vouches for
  // the stored bytes only, and an entry must not take in what no read can
  // serve.
  std::vector<uint8_t> pixels;
  PixelCodecScratch codec_scratch;
  for (;;) {
    rec.resize(cf::kRecordHeaderSize);
    size_t got = 0;
    SSDFEED_RETURN_IF_ERROR(rd->Read(rec.data(), rec.size(), &got));
    if (got == 0) return rd->EndMember();
    std::string where =
        "export stream: " + rd->member() + ": record " + std::to_string(report->records);
    if (got < cf::kRecordHeaderSize) return Status::Corruption(where + ": cut short");
    uint32_t payload = LoadU32(rec.data() + 4);
    uint64_t id = LoadU64(rec.data() + 8);
    where += " (sample " + std::to_string(id) + ")";
    // What was charged is what the header declares: no record past it.
    if (report->records >= sh.records)
      return Status::Corruption(where + ": more records than the stream declares");
    if (payload > kMaxPayload ||
        report->record_bytes + cf::kRecordHeaderSize + payload > sh.record_bytes)
      return Status::Corruption(where + ": more record bytes than the stream declares");
    if (id >= sh.samples_total || static_cast<int64_t>(id) <= *last_id)
      return Status::Corruption(where + ": sample id out of order or out of range");
    rec.resize(cf::kRecordHeaderSize + payload);
    SSDFEED_RETURN_IF_ERROR(rd->Read(rec.data() + cf::kRecordHeaderSize, payload, &got));
    if (got != payload) return Status::Corruption(where + ": cut short");
    cf::RecordHeader h;
    std::string bad = cf::CheckRecord(rec.data(), rec.size(), id, rules, &h);
    if (!bad.empty()) return Status::Corruption(where + " of entry " + sh.entry + ": " + bad);
    CachedSample cs;
    cf::SampleOf(rec.data(), h, &cs);
    if (cs.codec != RecordCodec::kRaw) {
      if (pixels.size() < cs.bytes()) pixels.resize(cs.bytes());
      Status d = cf::DecodeSample(&cs, pixels.data(), &codec_scratch);
      if (!d.ok()) return Status::Corruption(where + ": " + d.message());
    }
    if (io.check_record) SSDFEED_RETURN_IF_ERROR(io.check_record(id, cs));
    SSDFEED_RETURN_IF_ERROR(out->Append(rec.data(), rec.size(), h));
    *last_id = static_cast<int64_t>(id);
    report->records++;
    report->record_bytes += rec.size();
  }
}

// The table must list exactly the members read, byte for byte.
Status CheckTable(const std::string& text, const ImportReader& rd, const TransferReport& r) {
  auto j = nlohmann::json::parse(text, nullptr, false);
  auto bad = [](const std::string& why) {
    return Status::Corruption(std::string("export stream: ") + kChecksumMember + ": " + why);
  };
  if (!j.is_object() || !j["members"].is_array()) return bad("not a checksum table");
  const auto& seen = rd.seen();
  // The table itself is the last member read.
  if (j["members"].size() + 1 != seen.size())
    return bad("lists " + std::to_string(j["members"].size()) + " members, the stream holds " +
               std::to_string(seen.size() - 1));
  for (size_t i = 0; i + 1 < seen.size(); ++i)
    if (j["members"][i] != seen[i])
      return bad(seen[i]["name"].get<std::string>() + " does not match its checksum");
  if (!j["records"].is_number_unsigned() || j["records"].get<uint64_t>() != r.records ||
      !j["record_bytes"].is_number_unsigned() ||
      j["record_bytes"].get<uint64_t>() != r.record_bytes)
    return bad("record count does not match the records read");
  return Status::OK();
}

// The records, their index entries and the entry's small files, in checked
// arithmetic (ParseHeader's bounds keep it far from wrapping; this makes
// sure a later change of those bounds cannot undercharge).
bool ImportCharge(const StreamHeader& sh, uint64_t* need) {
  if (sh.samples_total > kMaxSamplesTotal) return false;  // MetaAllowance then cannot wrap
  uint64_t index_bytes = 0;
  return !__builtin_mul_overflow(sh.records, uint64_t{cf::kIndexEntrySize}, &index_bytes) &&
         !__builtin_add_overflow(sh.record_bytes, index_bytes, need) &&
         !__builtin_add_overflow(*need, MetaAllowance(sh.samples_total), need);
}

std::string StagingDir(const RootPaths& paths, uint32_t slot, const std::string& fp) {
  static std::atomic<uint64_t> n{0};
  return JoinPath(paths.trash, std::string(kStagingPrefix) + std::to_string(slot) + ".import." +
                                   fp + "." + std::to_string(::getpid()) + "." +
                                   std::to_string(n++));
}

// Adds the staged records an existing entry lacks, through its normal Put
// path (its own writer slot, capacity and sequence numbers), so the processes
// using it meanwhile are unaffected.
Status MergeInto(const CacheOptions& opts, const EntryKey& key, const std::string& staging,
                 TransferReport* report) {
  SSDFEED_ASSIGN_OR_RETURN(auto entry, CacheEntry::Open(opts, key));
  if (entry->read_only())
    return Status::InvalidArgument(entry->dir() + ": " + entry->warning() + "; not merged");
  SegmentIndex staged(opts.env, staging, key.samples_total, RulesOf(key));
  SSDFEED_RETURN_IF_ERROR(staged.Refresh());
  std::string buf;
  for (uint64_t id = 0; id < key.samples_total; ++id) {
    if (!staged.Contains(id)) continue;
    if (entry->Contains(id)) {
      report->already_present++;
      continue;
    }
    CachedSample s;
    SSDFEED_RETURN_IF_ERROR(staged.Get(id, &buf, &s));
    Status p = entry->Put(id, s);  // pixels and fields
    if (!p.ok()) return p.WithContext("merging into " + entry->dir());
    report->added++;
  }
  report->merged = true;
  return entry->Sync();
}

// Everything after the stream's first two members; staging is removed by
// the caller on failure.
Status ImportBody(const CacheOptions& opts, const ImportOptions& io, ImportReader* rd,
                  const StreamHeader& sh, const EntryKey& key, const std::string& staging,
                  Capacity* capacity, TransferReport* report) {
  Env* env = opts.env;
  RootPaths paths(opts.root);
  std::string fp = key.fingerprint();
  StagedSegments segs(env, staging, FileMode(opts), opts.segment_bytes);
  int64_t last_id = -1;
  for (;;) {
    std::string name;
    int64_t size = 0;
    SSDFEED_RETURN_IF_ERROR(rd->Next(&name, &size));
    if (name.empty())
      return Status::Corruption("export stream: ends before its checksum table (cut short?)");
    if (name == kChecksumMember) {
      std::string table;
      SSDFEED_RETURN_IF_ERROR(rd->ReadSmall(size, &table));
      SSDFEED_RETURN_IF_ERROR(CheckTable(table, *rd, *report));
      break;
    }
    if (name.rfind(kRecordsPrefix, 0) != 0)
      return Status::Corruption("export stream: unexpected member " + name);
    SSDFEED_RETURN_IF_ERROR(ImportRecords(rd, sh, RulesOf(key), io, &segs, &last_id, report));
  }
  std::string name;
  int64_t size = 0;
  SSDFEED_RETURN_IF_ERROR(rd->Next(&name, &size));
  if (!name.empty()) return Status::Corruption("export stream: member " + name + " after the end");
  SSDFEED_RETURN_IF_ERROR(segs.Finish());
  SSDFEED_RETURN_IF_ERROR(EnsureManifest(env, staging, key, fp, false, FileMode(opts)));
  TouchLastUsed(env, staging, FileMode(opts));
  WriteStatus(env, staging, report->records, key.samples_total, FileMode(opts));
  std::string dir = JoinPath(paths.entries, fp);
  report->entry = fp;
  if (!env->FileExists(dir)) {
    Status r = env->RenameFile(staging, dir);
    if (r.ok()) {
      report->added = report->records;
      SSDFEED_RETURN_IF_ERROR(env->SyncDir(paths.entries));
      return env->SyncDir(paths.trash);
    }
    if (!env->FileExists(dir)) return r;  // else made meanwhile: merge
  }
  // The staged files are charged as trash now; the merge reserves its own.
  capacity->Release();
  return MergeInto(opts, key, staging, report);
}

}  // namespace

Status ImportEntry(const CacheOptions& in, int fd, const ImportOptions& io,
                   TransferReport* report) {
  CacheOptions opts = in;
  if (opts.env == nullptr) opts.env = Env::Default();
  *report = {};
  Env* env = opts.env;
  RootPaths paths(opts.root);
  SSDFEED_RETURN_IF_ERROR(PrepareRoot(env, opts));
  ImportReader rd;
  SSDFEED_RETURN_IF_ERROR(rd.Open(fd));
  std::string name, header_text, manifest;
  int64_t size = 0;
  SSDFEED_RETURN_IF_ERROR(rd.Next(&name, &size));
  if (name != kHeaderMember)
    return Status::Corruption("export stream: does not start with " + std::string(kHeaderMember) +
                              " (not an ssdfeed cache export)");
  SSDFEED_RETURN_IF_ERROR(rd.ReadSmall(size, &header_text));
  StreamHeader sh;
  SSDFEED_RETURN_IF_ERROR(ParseHeader(header_text, &sh));
  SSDFEED_RETURN_IF_ERROR(rd.Next(&name, &size));
  if (name != kManifestMember)
    return Status::Corruption("export stream: " + std::string(kManifestMember) + " missing");
  SSDFEED_RETURN_IF_ERROR(rd.ReadSmall(size, &manifest, kMaxManifestBytes));
  SSDFEED_ASSIGN_OR_RETURN(EntryKey exported, ParseEntryKey(manifest, "export stream: manifest"));
  if (exported.fingerprint() != sh.entry || exported.samples_total != sh.samples_total)
    return Status::Corruption("export stream: the manifest is not that of entry " + sh.entry);
  EntryKey key = exported;
  if (io.rebind) {
    SSDFEED_ASSIGN_OR_RETURN(key, io.rebind(exported));
  }
  if (key.samples_total != exported.samples_total || key.spec != exported.spec)
    return Status::InvalidArgument("the entry's source on this node (" + key.source_uri +
                                   ") does not have the exported entry's samples or preparation");
  std::string fp = key.fingerprint();
  report->source_uri = key.source_uri;
  report->samples_total = key.samples_total;

  // Charged before a byte is written: the records, their index entries and
  // the entry's small files.
  Capacity capacity(opts, JoinPath(paths.entries, fp), nullptr);
  uint64_t need = 0;
  if (!ImportCharge(sh, &need))
    return Status::Corruption("export stream: entry " + sh.entry + ": its sizes overflow");
  auto granted = capacity.Reserve(need);
  if (!granted.ok())
    return granted.status().WithContext("cannot import entry " + fp + " (" + std::to_string(need) +
                                        " bytes)");
  std::string staging = StagingDir(paths, capacity.slot(), fp);
  // Held until the import ends, so no EmptyTrash deletes the staged entry.
  SSDFEED_ASSIGN_OR_RETURN(auto maker, CreateStagingDir(env, opts, staging));
  Status s = ImportBody(opts, io, &rd, sh, key, staging, &capacity, report);
  // Cleanup only (s is what the import did): EmptyTrash removes a staging
  // dir left behind, and a maker lock left in place is an unused empty file.
  if (!s.ok() || report->merged) env->RemoveDirAndFiles(staging).IgnoreError();
  if (s.ok() && !report->merged)
    env->RemoveFile(JoinPath(JoinPath(paths.entries, fp), kMakerLock)).IgnoreError();
  return s;
}

}  // namespace ssdfeed
