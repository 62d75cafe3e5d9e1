// Where a loader stands in its epochs: the epoch, this rank's plan of
// source ids for it, where the next pass starts, and the saved state
// (state_dict) with the checks a state must pass to load.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "ssdfeed/loader.h"
#include "ssdfeed/status.h"

namespace ssdfeed {

class EpochState {
 public:
  // source_size: the samples of the whole source.
  EpochState(const LoaderOptions& o, uint64_t source_size);

  uint64_t epoch() const { return epoch_; }
  // The source ids of the pass, in the order served (set by Replan).
  const std::vector<uint64_t>& order() const { return order_; }
  size_t num_batches() const;
  // Where the next pass starts: a plan position, and the batches of the
  // epoch consumed before it.
  uint64_t start_pos() const { return start_pos_; }
  uint64_t start_batch() const { return start_batch_; }

  // Plans epoch() (a pass is about to start).
  void Replan() { order_ = Plan(epoch_); }
  // The next pass is epoch e from its first batch, whole.
  void SetEpoch(uint64_t e);
  // The next pass resumes epoch() at plan position pos, after `batches`.
  void ResumeAt(uint64_t pos, uint64_t batches);

  // A state at plan position pos, after `batches` batches of epoch().
  LoaderState Save(uint64_t pos, uint64_t batches) const;
  // Whether s was saved by a loader like this one (or merged from ranks of one).
  Status Check(const LoaderState& s) const;
  // Loads a checked s: the next pass resumes where it stood.
  void Load(const LoaderState& s);

 private:
  uint64_t id_end() const { return opts_.id_end ? opts_.id_end : source_size_; }
  std::vector<uint64_t> Plan(uint64_t epoch) const;

  const LoaderOptions opts_;
  const uint64_t source_size_;
  std::vector<uint64_t> ids_;  // validation_split: the ids of this part
  uint64_t epoch_ = 0;
  ResumeLayers resumed_from_;  // epoch_ resumes from merged states (elastic)
  uint64_t start_pos_ = 0, start_batch_ = 0;
  std::vector<uint64_t> order_;
};

}  // namespace ssdfeed
