#include "pipeline/epoch_state.h"

#include <algorithm>
#include <string>
#include <utility>

namespace ssdfeed {

EpochState::EpochState(const LoaderOptions& o, uint64_t source_size)
    : opts_(o), source_size_(source_size) {
  if (opts_.validation_split > 0)
    ids_ = SplitIds(opts_.id_begin, id_end(), opts_.validation_split, opts_.split_seed,
                    opts_.validation_subset);
  order_ = Plan(0);
}

size_t EpochState::num_batches() const {
  size_t bs = opts_.batch_size;
  return opts_.drop_last ? order_.size() / bs : (order_.size() + bs - 1) / bs;
}

void EpochState::SetEpoch(uint64_t e) {
  epoch_ = e;
  start_pos_ = start_batch_ = 0;
  resumed_from_.clear();
}

void EpochState::ResumeAt(uint64_t pos, uint64_t batches) {
  start_pos_ = pos;
  start_batch_ = batches;
}

// The epoch's source ids for this rank: a plan over the id range (or the
// split's ids), mapped to source ids.
std::vector<uint64_t> EpochState::Plan(uint64_t epoch) const {
  bool split = opts_.validation_split > 0;
  uint64_t n = split ? ids_.size() : id_end() - opts_.id_begin;
  // resumed_from_ holds only while epoch_ is the resumed epoch.
  const ResumeLayers none;
  std::vector<uint64_t> plan = ResumedEpochOrder(
      n, opts_.shuffle, opts_.seed, epoch, opts_.rank, opts_.world_size, opts_.sampler_drop_last,
      opts_.shard, opts_.rotate_every, epoch == epoch_ ? resumed_from_ : none);
  for (uint64_t& id : plan) id = split ? ids_[id] : id + opts_.id_begin;
  return plan;
}

LoaderState EpochState::Save(uint64_t pos, uint64_t batches) const {
  LoaderState s;
  s.epoch = epoch_;
  s.batches_consumed = batches;
  s.position = pos;
  s.seed = opts_.seed;
  s.rank = opts_.rank;
  s.world_size = opts_.world_size;
  s.num_samples = source_size_;
  s.batch_size = opts_.batch_size;
  s.shard = opts_.shard;
  s.rotate_every = opts_.rotate_every;
  s.resumed_from = resumed_from_;
  return s;
}

Status EpochState::Check(const LoaderState& s) const {
  if (s.seed != opts_.seed || s.num_samples != source_size_ || s.batch_size != opts_.batch_size ||
      s.shard != opts_.shard ||
      (s.shard == ShardMode::kRotate && s.rotate_every != opts_.rotate_every))
    return Status::InvalidArgument(
        "state does not match this loader (seed, dataset size, batch_size, shard and "
        "rotate_every must be the same)");
  if (!s.merged && (s.rank != opts_.rank || s.world_size != opts_.world_size))
    return Status::InvalidArgument(
        "state of rank " + std::to_string(s.rank) + " of " + std::to_string(s.world_size) +
        " does not match this loader's rank " + std::to_string(opts_.rank) + " of " +
        std::to_string(opts_.world_size) +
        ": merge the states of all ranks with merge_states() to resume on another world size");
  for (const auto& layer : s.resumed_from)
    if (layer.empty()) return Status::InvalidArgument("state: a resumed_from layer is empty");
  return Status::OK();
}

void EpochState::Load(const LoaderState& s) {
  epoch_ = s.epoch;
  resumed_from_ = s.resumed_from;
  order_ = Plan(epoch_);
  if (s.merged && order_.empty() && !resumed_from_.empty()) {
    // The old ranks read the whole epoch: resume at the next one.
    ++epoch_;
    resumed_from_.clear();
    order_ = Plan(epoch_);
  }
  start_batch_ = std::min<uint64_t>(s.batches_consumed, num_batches());
  // A state without a position (older ones) had no skips: batches * size.
  start_pos_ = std::min<uint64_t>(std::max<uint64_t>(s.position, start_batch_ * opts_.batch_size),
                                  order_.size());
}

namespace {

// Where a rank's state stands in epoch `e` (the merge's epoch): its plan
// positions consumed, or all of them when it already finished e.
Result<uint64_t> PositionIn(const LoaderState& s, uint64_t e) {
  uint64_t pos = std::max<uint64_t>(s.position, s.batches_consumed * s.batch_size);
  if (s.epoch == e) return pos;
  if (s.epoch == e + 1 && pos == 0 && s.resumed_from.empty()) return UINT64_MAX;
  return Status::InvalidArgument("merge_states: rank " + std::to_string(s.rank) + " is in epoch " +
                                 std::to_string(s.epoch) + ", another in " + std::to_string(e) +
                                 "; ranks must stop in the same epoch");
}

Status CheckMergeable(const std::vector<LoaderState>& states) {
  if (states.empty()) return Status::InvalidArgument("merge_states: no states");
  const LoaderState& a = states[0];
  std::vector<bool> seen(states.size(), false);
  for (const LoaderState& s : states) {
    if (s.merged)
      return Status::InvalidArgument("merge_states: a state is already merged; load it first");
    if (s.world_size != static_cast<int>(states.size()))
      return Status::InvalidArgument("merge_states: got " + std::to_string(states.size()) +
                                     " states, but rank " + std::to_string(s.rank) +
                                     " was one of " + std::to_string(s.world_size) +
                                     "; pass the state of every rank");
    if (s.rank < 0 || s.rank >= s.world_size || seen[static_cast<size_t>(s.rank)])
      return Status::InvalidArgument("merge_states: rank " + std::to_string(s.rank) +
                                     " is missing or repeated; pass each rank's state once");
    seen[static_cast<size_t>(s.rank)] = true;
    if (s.seed != a.seed || s.num_samples != a.num_samples || s.batch_size != a.batch_size ||
        s.shard != a.shard || s.rotate_every != a.rotate_every)
      return Status::InvalidArgument(
          "merge_states: the states are of different loaders (seed, dataset size, batch_size, "
          "shard or rotate_every differ)");
  }
  return Status::OK();
}

}  // namespace

Result<LoaderState> MergeStates(const std::vector<LoaderState>& states) {
  SSDFEED_RETURN_IF_ERROR(CheckMergeable(states));
  uint64_t e = states[0].epoch;
  for (const LoaderState& s : states) e = std::min(e, s.epoch);
  LoaderState out = states[0];
  out.epoch = e;
  out.rank = 0;
  out.world_size = 0;
  out.batches_consumed = out.position = 0;
  out.merged = true;
  out.resumed_from.clear();
  std::vector<uint64_t> layer(states.size());
  bool started = false;
  for (const LoaderState& s : states) {
    SSDFEED_ASSIGN_OR_RETURN(uint64_t pos, PositionIn(s, e));
    layer[static_cast<size_t>(s.rank)] = pos;
    started = started || pos > 0 || !s.resumed_from.empty();
    if (s.epoch == e && !s.resumed_from.empty()) out.resumed_from = s.resumed_from;
  }
  for (const LoaderState& s : states)
    if (s.epoch == e && s.resumed_from != out.resumed_from)
      return Status::InvalidArgument("merge_states: the ranks resumed epoch " + std::to_string(e) +
                                     " from different merged states; pass states of one job");
  if (started) out.resumed_from.push_back(std::move(layer));  // else: a fresh start of e
  return out;
}

}  // namespace ssdfeed
