// SIGBUS guards for shared mappings of files other users may cut short.
//
// In a group-shared root every member of the group may be able to truncate
// a file we have mapped MAP_SHARED (an entry's claims file is 0660 so that
// members can claim); our next access to a page past its new end then
// raises SIGBUS. Nothing done before an access rules that out: a size check
// can be followed at once by the truncation, and a lock binds only those
// who take it. So the fault itself is made harmless: a SIGBUS at an address
// inside a guarded mapping replaces that mapping with anonymous zero pages
// (MAP_FIXED, a single system call, safe in a handler) and returns, and the
// access runs again on the zeros. The owner of the mapping asks lost() and
// decides what zeros mean for it. A SIGBUS anywhere else goes to the
// disposition installed before ours (or kills the process as it would have).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace ssdfeed {

class SigbusGuard {
 public:
  // Guards [start, start + len) until Release (installs the process's
  // handler on first use). nullptr when every guard is taken (256 per
  // process): the caller then must not map a file others may cut.
  static SigbusGuard* Acquire(uint8_t* start, size_t len);
  // Stops guarding: call before the mapping is unmapped. Null is fine.
  static void Release(SigbusGuard* g);
  // True once a fault inside the mapping replaced it with zeros.
  bool lost() const { return lost_.load(std::memory_order_acquire); }

  // For the handler only: replaces the guarded mapping that holds addr with
  // zeros; false when none does. Async-signal-safe.
  static bool RecoverFault(uintptr_t addr);

  SigbusGuard() = default;  // the process's table of guards only

 private:
  // start_ 0: unused. The handler reads only these atomics.
  std::atomic<uintptr_t> start_{0};
  std::atomic<size_t> len_{0};
  std::atomic<bool> lost_{false};
};

}  // namespace ssdfeed
