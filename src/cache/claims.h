// Per-sample claims shared by every process using an entry, and the entry's
// record sequence counter. The file is a 64-byte header (magic, next record
// sequence number) and one u32 per sample, mapped shared; a sample's slot holds
// 1 + the writer slot (see writer_slot.h) of the process preparing it, 0 if
// none ever did, kReleased once its preparer let go of it (it may be stored:
// a process that claims it then looks in the index once more). Whether a claimant is alive is asked
// of its writer-slot lock, never of a pid, so claims work across PID namespaces. The file is fully
// allocated when created: a sparse shared mapping on a full disk raises SIGBUS.
// A file cut short while mapped (a group member may truncate it) does too:
// that SIGBUS is caught and the mapping replaced by zeros
// (util/sigbus_guard.h), and
// the process goes on without coordination.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "ssdfeed/env.h"

namespace ssdfeed {

class SigbusGuard;

class Claims {
 public:
  ~Claims();
  // Maps path (creating and allocating it if needed) for n samples, for the
  // process holding writer slot `slot`. alive(s) says whether slot s is held.
  // On failure the object stays unmapped and every claim succeeds (no
  // coordination: duplicated work, never wrong data).
  Status Open(Env* env, const std::string& path, uint64_t n, uint32_t mode, uint32_t slot,
              std::function<bool(uint32_t)> alive);
  bool mapped() const { return base_ != nullptr; }
  // *released (if given) says whether the claim taken had an owner before
  // (one that let go of it, this process included, one that died, or
  // another thread of this process), which may have stored the sample after
  // the caller last looked.
  bool TryClaim(uint64_t id, bool* released = nullptr);
  void Release(uint64_t id);
  // A slot's value after Release. Older versions read it as the claim of a
  // writer slot nobody holds, so they take it over too.
  static constexpr uint32_t kReleased = 0xffffffffu;
  // Next record sequence number for the entry (shared by all writers); when
  // unmapped, one more than the largest `seen`.
  uint64_t NextSeq(uint64_t seen);

 private:
  // A slot that died holding claims is reused by its next writer: that
  // writer drops the stale claims first, so nobody waits on them.
  void DropStaleClaims();
  // Whether the file was cut while mapped (util/sigbus_guard.h); warns once.
  bool Lost();

  Env* env_ = nullptr;
  std::string path_;
  SigbusGuard* guard_ = nullptr;
  std::atomic<bool> warned_{false};
  std::unique_ptr<MappedFile> file_;
  uint8_t* base_ = nullptr;
  uint32_t* slots_ = nullptr;
  uint64_t n_ = 0;
  uint32_t me_ = 0;  // 1 + our writer slot
  std::function<bool(uint32_t)> alive_;
};

}  // namespace ssdfeed
