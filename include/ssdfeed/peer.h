// Peer fill: the pieces with which the nodes of one training job fill each
// other's cache entry of (source, preparation), each node reading and
// preparing only a share of the samples from the origin. The transport is
// the caller's (Python's ssdfeed.distributed.warm moves the batches over the
// job's torch.distributed process group); this side only turns records into
// batches and checks and stores batches received. See docs/multi-node.md.
//
//   auto pe = ssdfeed::PeerEntry::Open("s3://bucket/train/", o);
//   std::string batch;
//   PeerBatchInfo sent;
//   (*pe)->Export({0, 3, 6}, 1, &batch, &sent);  // on the node that holds them
//   PeerImportReport r;
//   (*pe)->Import(batch.data(), batch.size(), &r);  // on a node that lacks them
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ssdfeed/cache.h"
#include "ssdfeed/source.h"
#include "ssdfeed/status.h"
#include "ssdfeed/warm.h"

namespace ssdfeed {

struct PeerBatchInfo {
  uint64_t records = 0, bytes = 0;  // records in the batch, the batch's bytes
};

// What Import did with one batch.
struct PeerImportReport {
  uint64_t stored = 0;           // records checked and stored
  uint64_t already_present = 0;  // records the entry held already: skipped
  uint64_t refused = 0;          // records that failed a check: not stored
  uint64_t not_admitted = 0;     // good records the full cache did not take
  uint64_t bytes = 0;            // the batch's bytes
  std::string first_refusal;     // why the first refused record was refused
};

class PeerEntry {
 public:
  // Opens the source at uri (options.source) and its entry of
  // options.prepare under options.cache.root, as Warm would.
  static Result<std::unique_ptr<PeerEntry>> Open(const std::string& uri,
                                                 const WarmOptions& options);
  virtual ~PeerEntry() = default;

  virtual const std::string& fingerprint() const = 0;  // the entry's
  virtual uint64_t samples_total() const = 0;
  virtual const std::string& dir() const = 0;
  // One byte per sample id, 1 where the entry holds the sample (after a
  // refresh: what other processes stored counts too).
  virtual Status Presence(std::vector<uint8_t>* present) = 0;
  virtual bool admitting() const = 0;
  virtual std::string warning() const = 0;  // why admission stopped

  // Reads and prepares `ids` from the origin into the entry (Warm with
  // WarmOptions::ids, the options Open was given).
  virtual Status WarmIds(const std::vector<uint64_t>& ids, WarmResult* result) = 0;

  // Appends to *batch a batch of the entry's stored records of `ids` (those
  // it holds intact; the others are left out): a header naming the entry's
  // fingerprint, then the records in the cache's own format. Counts them as
  // sent (peer_records_sent, peer_bytes_sent) once for each of the
  // `receivers` nodes the caller sends the batch to.
  virtual Status Export(const std::vector<uint64_t>& ids, uint32_t receivers, std::string* batch,
                        PeerBatchInfo* info) = 0;
  // Checks every record of a batch as an import of `ssdfeed cache export`
  // does (the batch's entry fingerprint, each record's checksum, id, length,
  // codec and shape against the entry's rules) and stores those the entry
  // lacks. A record that fails a check is refused and counted
  // (peer_records_refused); a batch whose framing is damaged is refused from
  // there on. Neither is an error (the caller sends the missing ids again);
  // an I/O error storing is. Records a full cache cannot take are counted
  // as not admitted.
  virtual Status Import(const char* batch, size_t len, PeerImportReport* report) = 0;

  // Counts the time from the start of a peer fill to this node's entry
  // holding every sample (peer_fill_complete_ms).
  virtual void RecordComplete(double seconds) = 0;
  // Makes everything stored durable.
  virtual Status Sync() = 0;
};

}  // namespace ssdfeed
