// A record sink under test, on real files: the segment opener, the hooks'
// record of what they were told, and records that read back through the
// SegmentIndex the sink feeds.
#pragma once

#include <gtest/gtest.h>

#include <mutex>
#include <string>
#include <vector>

#include "cache/record_format.h"
#include "cache/record_sink.h"
#include "cache/segment_index.h"
#include "cache/segment_writer.h"
#include "test_util.h"

namespace ssdfeed::test {

namespace cf = cache_format;

// One record: header bytes, payload, and its index entry (offset unset).
struct TestRecord {
  uint64_t id = 0;
  std::vector<uint8_t> payload;
  char hdr[cf::kRecordHeaderSize];
  cf::IndexEntry ie;
};

// A record of rows x cols one-channel pixels.
inline TestRecord MakeRecord(uint64_t id, int rows, int cols) {
  size_t payload_bytes = static_cast<size_t>(rows) * cols;
  TestRecord r;
  r.id = id;
  r.payload.resize(payload_bytes);
  for (size_t i = 0; i < payload_bytes; ++i) r.payload[i] = static_cast<uint8_t>(id * 131 + i * 7);
  cf::RecordHeader h;
  h.payload_len = static_cast<uint32_t>(payload_bytes);
  h.sample_id = id;
  h.height = static_cast<uint16_t>(rows);
  h.width = static_cast<uint16_t>(cols);
  h.channels = 1;
  h.label = static_cast<int64_t>(id % 5);
  cf::EncodeRecordHeader(&h, r.payload.data(), r.hdr);
  r.ie = cf::IndexEntry{
      id,       0,         static_cast<uint32_t>(cf::kRecordHeaderSize + payload_bytes),
      h.height, h.width,   h.channels,
      id + 1,   h.checksum};
  return r;
}

class SinkRig {
 public:
  explicit SinkRig(Env* env, uint64_t samples = 1000)
      : env_(env), index_(env, dir_.path(), samples) {}

  // Opens seg-0-<n> afresh, as SegmentWriter does for a new segment.
  Status Open(int n, bool direct, SegmentPair* p) {
    std::string base = SegmentBase(0, n);
    WritableFileOptions wo;
    wo.truncate = true;
    wo.direct = direct;
    SegmentPair f;
    f.seg = n;
    SSDFEED_ASSIGN_OR_RETURN(f.dat, env_->NewWritableFile(Path(base + ".dat"), wo));
    wo.direct = false;
    SSDFEED_ASSIGN_OR_RETURN(f.idx, env_->NewWritableFile(Path(base + ".idx"), wo));
    SSDFEED_RETURN_IF_ERROR(env_->SyncDir(dir_.path()));
    SSDFEED_ASSIGN_OR_RETURN(auto reader, env_->NewRandomAccessFile(Path(base + ".dat")));
    f.index_slot = index_.AttachOwn(base, std::move(reader));
    *p = std::move(f);
    return Status::OK();
  }

  SinkHooks Hooks(bool direct) {
    SinkHooks h;
    h.open_segment = [this, direct](int n, SegmentPair* p) {
      {
        std::lock_guard<std::mutex> l(mu_);
        opened_.push_back(n);
      }
      return Open(n, direct, p);
    };
    h.failed = [this](const Status& why) {
      std::lock_guard<std::mutex> l(mu_);
      failures_.push_back(why.ToString());
    };
    h.written = [this](uint64_t charged) {
      std::lock_guard<std::mutex> l(mu_);
      written_ += charged;
    };
    h.release_claim = [this](uint64_t id) {
      std::lock_guard<std::mutex> l(mu_);
      released_.push_back(id);
    };
    return h;
  }

  SinkOptions Options(uint64_t segment_bytes = 1ull << 30, uint64_t sync_bytes = 1ull << 30) {
    return SinkOptions{env_, segment_bytes, sync_bytes};
  }

  // True when r reads back intact through the index.
  bool ReadsBack(const TestRecord& r) {
    std::string buf;
    CachedSample s;
    Status st = index_.Get(r.id, &buf, &s);
    EXPECT_TRUE(st.ok()) << r.id << ": " << st.ToString();
    return st.ok() && s.label == static_cast<int64_t>(r.id % 5) &&
           std::equal(r.payload.begin(), r.payload.end(), s.pixels);
  }

  uint64_t FileSize(const std::string& name) { return env_->Stat(Path(name))->size; }
  std::string Path(const std::string& name) const { return dir_.Sub(name); }
  SegmentIndex* index() { return &index_; }
  CacheCounters* counters() { return &counters_; }
  std::vector<int> opened() {
    std::lock_guard<std::mutex> l(mu_);
    return opened_;
  }
  std::vector<std::string> failures() {
    std::lock_guard<std::mutex> l(mu_);
    return failures_;
  }
  uint64_t written() {
    std::lock_guard<std::mutex> l(mu_);
    return written_;
  }
  std::vector<uint64_t> released() {
    std::lock_guard<std::mutex> l(mu_);
    return released_;
  }

 private:
  TempDir dir_;
  Env* env_;
  SegmentIndex index_;
  CacheCounters counters_;
  std::mutex mu_;
  std::vector<int> opened_;
  std::vector<std::string> failures_;
  uint64_t written_ = 0;
  std::vector<uint64_t> released_;
};

}  // namespace ssdfeed::test
