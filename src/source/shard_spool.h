// Shards of an object-store origin streamed once while they are indexed,
// their bytes kept on local disk so that the samples read from them in the
// same job are not fetched again. Without it, a cold job would fetch every
// byte twice (once to index, once to prepare), or index by reading each
// member's or record's header with its own request (millions of GETs for
// ImageNet in tars).
//
// The scan reads a shard through Streaming(): it fetches the object forward
// in large non-overlapping ranges (kSpoolChunkBytes, one request each),
// whatever the scan skips included, and appends each range to a spool file.
// Samples are read through Reading(): bytes already spooled come from the
// spool; a sample inside a run planned for reading (Plan, from
// Source::PlanReads: the misses of a partial entry, close together) fetches
// its whole run with one request and spools it for the run's other samples;
// the rest comes from the origin, one ranged read each. Spool files are unlinked as soon as they
// are opened, so nothing is left behind when the job ends or is killed; they
// live as long as the source that made them.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "source/shard_files.h"
#include "ssdfeed/env.h"
#include "util/mutex.h"

namespace ssdfeed {

// Bytes fetched per request while streaming a shard. Large enough that a
// shard costs a handful of requests; small enough to hold one per scan
// thread in memory.
constexpr size_t kSpoolChunkBytes = size_t{8} << 20;

// A spool is only written while its filesystem keeps more than this share
// of its size free (1/10): a cold job must not fill the cache's disk with
// shard bytes. Past it the shard is streamed without being kept, and its
// samples are fetched again with ranged reads.
constexpr uint64_t kSpoolFreeShare = 10;

class ShardSpools {
 public:
  explicit ShardSpools(size_t shards) : slots_(shards) {}
  // Where spool files are made (a directory on the cache's disk) and the Env
  // that makes them. Empty dir (the default): nothing is kept; streaming
  // still fetches each shard in large ranges.
  void Configure(Env* env, std::string dir);
  // The file a scan reads shard i through; origin reads the object.
  std::unique_ptr<RandomAccessFile> Streaming(size_t i, std::unique_ptr<RandomAccessFile> origin);
  // The file samples of shard i are read through.
  std::unique_ptr<RandomAccessFile> Reading(size_t i, std::unique_ptr<RandomAccessFile> origin);
  // Drops shard i's spools (every sample of it was read): their disk space
  // is freed once the reads in flight finish; later reads go to the origin.
  void Release(size_t i);
  // Runs of shard i about to be read (sorted, not overlapping).
  void Plan(size_t i, std::vector<ShardFiles::Run> runs);

  // A planned run fetched and kept: object bytes [begin, end) at `at` in
  // the run spool.
  struct KeptRun {
    uint64_t end = 0, at = 0;
  };
  // What is kept of shard i.
  struct Slot {
    Mutex mu;
    std::shared_ptr<const RandomAccessFile> file GUARDED_BY(mu);  // the stream spool, read side
    uint64_t length GUARDED_BY(mu) = 0;  // the object's first `length` bytes are in it
    std::vector<ShardFiles::Run> planned GUARDED_BY(mu);          // runs not fetched yet
    std::map<uint64_t, KeptRun> kept GUARDED_BY(mu);              // by begin
    std::shared_ptr<const RandomAccessFile> runs GUARDED_BY(mu);  // the run spool, read side
    std::unique_ptr<WritableFile> runs_writer GUARDED_BY(mu);
    Mutex fetch_mu;  // one run fetched at a time, so none is fetched twice
  };

 private:
  Env* env_ = nullptr;
  std::string dir_;
  std::vector<Slot> slots_;
};

}  // namespace ssdfeed
