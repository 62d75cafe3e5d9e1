#include "cache/claims.h"

#include <signal.h>
#include <sys/mman.h>

#include <atomic>
#include <cstring>
#include <mutex>

namespace ssdfeed {

// One guarded mapping (see below); start 0: unused.
struct ClaimsGuard {
  std::atomic<uintptr_t> start{0};
  std::atomic<size_t> len{0};
  std::atomic<bool> lost{false};
};

namespace {

constexpr size_t kHeaderBytes = 64;
constexpr char kMagic[8] = {'S', 'D', 'F', 'C', 'L', 'M', '0', '2'};

// Why a SIGBUS guard. In a group-shared root every member of the group may
// write an entry's claims file, so any of them can truncate it while we have
// it mapped; our next access to a page past its new end then raises SIGBUS.
// Nothing done before an access rules that out: a size check can be followed
// at once by the truncation, a lock binds only those who take it, and
// mapping only files nobody else can write would end coordination in every
// group-shared root (its files are 0660 so that members can claim). So the
// fault itself is made harmless: a SIGBUS at an address inside a guarded
// claims mapping replaces that mapping with anonymous zero pages (MAP_FIXED,
// a single system call, safe in a handler) and returns, and the access runs
// again on the zeros. Zeros are a claims table where every sample is free and
// the sequence counter is 0, so this process goes on filling without
// coordination, as when the file cannot be mapped: samples may be prepared
// twice, never served wrong. A SIGBUS anywhere else goes to the disposition
// installed before ours (or kills the process as it would have).
constexpr size_t kMaxGuarded = 256;
ClaimsGuard g_guarded[kMaxGuarded];
struct sigaction g_prev_sigbus;
std::mutex g_guard_mu;  // registration and installation, never the handler

void OnSigbus(int sig, siginfo_t* info, void* ctx) {
  auto addr = reinterpret_cast<uintptr_t>(info->si_addr);
  // si_code > 0: a fault (a kill(2) carries no address).
  for (ClaimsGuard& g : g_guarded) {
    uintptr_t start = g.start.load(std::memory_order_acquire);
    size_t len = g.len.load(std::memory_order_acquire);
    if (info->si_code <= 0 || start == 0 || addr - start >= len) continue;
    void* p = ::mmap(reinterpret_cast<void*>(start), len, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
    if (p != MAP_FAILED) {
      g.lost.store(true, std::memory_order_release);
      return;
    }
  }
  const struct sigaction& prev = g_prev_sigbus;
  if (prev.sa_flags & SA_SIGINFO) return prev.sa_sigaction(sig, info, ctx);
  if (prev.sa_handler != SIG_DFL && prev.sa_handler != SIG_IGN) return prev.sa_handler(sig);
  // The default: pending again once this handler returns, and it kills.
  struct sigaction dfl = {};
  dfl.sa_handler = SIG_DFL;
  ::sigaction(sig, &dfl, nullptr);
  ::raise(sig);
}

// Once per process. Never again after a handler installed later replaced
// ours: that one may chain to ours, and reinstalling ours over it would
// make a cycle. (Such a handler sees a claims SIGBUS first; if it chains,
// ours still recovers; if not, the process dies as it would have.)
void InstallSigbusHandler() {
  static bool installed = false;
  if (installed) return;
  installed = true;
  struct sigaction sa = {};
  sa.sa_sigaction = OnSigbus;
  sa.sa_flags = SA_SIGINFO | SA_RESTART;
  sigemptyset(&sa.sa_mask);
  ::sigaction(SIGBUS, nullptr, &g_prev_sigbus);  // set before ours can run
  ::sigaction(SIGBUS, &sa, nullptr);
}

// nullptr when every guard is taken: the caller then does not coordinate.
ClaimsGuard* Guard(uint8_t* start, size_t len) {
  std::lock_guard<std::mutex> l(g_guard_mu);
  InstallSigbusHandler();
  for (ClaimsGuard& g : g_guarded) {
    if (g.start.load(std::memory_order_relaxed) != 0) continue;
    g.lost.store(false, std::memory_order_relaxed);
    g.len.store(len, std::memory_order_release);
    g.start.store(reinterpret_cast<uintptr_t>(start), std::memory_order_release);
    return &g;
  }
  return nullptr;
}

void Unguard(ClaimsGuard* g) {
  if (g == nullptr) return;
  std::lock_guard<std::mutex> l(g_guard_mu);
  g->start.store(0, std::memory_order_release);
  g->len.store(0, std::memory_order_release);
}

}  // namespace

Claims::~Claims() {
  Unguard(guard_);  // before file_ unmaps
}

bool Claims::Lost() {
  if (guard_ == nullptr || !guard_->lost.load(std::memory_order_acquire)) return false;
  if (!warned_.exchange(true))
    env_->Warn(path_ + " shrank while in use; filling without coordination (samples may be " +
               "prepared twice)");
  return true;
}

Status Claims::Open(Env* env, const std::string& path, uint64_t n, uint32_t mode, uint32_t slot,
                    std::function<bool(uint32_t)> alive) {
  me_ = slot + 1;
  alive_ = std::move(alive);
  env_ = env;
  path_ = path;
  uint64_t bytes = (kHeaderBytes + n * sizeof(uint32_t) + 4095) / 4096 * 4096;
  MappedFileOptions o;
  o.mode = mode;
  SSDFEED_ASSIGN_OR_RETURN(auto file, env->NewMappedFile(path, bytes, o));
  guard_ = Guard(file->data(), file->size());
  if (guard_ == nullptr) return Status::Aborted("too many claims files mapped in this process");
  file_ = std::move(file);
  base_ = file_->data();
  slots_ = reinterpret_cast<uint32_t*>(base_ + kHeaderBytes);
  n_ = n;
  if (std::memcmp(base_, kMagic, sizeof(kMagic)) != 0) std::memcpy(base_, kMagic, sizeof(kMagic));
  DropStaleClaims();
  return Status::OK();
}

void Claims::DropStaleClaims() {
  for (uint64_t i = 0; i < n_; ++i) {
    std::atomic_ref<uint32_t> slot(slots_[i]);
    uint32_t cur = me_;
    // The dead predecessor may have stored the sample before it died.
    if (slot.load(std::memory_order_relaxed) == me_)
      slot.compare_exchange_strong(cur, kReleased, std::memory_order_acq_rel);
  }
}

bool Claims::TryClaim(uint64_t id, bool* released) {
  if (released != nullptr) *released = false;
  if (slots_ == nullptr || id >= n_ || Lost()) return true;  // no coordination: go ahead
  std::atomic_ref<uint32_t> slot(slots_[id]);
  uint32_t cur = slot.load(std::memory_order_acquire);
  if (cur == me_) {  // another thread of ours: fine, bounded
    // It may have put the sample since this thread missed it.
    if (released != nullptr) *released = true;
    return true;
  }
  if (cur != 0 && cur != kReleased && alive_(cur - 1)) return false;
  // Free, or its owner died: take it. Any owner it had, dead or done, may
  // have stored the sample.
  bool took = slot.compare_exchange_strong(cur, me_, std::memory_order_acq_rel);
  if (took && cur != 0 && released != nullptr) *released = true;
  return took;
}

void Claims::Release(uint64_t id) {
  if (slots_ == nullptr || id >= n_) return;
  std::atomic_ref<uint32_t> slot(slots_[id]);
  uint32_t me = me_;
  slot.compare_exchange_strong(me, kReleased, std::memory_order_acq_rel);
}

uint64_t Claims::NextSeq(uint64_t seen) {
  if (base_ == nullptr) return seen + 1;
  std::atomic_ref<uint64_t> seq(*reinterpret_cast<uint64_t*>(base_ + 8));
  // Never behind what is on disk (a claims file rebuilt after a crash).
  uint64_t cur = seq.load(std::memory_order_relaxed);
  while (cur <= seen && !seq.compare_exchange_weak(cur, seen + 1, std::memory_order_relaxed)) {
  }
  return seq.fetch_add(1, std::memory_order_relaxed) + 1;
}

}  // namespace ssdfeed
