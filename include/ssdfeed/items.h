// ItemStore: a cache entry of a user's own items (arrays and bytes, no
// image), as the Loader owns an entry of prepared images. ssdfeed.cache(),
// ssdfeed.tf.cache() and C++ users store items through it, with the same
// claims (two processes compute an item about once), capacity, admission,
// checksums and counters as every image entry: it drives the one
// SampleFetcher.
//
// An item is a list of fields: kArray (a .npy, version 1-3) or kBytes (kept
// as given). docs/cache-format.md ("Items") describes the entry's key.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "ssdfeed/cache.h"
#include "ssdfeed/metrics.h"
#include "ssdfeed/sample.h"
#include "ssdfeed/source.h"
#include "ssdfeed/status.h"

namespace ssdfeed {

// The record spec of every item entry: part of its key, so a change to
// what an item record holds must change it. The one spelling (Python reads
// it as ssdfeed._ssdfeed.ITEMS_SPEC).
inline constexpr char kItemsRecordSpec[] = "items1";

struct ItemStoreOptions {
  // Bytes the entry may hold. Default 0: the root's configured share, as
  // CacheOptions::capacity_bytes.
  uint64_t capacity_bytes = 0;
  // Files readable and writable by the root's group (a root shared between
  // unix users of a group). Default false: owner only.
  bool group_shared = false;
  // How long Get waits for another process that claimed a missing item
  // before computing it too. Default 3 seconds; must be >= 0.
  double claim_wait_seconds = 3.0;
  // What Get does when compute fails: kRaise (default) returns the error;
  // kSkip counts it (Ctr::kSkipped), keeps its message (Stats().skipped_items)
  // and returns OK with ItemFields::skipped set.
  OnError on_error = OnError::kRaise;
};

// Computes item i's fields into *fields (cleared by the caller). Not OK:
// Get fails with it (or skips the item, under OnError::kSkip).
using ItemCompute = std::function<Status(uint64_t i, std::vector<EncodedField>* fields)>;

// One item's fields as Get and Lookup give them: views into `section`,
// valid until the next call that fills this ItemFields. Reuse one per
// thread: its buffers are then allocated once.
struct ItemFields {
  std::vector<FieldView> views;
  bool skipped = false;  // compute failed under OnError::kSkip: no views
  std::string section;   // the record's field section the views point into
};

struct ItemStoreStats {
  StatsSnapshot snapshot;                  // this process's counters (Loader::stats() names)
  std::vector<std::string> skipped_items;  // why each skipped item failed
  std::string cache_dir;
  bool admitting = true;
  std::string cache_warning;
  std::string stats_file;  // empty when the counters are in memory only
};

class ItemStore {
 public:
  // The entry of (uri, identity, size) under root, opened or made. uri names
  // the items in messages ("<uri> item <i>"); identity is what makes two
  // datasets' entries differ. Unavailable or Busy when no entry can be
  // opened now (full of entries in use, or locked): callers fall back to
  // computing every item.
  static Result<std::unique_ptr<ItemStore>> Open(const std::string& root, const std::string& uri,
                                                 const std::string& identity, uint64_t size,
                                                 const ItemStoreOptions& options = {});
  ~ItemStore();
  ItemStore(const ItemStore&) = delete;
  ItemStore& operator=(const ItemStore&) = delete;

  // Item i: from the cache, else (once another process's claim on it is
  // let go of or has waited claim_wait_seconds) compute(i), stored while the
  // entry admits, and returned. compute may be empty: a miss is NotFound.
  Status Get(uint64_t i, const ItemCompute& compute, ItemFields* out);
  // Item i from the cache only (others' newest records included); NotFound
  // when absent. A corrupt record is dropped, counted and NotFound.
  Status Lookup(uint64_t i, ItemFields* out);
  // Stores item i unless it is present or the entry no longer admits
  // (capacity, full disk): *stored says which. Bad fields are InvalidArgument.
  Status Put(uint64_t i, const std::vector<EncodedField>& fields, bool* stored);
  // Items the entry holds, all processes'.
  uint64_t Present();
  ItemStoreStats Stats();

