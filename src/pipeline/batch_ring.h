// The loader's ring of chunk slots. Chunk c holds plan positions
// [c * batch_size, (c + 1) * batch_size) and lives in slot c % nslots while
// workers fill it. Workers take runs of positions from one counter; one that
// gets ahead of the ring waits for space (backpressure). The consumer waits
// for the oldest chunk to be filled, takes it, and releases its slot for
// chunk c + nslots. Errors travel with their chunk.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "pipeline/batch_fields.h"
#include "pipeline/batch_pool.h"
#include "ssdfeed/image.h"
#include "ssdfeed/loader.h"
#include "ssdfeed/status.h"
#include "util/mutex.h"

namespace ssdfeed {

// One chunk being filled. A worker writes only the positions it took,
// without the ring's lock; the consumer reads them once WaitChunk says the
// chunk is done, and no worker touches it again until it is released.
struct RingSlot {
  uint64_t batch = 0;  // which chunk of the epoch it holds
  size_t count = 0;    // samples it will hold
  size_t done = 0;
  std::shared_ptr<BatchBuffer> buffer;
  std::vector<Image> staging;  // shape known only per sample
  // Each position's other fields, collated once the chunk is whole. Kept
  // across chunks, so their storage is reused.
  std::vector<StagedFields> fields;
  // Masks rendered straight into the batch's layout, sized per chunk;
  // CollateFields swaps each into the batch.
  std::vector<MaskPlane> planes;
  Status error;  // first error (on_error=raise)
};

// A run of consecutive plan positions a worker has taken, all in one chunk.
struct RingRun {
  uint64_t k = 0;  // first plan position
  size_t n = 0;
  RingSlot* slot = nullptr;
};

class BatchRing {
 public:
  // sample_bytes > 0: each chunk gets a buffer for batch_size samples of
  // that size; 0: samples differ in shape and are staged one by one.
  // planes (default none): every slot's mask planes (SampleRenderer::
  // MaskPlanes), each sized to batch_size samples when a chunk starts.
  BatchRing(size_t nslots, size_t batch_size, size_t sample_bytes, std::shared_ptr<BatchPool> pool,
            std::vector<MaskPlane> planes = {});

  // With no worker running: fill plan positions [cursor, end) from now on.
  // The positions of cursor's chunk before it count as done (consumed
  // before a stop, not redone).
  void Start(uint64_t cursor, uint64_t end) EXCLUDES(mu_);
  // Every Take returns false from now on, waiting ones too; the caller
  // then joins its workers.
  void Stop() EXCLUDES(mu_);

  // Worker side. Takes the next run of up to `group` positions, never
  // crossing a chunk. Waits for ring space unless try_only: a worker
  // holding an unfinished run must not wait, the consumer may need that run
  // to free the space. False: nothing left, or stopped (or no space yet).
  bool Take(size_t group, bool try_only, RingRun* run) EXCLUDES(mu_);
  // One position of slot is done; s (if not OK) is kept as its first error.
  void Finish(RingSlot* slot, const Status& s) EXCLUDES(mu_);

  // Consumer side. Waits until chunk c is filled; its first error.
  Status WaitChunk(uint64_t c, RingSlot** out) EXCLUDES(mu_);
  // Hands chunk c (the oldest) back to the workers.
  void Release(uint64_t c) EXCLUDES(mu_);

 private:
  void ResetLocked(RingSlot* s, uint64_t chunk) REQUIRES(mu_);

  const size_t nslots_, batch_size_, sample_bytes_;
  const std::shared_ptr<BatchPool> pool_;
  const std::vector<MaskPlane> planes_;  // names and sizes; no data
  Mutex mu_;
  std::condition_variable ready_cv_, space_cv_;
  std::vector<RingSlot> slots_ GUARDED_BY(mu_);
  bool stop_ GUARDED_BY(mu_) = true;
  uint64_t next_sample_ GUARDED_BY(mu_) = 0;  // next plan position to take
  uint64_t end_sample_ GUARDED_BY(mu_) = 0;
  uint64_t next_chunk_ GUARDED_BY(mu_) = 0;  // oldest chunk not yet released
};

}  // namespace ssdfeed