  uint64_t size() const { return size_; }
  const std::string& uri() const { return uri_; }
  // The entry's key fingerprint (its directory name under the root).
  std::string fingerprint() const;
  // "<uri> item <i>", how every message about item i starts.
  std::string Describe(uint64_t i) const;

 private:
  struct State;
  struct Impl;
  class ComputeSource;
  explicit ItemStore(std::unique_ptr<Impl> impl);
  // This process's state, opened anew after a fork (the child leaves the
  // parent's writer slot, claims and files untouched); the caller's
  // reference keeps it open through a concurrent destruction of the store.
  Result<std::shared_ptr<State>> Current();
  Status CheckIndex(uint64_t i) const;

  std::unique_ptr<Impl> impl_;
  uint64_t size_;
  std::string uri_;
};

// Items of a length not known up front (a tf.data pipeline's elements, as
// tf.data's own cache keeps them: parts, and a meta record written at the
// end). Item i is item i % part_size of the part entry i / part_size, an
// ItemStore of part_size items whose identity is "<identity> P=<part_size>
// part=<p>"; a one-item meta entry ("<identity> P=<part_size> meta") holds
// the length, a .npy int64 scalar field "0", once Finish records it.
// Finish is a fill's last write: a fill killed before it leaves parts and no
// length, so no reader takes the items for complete; the next fill reads
// what the parts hold and computes the rest (docs/cache-format.md, "Items").
struct ItemStreamOptions {
  // Every part's options (capacity, group sharing, claims, on_error).
  ItemStoreOptions store;
  // Items a part entry holds; part of every entry's identity. Default 65536
  // (ImageNet's 1.28M images are 20 parts); must be > 0.
  uint64_t part_size = 65536;
};

class ItemStream {
 public:
  // Opens nothing yet: each part is opened as an item of it is first asked
  // for, once a process.
  static Result<std::unique_ptr<ItemStream>> Open(const std::string& root, const std::string& uri,
                                                  const std::string& identity,
                                                  const ItemStreamOptions& options = {});
  ~ItemStream();
  ItemStream(const ItemStream&) = delete;
  ItemStream& operator=(const ItemStream&) = delete;

  // ItemStore's Get, Lookup and Put on item i's part; compute is called
  // with the stream's index i. Busy when the part cannot be had (the root
  // full of entries in use, without room for a new one, or locked): the
  // caller computes the item without the cache.
  Status Get(uint64_t i, const ItemCompute& compute, ItemFields* out);
  Status Lookup(uint64_t i, ItemFields* out);
  Status Put(uint64_t i, const std::vector<EncodedField>& fields, bool* stored);
  // The length a finished fill recorded. NotFound before one did (or once
  // the meta record was evicted); Busy when no meta entry can be had.
  Result<uint64_t> Length();
  // Records the length: the items have ended at n. Part 0 is opened first,
  // so that under a small capacity the items rather than the meta entry
  // get the first reservation.
  Status Finish(uint64_t n);
  // Items of [0, n) the parts hold (all processes'); parts that cannot be
  // had hold none.
  uint64_t Present(uint64_t n);
  // The length is recorded and every item is present: a pass may read each
  // item by index, never computing one.
  bool Complete();
  // This process's counters over every part opened, summed; the first
  // part's cache_dir and stats_file; the first warning.
  ItemStoreStats Stats();
  // Why a part or the meta entry could not be had ("" while all could).
  std::string unavailable();

  uint64_t part_size() const { return part_size_; }

 private:
  struct Impl;
  explicit ItemStream(std::unique_ptr<Impl> impl);
  // Part p's store (opened on first use), or Busy.
  Result<ItemStore*> Part(uint64_t p);
  Result<ItemStore*> Meta();

  std::unique_ptr<Impl> impl_;
  uint64_t part_size_;
};

}  // namespace ssdfeed
